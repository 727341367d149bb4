"""FedRS: restricted softmax (Li & Zhan, KDD 2021, "FedRS: Federated Learning with Restricted Softmax for
Label Distribution Non-IID Data").

During local training on client k the logits of the classes the client does NOT hold are scaled by α:

    z̃_c = s_c · z_c,   s_c = 1 if n_{k,c} > 0 else α,      loss = CE(softmax(z̃), y)

so the "missing" classes are pushed less (their classifier rows get smaller updates).  α = 1 recovers plain
cross-entropy exactly; the FedEntOpt paper uses α = 0.5 (§V-A5).  Aggregation is FedAvg.

Note: the authors' public code scales the classifier's bias-free logits by the soft factor
α + (1 − α)·n_c / max_c n_c; fedlib follows the paper's restricted softmax (binary presence mask on the full
logits), which is what the brief and the FedEntOpt paper describe.

Context (``client_context``): ``{"scale": (C,) float}`` -- the per-class factor s; a batched caller stacks it
to (M, C).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .._validate import check_float
from .base import Algorithm

__all__ = ["FedRS"]


class FedRS(Algorithm):
    """FedRS with scaling factor ``alpha`` ∈ [0, 1] for absent classes (default 0.5)."""

    name = "fedrs"
    needs_label_counts = True

    def __init__(self, alpha: float = 0.5) -> None:
        super().__init__()
        self.alpha = check_float("fedrs alpha", alpha, low=0.0, high=1.0)

    def params_dict(self) -> dict:
        return {"alpha": self.alpha}

    def client_context(self, client_id, label_counts, server_state, client_state):
        counts = torch.as_tensor(label_counts, dtype=torch.float32)
        one = torch.ones_like(counts)
        return {"scale": torch.where(counts > 0, one, one * self.alpha)}

    def loss(self, logits, y, *, params, global_params, ctx):
        scale = ctx["scale"].to(logits.dtype)
        return F.cross_entropy(logits * scale, y)
