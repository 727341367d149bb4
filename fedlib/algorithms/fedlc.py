"""FedLC: logit calibration (Zhang et al., ICML 2022, "Federated Learning with Label Distribution Skew via
Logits Calibration").

Client k trains with calibrated logits, subtracting a class-dependent margin that grows as the class gets
rarer on that client (eq. (8) of the paper):

    z̃_c = z_c − τ · n_{k,c}^{−1/4},          loss = CE(softmax(z̃), y)

with ``n_{k,c}`` the client's number of training samples of class c.  τ = 0 is plain cross-entropy exactly;
the FedEntOpt paper uses τ = 1 (§V-A5).  Aggregation is FedAvg.

Absent classes (n_{k,c} = 0): ``0^{-1/4}`` is infinite.  As in the public FedLC implementations (FL-bench,
``src/client/fedlc.py``, which counts absent labels as ``1e-8``; PFLlib's ``clientlc`` likewise), fedlib
replaces a zero count with ``zero_count = 1e-8``, giving those classes a finite margin of ``τ · 100``.
The choice matters under #C = 2: with 1e-8 the subset tier's FedLC runs stay at one-class predictions, where
``zero_count = 1`` (a margin of τ) starts learning.

Context (``client_context``): ``{"margin": (C,) float}`` = τ·n_c^{−1/4}; a batched caller stacks it to (M, C).
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
