"""fedlib: entropy-based client selection (FedEntOpt) and the federated-learning baselines it is compared with.

``import fedlib`` gives the names a user needs (:data:`__all__`); each is imported from its subpackage when first
used, so ``import fedlib`` itself stays light (no torch). The subpackages:

- :mod:`fedlib.data`: data sets, label profiles, partitions, augmentation;
- :mod:`fedlib.selection`: the selectors, their scorers, defences, label DP, label metrics;
- :mod:`fedlib.algorithms`: FedAvg, FedProx, FedNova, SCAFFOLD, FedRS, FedLC, FedConcat, FedEntropy;
- :mod:`fedlib.training`: configuration, trainer, local and batched training, models, the run store, sweeps;
- :mod:`fedlib.label_only`: selection runs from label counts alone, at any scale;
- :mod:`fedlib.flower`: FedEntOpt as a Flower strategy (optional extra).

The reproduction of the FedEntOpt paper (its statements, rules, tiers, stored results and the book's pages) is not
part of the library: it lives beside it in the repository and runs from the checkout.
"""

from __future__ import annotations

import importlib

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


def __getattr__(name: str):
    if name in _API:
        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fedlib' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})
