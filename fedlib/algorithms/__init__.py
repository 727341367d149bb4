"""Federated algorithms and their registry.

``make_algorithm(name, **params)`` builds one; ``ALGORITHMS`` lists the names.  The contract every algorithm
follows (hook signatures, what a vmapped caller stacks, the round-shape hooks) is documented in
``fedlib.algorithms.base``.  A new algorithm is one module here plus one registry entry (``_EAGER`` or ``_LAZY``
below; ``register_algorithm`` adds one at run time, e.g. in a test).

Names and parameters (defaults are the FedEntOpt paper's, §V-A5):
  ``fedavg``      --
  ``fedprox``     ``mu=1e-4``
  ``fednova``     --
  ``scaffold``    ``correction="gradient"`` (or ``"after_step"``, NIID-Bench's), ``normaliser`` (``"momentum"`` or
                  ``"steps"``, the literal K·η; default by correction)
  ``fedrs``       ``alpha=0.5``
  ``fedlc``       ``tau=1.0``, ``zero_count=1e-8``
  ``fedconcat``   see ``fedlib.algorithms.fedconcat`` (imported lazily)
  ``fedentropy``  see ``fedlib.algorithms.fedentropy`` (imported lazily)
"""
from __future__ import annotations

import importlib
import inspect

from .base import Algorithm
from .fedavg import FedAvg
from .fedlc import FedLC
from .fednova import FedNova
from .fedprox import FedProx
from .fedrs import FedRS
from .scaffold import Scaffold

__all__ = ["Algorithm", "ALGORITHMS", "make_algorithm", "algorithm_class", "register_algorithm",
           "unregister_algorithm", "FedAvg", "FedProx", "FedNova", "Scaffold", "FedRS", "FedLC"]

_EAGER = {"fedavg": FedAvg, "fedprox": FedProx, "fednova": FedNova, "scaffold": Scaffold, "fedrs": FedRS,
          "fedlc": FedLC}
# lazy entries: name -> (module, class name); resolved on first use
_LAZY = {"fedconcat": ("fedlib.algorithms.fedconcat", "FedConcat"),
         "fedentropy": ("fedlib.algorithms.fedentropy", "FedEntropy")}

ALGORITHMS = tuple(_EAGER) + tuple(_LAZY)
_BUILT_IN = frozenset(ALGORITHMS)


def register_algorithm(name: str, cls: type) -> None:
    """Add the ``Algorithm`` subclass ``cls`` under ``name`` (an error if the name is taken)."""
    global ALGORITHMS
    if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
        raise TypeError(f"cls must be a subclass of fedlib.algorithms.Algorithm (got {cls!r}).")
    if name in ALGORITHMS:
        raise ValueError(f"algorithm {name!r} is registered already.")
    _EAGER[name] = cls
    ALGORITHMS = ALGORITHMS + (name,)


def unregister_algorithm(name: str) -> None:
    """Remove an algorithm added by ``register_algorithm``."""
    global ALGORITHMS
    if name not in _EAGER or name in _BUILT_IN:
        raise ValueError(f"algorithm {name!r} was not added by register_algorithm.")
    del _EAGER[name]
    ALGORITHMS = tuple(n for n in ALGORITHMS if n != name)


def algorithm_class(name: str):
    """The class registered under ``name`` (imports lazy entries; ImportError if their module is missing)."""
    if name in _EAGER:
        return _EAGER[name]
    if name in _LAZY:
        module, cls = _LAZY[name]
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            raise ImportError(f"algorithm {name!r} is registered but its module {module} is not available "
                              f"({exc}).") from exc
        return getattr(mod, cls)
    allowed = ", ".join(repr(n) for n in ALGORITHMS)
    raise ValueError(f"algorithm must be one of {allowed} (got {name!r}).")


def make_algorithm(name: str, **params) -> Algorithm:
    """Build the algorithm ``name`` with hyper-parameters ``params``; unknown names or parameters are errors."""
    cls = algorithm_class(name)
    sig = inspect.signature(cls.__init__)
    accepted = [p for p in sig.parameters if p != "self" and sig.parameters[p].kind
                in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)]
    has_var_kw = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    unknown = [k for k in params if k not in accepted]
    if unknown and not has_var_kw:
        allowed = ", ".join(accepted) if accepted else "none"
        raise ValueError(f"algorithm {name!r} got unknown parameter(s) {', '.join(unknown)} "
                         f"(allowed: {allowed}).")
    return cls(**params)
