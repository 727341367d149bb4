"""FedAvg (McMahan et al., AISTATS 2017).

Local SGD from the global model, then w ← Σ_{k∈S} (n_k / Σ_{j∈S} n_j) · w_k over the uploading clients S; all hooks
are the base-class defaults.
"""

from __future__ import annotations

from fedlib.algorithms.base import Algorithm

__all__ = ["FedAvg"]


class FedAvg(Algorithm):
    """Federated averaging; no hyper-parameters."""

    name = "fedavg"
