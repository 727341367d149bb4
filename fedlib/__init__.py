"""fedlib: entropy-based client selection (FedEntOpt) and the federated-learning baselines it is compared with.

The names of :data:`__all__` are imported from their subpackages (``data``, ``selection``, ``algorithms``,
``training``, ``label_only``; ``flower`` is an optional extra) on first use, so ``import fedlib`` needs no torch.
"""

from __future__ import annotations

import importlib

__version__ = "0.2.0"  # bump when a change alters what training computes (it keys the run cache)

#: The public API by defining module (``_API``: name -> module).
_MODULES = {
    "fedlib.training.config": "ExperimentConfig",
    "fedlib.training.trainer": "run_experiment",
    "fedlib.training.runs": "RunResult",
    "fedlib.training.models": "make_model",
    "fedlib.selection.selectors": (
        "Selector RandomSelector FedEntOptSelector KLSelector DCSelector SELECTORS make_selector register_selector"
    ),
    "fedlib.selection.privacy": "laplace_counts",
    "fedlib.selection.metrics": "entropy_bits pooled_entropy covers_all_classes selection_entropy_norm",
    "fedlib.algorithms": "Algorithm ALGORITHMS make_algorithm",
    "fedlib.data.partition": "partition dirichlet_partition quantity_partition iid_partition PartitionError",
    "fedlib.data.datasets": "load_dataset dataset_names",
    "fedlib.data.profiles": "get_profile",
    "fedlib.label_only.simulate": "run_selection",
    "fedlib._validate": "ParameterError",
}
_API = {name: module for module, names in _MODULES.items() for name in names.split()}
__all__ = sorted([*_API, "__version__"])


def __getattr__(name: str):
    if name in _API:
        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fedlib' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})
