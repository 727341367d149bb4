"""FedEntOpt's incremental entropy scores (:mod:`fedlib.selection.scoring`) in torch, for a GPU; select them with
``scorer_path("torch", device="cuda")``."""

from __future__ import annotations

import numpy as np
import torch

from fedlib.selection._count_layout import _TINY, ENTROPY_TIE_TOL, _class_columns, _group_by_value, _row_reader


def _f(x: torch.Tensor) -> torch.Tensor:
    """``x log2 x`` with ``0 log 0 = 0``."""
    return x * torch.log2(torch.clamp(x, min=_TINY))


class TorchScorer:
    """:class:`fedlib.selection.scoring.IncrementalScorer` on a torch device, a fixed number of kernels per step.

    Every slot's change is computed (0 for the classes the pick does not hold) and added to ``D`` by one
    ``index_add_``; on CUDA its order is not fixed, so ``D`` may differ between runs in the last bits, far below
    :data:`~fedlib.selection.scoring.ENTROPY_TIE_TOL`.
    """

    def __init__(self, counts, *, device=None):
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.shape = num_clients, num_classes = counts.shape
        col_ptr, rows, vals = _class_columns(counts)
        integer = bool(np.array_equal(vals, np.rint(vals)))
        rows, slot_ptr, slot_vals, class_slots = _group_by_value(col_ptr, rows, vals, integer)
        slot_len = np.diff(slot_ptr)
        own = np.bincount(
            rows, weights=np.repeat(slot_vals * np.log2(np.maximum(slot_vals, _TINY)), slot_len), minlength=num_clients
        )
        sizes = np.bincount(rows, weights=np.repeat(slot_vals, slot_len), minlength=num_clients)

        def dev(a, dtype):
            return torch.as_tensor(np.ascontiguousarray(a), dtype=dtype, device=self.device)

        self._rows = dev(rows, torch.int64)
        self._slot_of = dev(np.repeat(np.arange(slot_vals.size), slot_len), torch.int64)
        self._slot_cls = dev(np.repeat(np.arange(num_classes), np.diff(class_slots)), torch.int64)
        self._slot_vals = dev(slot_vals, torch.float64)
        self._d, self._sizes = dev(own, torch.float64), dev(sizes, torch.float64)
        self._row_of = _row_reader(counts)
        self._pooled = torch.zeros(self.shape[1], dtype=torch.float64, device=self.device)
        self._total = 0.0

    @property
    def pooled(self) -> np.ndarray:
        return self._pooled.cpu().numpy()

    def add(self, m: int) -> None:
        """Add client ``m`` to the pool and update ``D`` of every client (0 for those sharing no class)."""
        cls, x = self._row_of(m)
        if cls.size == 0:
            return
        step = torch.zeros_like(self._pooled)
        step[torch.as_tensor(cls, device=self.device)] = torch.as_tensor(x, dtype=torch.float64, device=self.device)
        a = self._pooled[self._slot_cls]
        b = a + step[self._slot_cls]
        new_pooled = self._pooled + step
        jump = _f(new_pooled) - _f(self._pooled)
        delta = _f(b + self._slot_vals) - _f(a + self._slot_vals) - jump[self._slot_cls]
        self._d.index_add_(0, self._rows, delta[self._slot_of])
        self._pooled = new_pooled
        self._total += float(x.sum())

    def scores(self) -> torch.Tensor:
        """H(L + l^(k)) of every client on the device, shape (K,)."""
        s = self._total + self._sizes
        positive = s > 0
        safe = torch.where(positive, s, torch.ones_like(s))
        h = torch.log2(safe) - (self._d + _f(self._pooled).sum()) / safe
        return torch.clamp(torch.where(positive, h, torch.zeros_like(h)), min=0.0)

    def pick(self, blocked: np.ndarray) -> int:
        """The unblocked client maximising H(L + l^(k)) (ties within ENTROPY_TIE_TOL: lowest index)."""
        h = self.scores()
        h[torch.as_tensor(blocked, device=self.device)] = -torch.inf
        best = h.max()
        return int(torch.argmax((h >= best - ENTROPY_TIE_TOL).to(torch.uint8)))
