"""FedProx (Li et al., MLSys 2020): FedAvg with a proximal term in the local objective.

Client k minimises F_k(w) + (μ/2)·‖w − w_g‖² over the trainable parameters, w_g the round's global model; FedEntOpt
uses μ = 1e-4 (§V-A5). μ = 0 is FedAvg bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from fedlib._validate import check_float
from fedlib.algorithms.base import Algorithm, HParams

__all__ = ["FedProx"]


class FedProx(Algorithm):
    """FedProx with proximal weight ``mu`` (default 1e-4, the value the FedEntOpt paper selected)."""

    name = "fedprox"

    @dataclass(frozen=True)
    class HParams(HParams):
        """``mu`` >= 0: the proximal weight μ."""

        mu: float = 1e-4

        def __post_init__(self):
            object.__setattr__(self, "mu", check_float("mu", self.mu, low=0.0))

    def loss(self, logits, y, *, params, global_params, ctx):
        ce = F.cross_entropy(logits, y)
        mu = self.hparams.mu
        if self.trainable and logits.is_cuda:
            return ce + (mu / 2.0) * _flat_sq_distance(params, global_params, self.trainable)
        prox = None
        for k in self.trainable:  # CPU: per tensor, the order the stored runs were computed in
            d = params[k] - global_params[k]
            s = (d * d).sum()
            prox = s if prox is None else prox + s
        if prox is None:
            return ce
        return ce + (mu / 2.0) * prox


def _flat_sq_distance(params, global_params, keys):
    """‖w − w_g‖² over ``keys`` as one flat vector (few kernels per step); its summation order differs from the
    per-tensor loop's, so it is used on CUDA only and CPU results stay bit for bit."""
    w = torch.cat([params[k].reshape(-1) for k in keys])
    g = torch.cat([global_params[k].reshape(-1) for k in keys])
    d = w - g
    return (d * d).sum()
