"""Entropy scores of FedEntOpt's greedy step (line 9 of Algorithm 1 of v2) and the KL baseline.

The selectors score line 9 plainly (:func:`fedlib.selection.selectors.fedentopt_round`) or, for large pools,
with :class:`IncrementalScorer`, which keeps every client's score up to date and picks the same clients.
"""

from __future__ import annotations

import contextlib

import numpy as np
import scipy.sparse as sp

from fedlib._validate import ParameterError, check_choice
from fedlib.selection._count_layout import _TINY, ENTROPY_TIE_TOL, _class_columns, _group_by_value, _row_reader

__all__ = [
    "ENTROPY_TIE_TOL",
    "SCORER_PATHS",
    "AUTO_PLAIN_ENTRIES",
    "scorer_path",
    "first_best",
    "fast_scorer",
    "IncrementalScorer",
]

#: How line 9 is scored: "auto" (incremental for non-negative counts with more than :data:`AUTO_PLAIN_ENTRIES`
#: entries K x C, plain otherwise), "plain" (the entropy of ``L + l^(m)`` for every candidate), "incremental"
#: (:class:`IncrementalScorer`), "torch" (the same in torch).
SCORER_PATHS = ("auto", "plain", "incremental", "torch")

#: Up to this many count entries K x C "auto" scores plainly: for a small pool, rescoring every candidate costs less
#: than building and updating the incremental scorer each round (``benchmarks/bench_selection.py --parts small``).
AUTO_PLAIN_ENTRIES = 10_000

_DEFAULT = {"path": "auto", "device": None}  # what path=None means; set with scorer_path
_XLOG_TABLE_MAX = 1 << 22  # largest table of f(n) = n log2 n (entries); above it f is computed with logs


@contextlib.contextmanager
def scorer_path(path: str = "auto", *, device=None):
    """Within the block FedEntOpt and KL score with ``path`` (one of :data:`SCORER_PATHS`; ``"torch"`` on
    ``device``, default CUDA if available). Every path picks the same clients::

        with fedlib.selection.scoring.scorer_path("torch", device="cuda"):
            trace = run_selection(counts, FedEntOptSelector(buffer_fraction=0.5), 1000, 500, seed=0)
    """
    check_choice("path", path, SCORER_PATHS)
    before = dict(_DEFAULT)
    _DEFAULT.update(path=path, device=device)
    try:
        yield
    finally:
        _DEFAULT.update(before)


def first_best(scores: np.ndarray) -> int:
    """Lowest index whose score is within :data:`ENTROPY_TIE_TOL` of the maximum."""
    return int(np.argmax(scores >= scores.max() - ENTROPY_TIE_TOL))


def fast_scorer(counts, path: str | None = None, *, active=None):
    """The scorer of ``path`` (None: the one :func:`scorer_path` set) for validated ``counts``, or None for plain
    (``"auto"`` with negative counts, DP noise, or at most :data:`AUTO_PLAIN_ENTRIES` entries); ``active`` (K,): the
    clients that can be picked in this run."""
    path = check_choice("path", _DEFAULT["path"] if path is None else path, SCORER_PATHS)
    data = counts.data if sp.issparse(counts) else counts
    negative = bool(data.size and data.min() < 0)
    if path == "plain" or (path == "auto" and (negative or counts.shape[0] * counts.shape[1] <= AUTO_PLAIN_ENTRIES)):
        return None
    if negative:
        raise ParameterError(None, "path", path, "'auto' or 'plain' for counts with negative entries")
    if path == "torch":
        from fedlib.selection._torch_scoring import TorchScorer

        return TorchScorer(counts, device=_DEFAULT["device"])
    return IncrementalScorer(counts, active=active)


def _xlog2x(x: np.ndarray) -> np.ndarray:
    """``x * log2(x)`` elementwise with ``0 log 0 = 0`` (x >= 0)."""
    return x * np.log2(np.maximum(x, _TINY))


# --------------------------------------------------------------------------- incremental scorer


def _load_csc_matvec():
    """scipy's private compiled ``Y += A @ X`` for CSC if it behaves as expected, else None (then ``np.add.at``)."""
    try:
        from scipy.sparse import _sparsetools

        y = np.array([1.0, 0.0, 0.0])
        _sparsetools.csc_matvec(
            3, 2, np.array([0, 2, 3], np.int32), np.array([0, 2, 1], np.int32), np.ones(3), np.array([2.0, 5.0]), y
        )
        return _sparsetools.csc_matvec if y.tolist() == [3.0, 5.0, 2.0] else None
    except Exception:  # noqa: BLE001 - any failure means: use the numpy fallback
        return None


_CSC_MATVEC = _load_csc_matvec()


class IncrementalScorer:
    """Exact scores of line 9 for non-negative counts, kept up to date pick after pick.

    With ``f(x) = x log2 x``, pooled counts ``L`` (total ``S``), ``F = sum_c f(L_c)`` and client sizes ``n_k``::

        H(L + l^(k)) = log2(S + n_k) - (F + D_k) / (S + n_k),   D_k = sum_{c: l_kc > 0} f(L_c + l_kc) - f(L_c)

    (0 where ``S + n_k = 0``, clipped at 0). When a pick moves ``L_c`` from ``a`` to ``b``, each client holding
    class ``c`` changes by ``[f(b + v) - f(b)] - [f(a + v) - f(a)]``, ``v`` its count of ``c``: once per distinct
    value ("slot") of the class. Integer counts read ``f`` from a table. Clients with equal rows stay exactly tied.
    ``add(m)`` pools client m, ``pick(blocked)`` returns the best; clients outside ``active`` are never picked.
    """

    def __init__(self, counts, *, active=None):
        self.shape = num_clients, _ = counts.shape
        outside = np.zeros(num_clients, bool) if active is None else ~np.asarray(active, dtype=bool)
        col_ptr, rows, vals = _class_columns(counts, np.flatnonzero(~outside) if outside.any() else None)
        if _CSC_MATVEC is not None and vals.size < 2**31 - 1 and num_clients < 2**31 - 1:
            rows = rows.astype(np.int32, copy=False)  # the index type of the compiled accumulation
        else:
            rows = rows.astype(np.intp, copy=False)
        self.integer = bool(np.array_equal(vals, np.rint(vals)))
        rows, slot_ptr, self._slot_vals, self._class_slots = _group_by_value(col_ptr, rows, vals, self.integer)
        slot_len = np.diff(slot_ptr)
        self._vmax = float(counts.max()) if vals.size or outside.any() else 0.0
        self._table = np.zeros(0)
        if self.integer and not self._grow_table(self._vmax):
            self.integer = False  # counts beyond the table: logs throughout (the same values)
        self._d = np.bincount(rows, weights=np.repeat(self._f(self._slot_vals), slot_len), minlength=num_clients)
        sizes = np.bincount(rows, weights=np.repeat(self._slot_vals, slot_len), minlength=num_clients)
        if self.integer and sizes.max(initial=0) <= max(4 * num_clients, 1 << 16):
            self._size_vals = np.arange(int(sizes.max(initial=0)) + 1, dtype=float)  # logs per possible size
            self._size_idx = sizes.astype(np.intp)
        else:
            self._size_vals, self._size_idx = np.unique(sizes, return_inverse=True)
        self._ones = np.ones(rows.size) if rows.dtype == np.int32 else None
        self._rows = rows
        slot_ptr = slot_ptr.astype(rows.dtype)
        cs = self._class_slots.tolist()
        self._ptr_of = [slot_ptr[cs[c] : cs[c + 1] + 1] for c in range(len(cs) - 1)]  # slot pointers per class
        self._row_of = _row_reader(counts)
        self._outside = outside
        self._pooled, self._total = np.zeros(self.shape[1]), 0.0
        self._h, self._last_blocked = np.empty(num_clients), None

    @property
    def pooled(self) -> np.ndarray:
        """The pooled counts L of the picks so far (a copy)."""
        return self._pooled.copy()

    def add(self, m: int) -> None:
        """Add client ``m``'s counts to the pool and update ``D`` of the clients sharing a class with it."""
        cls, x = self._row_of(m)
        if cls.size == 0:
            return
        a = self._pooled[cls]
        b = a + x
        if self.integer and not self._grow_table(float(b.max()) + self._vmax):
            self.integer = False
        first = self._class_slots[cls]
        num = self._class_slots[cls + 1] - first
        offsets = np.cumsum(num) - num
        v = self._slot_vals[np.repeat(first - offsets, num) + np.arange(int(offsets[-1] + num[-1]))]
        fa, fb = self._f(a), self._f(b)
        delta = self._f(np.repeat(b, num) + v) - self._f(np.repeat(a, num) + v) - np.repeat(fb - fa, num)
        d, rows, ones, num_clients = self._d, self._rows, self._ones, self.shape[0]
        for c, off, k in zip(cls.tolist(), offsets.tolist(), num.tolist()):
            if k == 0:
                continue
            ptr = self._ptr_of[c]
            if ones is not None:  # d[rows of slot j] += delta[off + j]
                _CSC_MATVEC(num_clients, k, ptr, rows, ones, delta[off : off + k], d)
            else:
                np.add.at(d, rows[ptr[0] : ptr[-1]], np.repeat(delta[off : off + k], np.diff(ptr)))
        self._pooled[cls] = b
        self._total += float(x.sum())

    def scores(self) -> np.ndarray:
        """H(L + l^(k)) of every client, shape (K,) (a work array, overwritten by the next call)."""
        s = self._total + self._size_vals
        positive = s > 0
        logs = np.log2(s, out=np.zeros_like(s), where=positive)
        s[~positive] = np.inf  # S + n_k = 0: the client scores 0 (F + D_k is 0 there)
        h = np.add(self._d, self._f(self._pooled).sum(), out=self._h)
        h /= np.take(s, self._size_idx)
        np.subtract(np.take(logs, self._size_idx), h, out=h)
        return np.maximum(h, 0.0, out=h)

    def pick(self, blocked: np.ndarray) -> int:
        """The unblocked client maximising H(L + l^(k)) (ties within ENTROPY_TIE_TOL: lowest index)."""
        h = self.scores()
        h += self._penalty(blocked)
        return first_best(h)

    def _penalty(self, blocked: np.ndarray) -> np.ndarray:
        """-inf for blocked (and inactive) clients, 0 for the others; updated where ``blocked`` changed."""
        if self._last_blocked is None:
            self._last_blocked = blocked.copy()
            self._pen = np.where(blocked | self._outside, -np.inf, 0.0)
        else:
            changed = np.flatnonzero(blocked != self._last_blocked)
            self._last_blocked[changed] = blocked[changed]
            self._pen[changed] = np.where(blocked[changed] | self._outside[changed], -np.inf, 0.0)
        return self._pen

    def _grow_table(self, top: float) -> bool:
        """Make the table of f cover 0..top; False when that would pass the table's size limit."""
        if top < self._table.size:
            return True
        if top >= _XLOG_TABLE_MAX:
            return False
        size = int(min(max(2 * self._table.size, top + 1, 1024), _XLOG_TABLE_MAX))
        self._table = _xlog2x(np.arange(size, dtype=float))
        return True

    def _f(self, x: np.ndarray) -> np.ndarray:
        """``x log2 x``: from the table for integer counts (same values as the logs), else with logs."""
        if self.integer:
            return np.take(self._table, x.astype(np.intp))
        return _xlog2x(x)
