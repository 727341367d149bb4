"""fedlib: entropy-based client selection (FedEntOpt) and the federated-learning baselines it is compared with.

The names of :data:`__all__` are imported from their subpackages (``data``, ``selection``, ``algorithms``,
``training``, ``label_only``; ``flower`` is an optional extra) on first use, so ``import fedlib`` needs no torch.
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
