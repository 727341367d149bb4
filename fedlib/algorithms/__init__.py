"""Federated algorithms and their registry.

``make_algorithm(name, **params)`` builds one, ``ALGORITHMS`` lists the names; a bad name or parameter is a
``fedlib._validate.ParameterError``. The contract is in ``fedlib.algorithms.base``.

Budget about 1,300 lines; over it because FedConcat (clustering, per-cluster FedAvg, a classifier phase on
concatenated encoders) and FedEntropy (soft labels, a re-selection judgement) are whole methods with rounds of
their own, not a loss term.

Names and parameters (defaults are the FedEntOpt paper's, §V-A5):
  ``fedavg``      --
  ``fedprox``     ``mu=1e-4``
  ``fednova``     --
  ``scaffold``    ``normaliser=None`` (``"momentum"`` or ``"steps"``, the literal K·η; None: by correction),
                  ``correction="gradient"`` (or ``"after_step"``, NIID-Bench's)
  ``fedrs``       ``alpha=0.5``
  ``fedlc``       ``tau=1.0``, ``zero_count=1e-8``
  ``fedconcat``   see ``fedlib.algorithms.fedconcat``
  ``fedentropy``  see ``fedlib.algorithms.fedentropy``
"""

from __future__ import annotations

from fedlib._validate import ParameterError
from fedlib.algorithms.base import Algorithm, HParams
from fedlib.algorithms.fedavg import FedAvg
from fedlib.algorithms.fedconcat import FedConcat
from fedlib.algorithms.fedentropy import FedEntropy
from fedlib.algorithms.fedlc import FedLC
from fedlib.algorithms.fednova import FedNova
from fedlib.algorithms.fedprox import FedProx
from fedlib.algorithms.fedrs import FedRS
from fedlib.algorithms.scaffold import Scaffold

__all__ = [
    "Algorithm",
    "HParams",
    "ALGORITHMS",
    "make_algorithm",
    "algorithm_class",
    "register_algorithm",
    "unregister_algorithm",
    "FedAvg",
    "FedProx",
    "FedNova",
    "Scaffold",
    "FedRS",
    "FedLC",
    "FedConcat",
    "FedEntropy",
]

_REGISTRY = {
    "fedavg": FedAvg,
    "fedprox": FedProx,
    "fednova": FedNova,
    "scaffold": Scaffold,
    "fedrs": FedRS,
    "fedlc": FedLC,
    "fedconcat": FedConcat,
    "fedentropy": FedEntropy,
}
ALGORITHMS = tuple(_REGISTRY)
_BUILT_IN = frozenset(ALGORITHMS)


def register_algorithm(name: str, cls: type) -> None:
    """Add the ``Algorithm`` subclass ``cls`` under ``name`` (an error if the name is taken)."""
    global ALGORITHMS
    if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
        raise ParameterError(None, "cls", cls, "a subclass of fedlib.algorithms.Algorithm")
    if not (isinstance(cls.HParams, type) and issubclass(cls.HParams, HParams)):
        allowed = "an Algorithm whose HParams is a subclass of fedlib.algorithms.HParams (its hyper-parameters)"
        raise ParameterError(None, "cls", cls, allowed, got=f"{cls.__name__} with HParams {cls.HParams!r}")
    if name in ALGORITHMS:
        raise ParameterError(None, "name", name, f"a name not registered yet (registered: {', '.join(ALGORITHMS)})")
    _REGISTRY[name] = cls
    ALGORITHMS = ALGORITHMS + (name,)


def unregister_algorithm(name: str) -> None:
    """Remove an algorithm added by ``register_algorithm``."""
    global ALGORITHMS
    if name not in _REGISTRY or name in _BUILT_IN:
        added = ", ".join(repr(n) for n in _REGISTRY if n not in _BUILT_IN) or "none so far"
        raise ParameterError(None, "name", name, f"a name added by register_algorithm ({added})")
    del _REGISTRY[name]
    ALGORITHMS = tuple(n for n in ALGORITHMS if n != name)


def algorithm_class(name: str):
    """The class registered under ``name``."""
    if name not in _REGISTRY:
        raise ParameterError("algorithm", "name", name, ", ".join(repr(n) for n in ALGORITHMS))
    return _REGISTRY[name]


def make_algorithm(name: str, **params) -> Algorithm:
    """Build the algorithm ``name`` with hyper-parameters ``params`` (the fields of its ``HParams``).

    >>> make_algorithm("fedprox", mu=0.01)
    FedProx(mu=0.01)
    """
    return algorithm_class(name)(**params)
