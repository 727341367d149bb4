"""fedlib: entropy-based client selection (FedEntOpt) and the federated-learning baselines it is compared with.

``import fedlib`` gives the names a user needs (:data:`__all__`); each is imported from its subpackage when first
used, so ``import fedlib`` itself stays light (no torch). The subpackages:

- :mod:`fedlib.data`: data sets, label profiles, partitions, augmentation;
- :mod:`fedlib.selection`: the selectors, their scorers, defences, label DP, label metrics;
- :mod:`fedlib.algorithms`: FedAvg, FedProx, FedNova, SCAFFOLD, FedRS, FedLC, FedConcat, FedEntropy;
- :mod:`fedlib.training`: configuration, trainer, local and batched training, models, the run store, sweeps;
- :mod:`fedlib.label_only`: studies from label counts alone (selection runs, cross-device scale, lying clients);
- :mod:`fedlib.reproduction`: the reproduction of the FedEntOpt paper (its values, claims, tiers, stored results,
  the book's pages), apart from the library;
- :mod:`fedlib.flower`: FedEntOpt as a Flower strategy (optional extra).

The modules that sat directly under ``fedlib`` before issue 22 moved into these packages; importing one by
its old name fails with a message that names the new one (:data:`MOVED`).
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys

__version__ = "0.2.0"  # bump when a change alters what training computes (it keys the run cache)

#: The public API: name -> the module that defines it.
_API = {
    "ExperimentConfig": "fedlib.training.config",
    "ConfigError": "fedlib.training.config",
    "run_experiment": "fedlib.training.trainer",
    "RunResult": "fedlib.training.runs",
    "make_model": "fedlib.training.models",
    "Selector": "fedlib.selection.selectors",
    "RandomSelector": "fedlib.selection.selectors",
    "FedEntOptSelector": "fedlib.selection.selectors",
    "KLSelector": "fedlib.selection.selectors",
    "DCSelector": "fedlib.selection.selectors",
    "SwapImprovedSelector": "fedlib.selection.selectors",
    "SELECTORS": "fedlib.selection.selectors",
    "make_selector": "fedlib.selection.selectors",
    "laplace_counts": "fedlib.selection.privacy",
    "entropy_bits": "fedlib.selection.metrics",
    "pooled_entropy": "fedlib.selection.metrics",
    "covers_all_classes": "fedlib.selection.metrics",
    "selection_entropy_norm": "fedlib.selection.metrics",
    "Algorithm": "fedlib.algorithms",
    "ALGORITHMS": "fedlib.algorithms",
    "make_algorithm": "fedlib.algorithms",
    "partition": "fedlib.data.partition",
    "dirichlet_partition": "fedlib.data.partition",
    "quantity_partition": "fedlib.data.partition",
    "iid_partition": "fedlib.data.partition",
    "PartitionError": "fedlib.data.partition",
    "load_dataset": "fedlib.data.datasets",
    "dataset_names": "fedlib.data.datasets",
    "get_profile": "fedlib.data.profiles",
    "run_selection": "fedlib.label_only.simulate",
    "ParameterError": "fedlib._validate",
}
__all__ = sorted([*_API, "__version__"])

#: fedlib 0.2's flat modules -> where they live now.
MOVED = {
    **{
        f"fedlib.{m}": f"fedlib.data.{m}"
        for m in ("datasets", "profiles", "partition", "augment", "fake_data", "_torchvision")
    },
    "fedlib.selection": "fedlib.selection.selectors",
    **{
        f"fedlib.{m}": f"fedlib.selection.{m}"
        for m in ("scoring", "_torch_scoring", "_count_layout", "best_subset", "defence", "privacy", "metrics")
    },
    "fedlib.kmeans": "fedlib.algorithms.kmeans",
    **{
        f"fedlib.{m}": f"fedlib.training.{m}"
        for m in (
            "config",
            "trainer",
            "local",
            "batched",
            "models",
            "runs",
            "distributed",
            "cost_model",
            "numerics",
            "float_env",
        )
    },
    **{
        f"fedlib.{m}": f"fedlib.label_only.{m}"
        for m in ("simulate", "label_studies", "cross_device", "adversarial", "greedy_gap")
    },
    "fedlib.paper": "fedlib.reproduction.paper_values",
    **{
        f"fedlib.{m}": f"fedlib.reproduction.{m}"
        for m in (
            "claims",
            "tiers",
            "results",
            "reporting",
            "significance",
            "paper_tier",
            "notebook",
            "static_controls",
            "plateau",
            "scorecard",
            "machine_spread",
            "adversarial_runs",
            "participation",
            "label_tables",
            "communication",
        )
    },
}
#: ``fedlib.selection`` is a package now: an old ``from fedlib.selection import FedEntOptSelector`` names a package
#: that exists; Python then looks for a submodule ``fedlib.selection.FedEntOptSelector``, which is refused here.
_PACKAGES_NOW = {"fedlib.selection"}
_OLD_SELECTION_NAMES = (
    "Selector",
    "RandomSelector",
    "FedEntOptSelector",
    "KLSelector",
    "DCSelector",
    "SwapImprovedSelector",
    "SELECTORS",
    "make_selector",
    "buffer_size_from_fraction",
    "ENTROPY_TIE_TOL",
)


def moved_message(old: str) -> str:
    """The error for an import of a module (or of a name of fedlib 0.2's ``fedlib.selection``) by its old path."""
    package, _, name = old.rpartition(".")
    if package == "fedlib.selection" and name in _OLD_SELECTION_NAMES:
        return (
            f"fedlib.selection.{name} moved to fedlib.selection.selectors.{name} (issue 22); import "
            f"it from there: `from fedlib.selection.selectors import {name}` (or `from fedlib import {name}`)."
        )
    new_package, _, new_name = MOVED[old].rpartition(".")
    return (
        f"{old} moved to {MOVED[old]} (issue 22: the library's modules sit in subpackages); "
        f"import it from there: `from {new_package} import {new_name}`."
    )


def _moved(fullname: str) -> bool:
    package, _, name = fullname.rpartition(".")
    return (fullname in MOVED and fullname not in _PACKAGES_NOW) or (
        package == "fedlib.selection" and name in _OLD_SELECTION_NAMES
    )


class _MovedFinder(importlib.abc.MetaPathFinder):
    """Refuses an old module path with :func:`moved_message` (before Python reports a bare 'No module named')."""

    def find_spec(self, fullname, path, target=None):
        if _moved(fullname):
            # no ``name=``: ``from fedlib import tiers`` would otherwise swallow it and say only "cannot import name"
            raise ModuleNotFoundError(moved_message(fullname))
        return None


if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _MovedFinder())


def __getattr__(name: str):
    if name in _API:
        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value
        return value
    if _moved(f"fedlib.{name}"):
        raise AttributeError(moved_message(f"fedlib.{name}"))
    raise AttributeError(f"module 'fedlib' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})
