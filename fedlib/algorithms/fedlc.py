"""FedLC: logit calibration (Zhang et al., ICML 2022).

Eq. (8): client k trains on z̃_c = z_c − τ · n_{k,c}^{−1/4} with its class counts n_{k,c}; aggregation is FedAvg.
τ = 0 is plain cross-entropy; FedEntOpt uses τ = 1 (§V-A5).

An absent class (n = 0) counts as ``zero_count`` (default 1e-8, as FL-bench and PFLlib), a margin of τ · 100.
Context: ``{"margin": (C,)}`` = τ·n_c^{−1/4}.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from fedlib._validate import check_float
from fedlib.algorithms.base import Algorithm, HParams

__all__ = ["FedLC"]


class FedLC(Algorithm):
    """FedLC with calibration strength ``tau`` ≥ 0 (default 1.0) and ``zero_count`` for absent classes."""

    name = "fedlc"
    needs_label_counts = True

    @dataclass(frozen=True)
    class HParams(HParams):
        """``tau`` >= 0: the calibration strength τ; ``zero_count`` > 0: the count of an absent class."""

        tau: float = 1.0
        zero_count: float = 1e-8

        def __post_init__(self):
            object.__setattr__(self, "tau", check_float("tau", self.tau, low=0.0))
            object.__setattr__(self, "zero_count", check_float("zero_count", self.zero_count, low=0.0, low_open=True))

    def client_context(self, client_id, label_counts, server_state, client_state):
        hp = self.hparams
        counts = torch.as_tensor(label_counts, dtype=torch.float64)
        counts = torch.where(counts > 0, counts, torch.full_like(counts, hp.zero_count))
        return {"margin": (hp.tau * counts.pow(-0.25)).to(torch.float32)}

    def loss(self, logits, y, *, params, global_params, ctx):
        return F.cross_entropy(logits - ctx["margin"].to(logits.dtype), y)
