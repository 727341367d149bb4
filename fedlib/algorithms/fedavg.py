"""FedAvg (McMahan et al., AISTATS 2017).

Clients run E local epochs of SGD on the cross-entropy loss from the global model ``w``; the server averages
the returned models weighted by data size:

    w ← Σ_{k∈S} (n_k / Σ_{j∈S} n_j) · w_k

(over the clients S that uploaded this round).  All hooks are the base-class defaults.
"""

from __future__ import annotations

from fedlib.algorithms.base import Algorithm

__all__ = ["FedAvg"]


class FedAvg(Algorithm):
    """Federated averaging; no hyper-parameters."""

    name = "fedavg"
