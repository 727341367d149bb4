"""FedRS: restricted softmax (Li & Zhan, KDD 2021).

On client k the logits of the classes it does not hold are scaled by α: z̃_c = s_c · z_c with s_c = 1 if n_{k,c} > 0
else α, loss = CE(softmax(z̃), y); aggregation is FedAvg. α = 1 is plain cross-entropy; FedEntOpt uses α = 0.5.

``variant="paper"`` (default, all stored runs) scales the model's logits w_c^T h + b_c as above (the paper has no
bias). ``"reference-code"`` is the authors' FedRepo code: s_c = α + (1 − α)·n_{k,c} / max_c n_{k,c} on the
bias-free logits (the classifier's bias, the last trainable ``*bias`` of shape (C,), is subtracted); its loss
depends on a parameter per sample, so the batched engine trains it client by client. Context: ``{"scale": (C,)}``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from fedlib._validate import check_choice, check_float
from fedlib.algorithms.base import Algorithm, HParams

__all__ = ["FedRS"]


VARIANTS = ("paper", "reference-code")


class FedRS(Algorithm):
    """FedRS with scaling factor ``alpha`` ∈ [0, 1] for absent classes (default 0.5); ``variant`` in
    {"paper", "reference-code"} (module docstring)."""

    name = "fedrs"
    needs_label_counts = True

    @dataclass(frozen=True)
    class HParams(HParams):
        """``alpha`` in [0, 1]: the factor of absent classes; ``variant`` in ``VARIANTS``."""

        alpha: float = 0.5
        variant: str = "paper"

        def __post_init__(self):
            object.__setattr__(self, "alpha", check_float("alpha", self.alpha, low=0.0, high=1.0))
            check_choice("variant", self.variant, VARIANTS)

    @property
    def supports_batched(self) -> bool | None:
        """False for ``"reference-code"`` (its loss depends on a parameter per sample); None (decided by the
        batched engine's list) for ``"paper"``."""
        return False if self.hparams.variant == "reference-code" else None

    def client_context(self, client_id, label_counts, server_state, client_state):
        alpha = self.hparams.alpha
        counts = torch.as_tensor(label_counts, dtype=torch.float32)
        one = torch.ones_like(counts)
        if self.hparams.variant == "reference-code":
            return {"scale": alpha + (1.0 - alpha) * counts / counts.max().clamp_min(1.0)}
        return {"scale": torch.where(counts > 0, one, one * alpha)}

    def _classifier_bias(self, params, num_classes):
        for k in reversed(self.trainable):
            if k.endswith("bias") and k in params and tuple(params[k].shape) == (num_classes,):
                return params[k]
        return None

    def loss(self, logits, y, *, params, global_params, ctx):
        scale = ctx["scale"].to(logits.dtype)
        if self.hparams.variant == "reference-code":
            bias = self._classifier_bias(params, logits.shape[-1])
            if bias is not None:
                logits = logits - bias
        return F.cross_entropy(logits * scale, y)
