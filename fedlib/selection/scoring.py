"""Entropy scorers behind FedEntOpt's greedy step (eq. 5 of v2) and the KL baseline.

A greedy run starts from an empty pool ``L = 0``, asks for the best unblocked client, adds it to the pool,
and repeats. Every scorer answers the same three calls: ``reset()`` (start a run, ``L = 0``), ``add(m)``
(``L += l^(m)``) and ``pick(blocked)`` (the unblocked client maximising ``H(L + l^(m))`` in bits; scores
within :data:`ENTROPY_TIE_TOL` of the best tie and go to the lowest client index). :func:`_EntropyScorer`
picks the scorer:

- :class:`_IncrementalScorer` (non-negative counts, the default): keeps ``D_k`` of every client up to date
  and touches, per pick, only the clients that hold one of the picked client's classes.
- :class:`_RescoringScorer`: re-scores every candidate at every step (the implementation up to issue 15,
  kept for counts with negative entries, i.e. DP noise kept, and as the benchmark's baseline).

Both accept a dense ``(K, C)`` array or a ``scipy.sparse`` matrix; the incremental scorer never builds a dense
``K x C`` array from a sparse one.
"""

from __future__ import annotations

import contextlib

import numpy as np
import scipy.sparse as sp

from fedlib._validate import check_choice
from fedlib.selection._count_layout import ENTROPY_TIE_TOL, _class_columns, _group_by_value, _row_reader

_TINY = 1e-300  # log2 argument floor: T * log2(max(T, tiny)) is exactly 0 at T = 0 and needs no masked ufunc

#: Largest integer table of f(n) = n log2 n a scorer builds (entries; 8 bytes each, i.e. 32 MiB). Above it,
#: f is computed with logs, which gives the same values.
_XLOG_TABLE_MAX = 1 << 22

#: Paths of :func:`_EntropyScorer`.
SCORER_PATHS = ("auto", "incremental", "sparse", "dense", "torch")

#: What ``path=None`` means: set with :func:`scorer_path` (default "auto", on no particular torch device).
_DEFAULT = {"path": "auto", "device": None}


@contextlib.contextmanager
def scorer_path(path: str = "auto", *, device=None):
    """Within the block FedEntOpt and KL score with ``path`` (one of :data:`SCORER_PATHS`).

    ``"torch"`` runs the incremental scores with torch on ``device`` (default: CUDA if available, else CPU),
    for a GPU; the picks are those of every other path. Example::

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


def _xlog2x(x: np.ndarray) -> np.ndarray:
    """``x * log2(x)`` elementwise with ``0 log 0 = 0`` (x >= 0)."""
    return x * np.log2(np.maximum(x, _TINY))


def _h_from_parts(s: np.ndarray, xlx: np.ndarray) -> np.ndarray:
    """``max(log2 s - xlx / s, 0)`` where ``s > 0``, else 0: eq. (5) from the total S and sum_c f(T_c)."""
    positive = s > 0
    h = np.log2(s, out=np.zeros_like(s), where=positive) - np.divide(xlx, s, out=np.zeros_like(s), where=positive)
    return np.maximum(h, 0.0)


def _first_best(scores: np.ndarray) -> int:
    """Lowest index whose score is within ENTROPY_TIE_TOL of the maximum."""
    return int(np.argmax(scores >= scores.max() - ENTROPY_TIE_TOL))


def _EntropyScorer(counts, *, path: str | None = None, active=None):
    """The scorer for ``counts`` (validated: finite, shape (K, C); dense array or scipy.sparse).

    ``active`` (optional, bool of shape (K,)): the clients that can be picked when the run starts (FedEntOpt:
    those outside the buffer). Others may become pickable later (evicted from the buffer mid-round); the
    incremental scorer keeps its per-class structure for the active ones only and scores the others from
    their rows. It changes no score, only the work.

    ``path``: ``"auto"`` takes the incremental scorer for non-negative counts given as a sparse matrix or as
    a dense one of at least :data:`_INCREMENTAL_MIN_CLIENTS` clients and :data:`_INCREMENTAL_MIN_NONZEROS`
    non-zeros, the sparse re-scoring path for smaller dense non-negative ones, and the dense re-scoring path
    when some count is negative (kept DP noise: the clipping ``max(L + l, 0)`` breaks the incremental formula,
    and such counts have hardly any zeros to skip); ``"incremental"``, ``"sparse"`` and ``"dense"`` force an
    scorer (used by tests and benchmarks); ``"torch"`` is the incremental scorer in torch (for a GPU). All
    scorers pick the same clients. ``None``: the path set by :func:`scorer_path` ("auto" unless set).
    """
    path = _DEFAULT["path"] if path is None else path
    check_choice("path", path, SCORER_PATHS)
    negative = _has_negative(counts)
    if path == "torch":
        if negative:
            raise ValueError("the torch scoring path needs non-negative counts; use path='auto' or 'dense'.")
        from fedlib.selection._torch_scoring import TorchScorer

        return TorchScorer(counts, device=_DEFAULT["device"])
    if path == "auto" and not negative and _small(counts):
        path = "sparse"
    if path == "incremental" or (path == "auto" and not negative):
        if negative:
            raise ValueError("the incremental scoring path needs non-negative counts; use path='auto' or 'dense'.")
        return _IncrementalScorer(counts, active=active)
    dense = counts.toarray() if sp.issparse(counts) else counts
    return _RescoringScorer(np.asarray(dense, dtype=float), path=path)


#: "auto" re-scores (sparse path) below these sizes, where the incremental scorer's fixed cost per step (one
#: compiled call per picked class, ~3 us) exceeds a full re-scoring; measured on a 2-core CPU: equal at K=1,000,
#: C=100 (31k non-zeros), incremental 2x faster at K=5,000, C=100. The picks are the same either way.
_INCREMENTAL_MIN_CLIENTS = 2_000
_INCREMENTAL_MIN_NONZEROS = 20_000


def _small(counts) -> bool:
    """A dense count matrix below the sizes where the incremental scorer pays (sparse ones are never small)."""
    if sp.issparse(counts):
        return False
    return counts.shape[0] < _INCREMENTAL_MIN_CLIENTS or np.count_nonzero(counts) < _INCREMENTAL_MIN_NONZEROS


def _has_negative(counts) -> bool:
    data = counts.data if sp.issparse(counts) else counts
    return bool(data.size and data.min() < 0)


# --------------------------------------------------------------------------- full re-scoring (up to issue 15)


class _RescoringScorer:
    """Scores eq. (5) for many candidates at once, from scratch at every step.

    ``entropies(pooled, free)`` returns ``H(max(pooled + l^(m), 0))`` in bits for every ``m`` in ``free``,
    using ``H = log2 S - (1/S) sum_c f(T_c)`` with ``f(x) = x log2 x``, ``T = pooled + l^(m)`` and
    ``S = ||T||_1``, which equals ``H(T / S)``. Negative entries (possible when DP noise is kept, see
    :mod:`fedlib.selection.privacy`) count as 0; an all-zero ``T`` scores 0.

    Non-negative counts (the usual case) take the sparse path, whose cost per greedy step is proportional
    to the non-zero entries instead of K*C::

        sum_c f(L_c + l_mc) = F(L) + sum_{c: l_mc != 0} [f(L_c + l_mc) - f(L_c)],   F(L) = sum_c f(L_c),

    where ``F(L)`` is shared by every candidate. The non-zeros are laid out once per scorer (i.e. once per
    ``select`` call) in column-major order, so that ``L_c`` for all of them is one ``np.repeat``; each step
    computes every non-zero's delta in one pass and sums them per client with ``np.bincount`` (clients
    without non-zeros get 0). The scores are a function of ``pooled`` alone, not of earlier steps. For
    integer counts ``f`` is read from a table of ``f(0), f(1), ...`` (the values the logs would give) when
    that table needs at most :data:`_XLOG_TABLE_MAX` entries. With negative counts the sparse path also
    tracks the clipped totals per client, but by default such counts (kept DP noise: hardly any zeros) take
    the dense path: one log per (candidate, class) entry, reusing two (K, C) work arrays.
    """

    def __init__(self, counts: np.ndarray, *, path: str = "auto"):
        self.counts = counts
        self.clip = bool(np.any(counts < 0))
        # "auto": sparse for non-negative counts, dense otherwise (kept DP noise leaves few zeros to skip);
        # "sparse" / "dense" force a path (both handle every input; used by tests and benchmarks).
        self.path = check_choice("path", path, ("auto", "sparse", "dense"))
        self.dense = path == "dense" or (path == "auto" and self.clip)
        self._row_totals = counts.sum(axis=1)
        if self.dense:
            self._t = np.empty_like(counts)
            self._log = np.empty_like(counts)
        else:
            self._init_sparse(counts)
        self.reset()

    # ------------------------------------------------------------------ greedy-run protocol

    def reset(self) -> None:
        """Start a greedy run: the pool is empty."""
        self.pooled = np.zeros(self.counts.shape[1])

    def add(self, m: int) -> None:
        """Add client ``m``'s counts to the pool."""
        self.pooled += self.counts[m]

    def pick(self, blocked: np.ndarray) -> int:
        """The unblocked client maximising H(pooled + l^(m)) (ties: lowest index)."""
        return self.best(self.pooled, np.flatnonzero(~blocked))

    def scores(self) -> np.ndarray:
        """H(pooled + l^(m)) of every client, shape (K,)."""
        return self.entropies(self.pooled, np.arange(self.counts.shape[0]))

    # ------------------------------------------------------------------ sparse path (non-negative counts)

    def _init_sparse(self, counts: np.ndarray) -> None:
        num_clients, num_classes = counts.shape
        by_class = np.ascontiguousarray(counts.T).ravel()
        nonzero = by_class != 0
        flat = np.flatnonzero(nonzero)  # column-major (CSC) order; flatnonzero of a bool array is fast
        self._col_nnz = np.count_nonzero(nonzero.reshape(num_classes, num_clients), axis=1)
        self._rows = flat - np.repeat(np.arange(num_classes) * num_clients, self._col_nnz)  # client of each
        vals = np.take(by_class, flat)
        # L_c <= the class total for a sum of distinct rows; L_c + l_mc is also formed for clients already in L
        # (their scores go unused), so the table runs to the largest class total plus the largest entry.
        self._pooled_cap = float(counts.sum(axis=0).max())
        top = self._pooled_cap + float(counts.max())
        self._table = None
        if vals.size and not self.clip and top < _XLOG_TABLE_MAX and np.array_equal(vals, np.rint(vals)):
            self._table = _xlog2x(np.arange(int(top) + 1, dtype=float))
            vals = vals.astype(np.int64)
        self._vals = vals

    def _entropies_sparse(self, pooled: np.ndarray, free: np.ndarray) -> np.ndarray:
        nnz, table = self._col_nnz, self._table
        if table is not None and not (
            0 <= pooled.min() and pooled.max() <= self._pooled_cap and np.array_equal(pooled, np.rint(pooled))
        ):
            table = None  # not a sum of distinct rows (never so in the selectors): use logs
        if table is not None:
            base = pooled.astype(np.int64)
            f_base = np.take(table, base)
            deltas = np.take(table, np.repeat(base, nnz) + self._vals)
            s = self._row_totals[free] + pooled.sum()
        elif not self.clip:
            f_base = _xlog2x(pooled)
            deltas = _xlog2x(np.repeat(pooled, nnz) + self._vals)
            s = self._row_totals[free] + pooled.sum()
        else:  # T_c = max(L_c + l_mc, 0): the clipped totals S change with the non-zeros too
            base = np.maximum(pooled, 0.0)
            f_base = _xlog2x(base)
            t = np.maximum(np.repeat(pooled, nnz) + self._vals, 0.0)
            deltas = _xlog2x(t)
            t -= np.repeat(base, nnz)
            s = base.sum() + np.bincount(self._rows, weights=t, minlength=self.counts.shape[0])[free]
        deltas -= np.repeat(f_base, nnz)
        sums = np.bincount(self._rows, weights=deltas, minlength=self.counts.shape[0])
        return _h_from_parts(s, f_base.sum() + sums[free])

    # ------------------------------------------------------------------ dense path

    def _entropies_dense(self, pooled: np.ndarray, free: np.ndarray) -> np.ndarray:
        t, logs = self._t[: free.size], self._log[: free.size]
        np.take(self.counts, free, axis=0, out=t)
        t += pooled
        if self.clip:  # only negative counts can make a pooled entry negative
            np.maximum(t, 0.0, out=t)
            s = t.sum(axis=1)
        else:
            s = self._row_totals[free] + pooled.sum()
        np.maximum(t, _TINY, out=logs)
        np.log2(logs, out=logs)
        return _h_from_parts(s, np.einsum("ij,ij->i", t, logs))

    def entropies(self, pooled: np.ndarray, free: np.ndarray) -> np.ndarray:
        if self.dense:
            return self._entropies_dense(pooled, free)
        return self._entropies_sparse(pooled, free)

    def best(self, pooled: np.ndarray, free: np.ndarray) -> int:
        """Solve eq. (5) over ``free`` (sorted ascending): the client maximising H(pooled + l^(m))."""
        return int(free[_first_best(self.entropies(pooled, free))])


# --------------------------------------------------------------------------- incremental scorer


def _load_csc_matvec():
    """scipy's compiled ``Y += A @ X`` for a CSC matrix, if it is there and behaves as expected, else None.

    It is a private scipy routine (``scipy.sparse._sparsetools.csc_matvec``), so it is checked on a small
    case at import; without it the scorer falls back to ``np.add.at``, which gives the same sums.
    """
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


class _IncrementalScorer:
    """Exact incremental scores of eq. (5) for non-negative counts.

    With ``f(x) = x log2 x``, pooled counts ``L`` (total ``S``), ``F = sum_c f(L_c)`` and client sizes
    ``n_k``, every client's score is::

        H(L + l^(k)) = log2(S + n_k) - (F + D_k) / (S + n_k),   D_k = sum_{c: l_kc > 0} f(L_c + l_kc) - f(L_c),

    (0 where ``S + n_k = 0``; a rounding error below 0 is clipped to 0 as in the re-scoring scorer). The
    scorer keeps ``D`` for all K clients. When a pick moves ``L_c`` from ``a`` to ``b``, only the clients
    holding class ``c`` change, each by ``[f(b + v) - f(b)] - [f(a + v) - f(a)]`` with ``v`` its count of
    ``c``; that change depends on ``v`` alone, so it is computed once per distinct value ("slot") of the
    class and added to the clients of each slot by one compiled sparse product (scipy's ``csc_matvec``, or
    ``np.add.at``): the work per pick is one addition per client holding a picked class. The rest of a
    step is a few vector operations over K, with logs only per distinct client size. For integer counts
    ``f`` is read from a table of ``f(0), f(1), ...``; other non-negative counts use the logs directly.

    ``D`` accumulates rounding over the picks (about 1e-16 relative per addition), far below
    :data:`ENTROPY_TIE_TOL`; clients with equal rows receive identical additions and so stay exactly tied.
    """

    def __init__(self, counts, *, active=None):
        self.shape = num_clients, _ = counts.shape
        self._outside = None if active is None or np.all(active) else ~np.asarray(active, dtype=bool)
        subset = None if self._outside is None else np.flatnonzero(~self._outside)
        col_ptr, rows, vals = _class_columns(counts, subset)
        if _CSC_MATVEC is not None and vals.size < 2**31 - 1 and num_clients < 2**31 - 1:
            rows = rows.astype(np.int32, copy=False)  # the index type of the compiled accumulation
        else:
            rows = rows.astype(np.intp, copy=False)
        self.integer = bool(np.array_equal(vals, np.rint(vals)))
        rows, slot_ptr, self._slot_vals, self._class_slots = _group_by_value(col_ptr, rows, vals, self.integer)
        slot_len = np.diff(slot_ptr)
        self._vmax = float(counts.max()) if vals.size or self._outside is not None else 0.0
        self._table = np.zeros(0)
        if self.integer and not self._grow_table(self._vmax):
            self.integer = False  # counts beyond the table: logs throughout (the same values)
        self._own = np.bincount(rows, weights=np.repeat(self._f(self._slot_vals), slot_len), minlength=num_clients)
        sizes = np.bincount(rows, weights=np.repeat(self._slot_vals, slot_len), minlength=num_clients)
        if self.integer and sizes.max(initial=0) <= max(4 * num_clients, 1 << 16):
            self._size_vals = np.arange(int(sizes.max(initial=0)) + 1, dtype=float)  # logs per possible size
            self._size_idx = sizes.astype(np.intp)
        else:
            self._size_vals, self._size_idx = np.unique(sizes, return_inverse=True)
        if rows.dtype == np.int32:
            slot_ptr, self._ones = slot_ptr.astype(np.int32), np.ones(rows.size)
        else:
            self._ones = None
        self._rows, self._slot_ptr = rows, slot_ptr
        cs = self._class_slots.tolist()
        self._ptr_of = [slot_ptr[cs[c] : cs[c + 1] + 1] for c in range(len(cs) - 1)]  # slot pointers per class
        self._row_of = _row_reader(counts)
        self._h = np.empty(num_clients)
        if self._outside is not None:  # sizes of the clients left out of the structure (scored from their rows)
            all_sizes = np.asarray(counts.sum(axis=1), dtype=float).ravel()
            self._outside_sizes = np.where(self._outside, all_sizes, 0.0)
        self.reset()

    # ------------------------------------------------------------------ greedy-run protocol

    def reset(self) -> None:
        """Start a greedy run: the pool is empty, so ``D_k = sum_c f(l_kc)``."""
        self._pooled = np.zeros(self.shape[1])
        self._total = 0.0
        self._d = self._own.copy()
        self._extras = _Rows()  # clients from outside the structure that became pickable
        self._last_blocked = None

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
        if self._outside is not None:
            self._score_extras(h, blocked)
        h += self._penalty(blocked)
        return _first_best(h)

    def _penalty(self, blocked: np.ndarray) -> np.ndarray:
        """-inf for blocked clients, 0 for the others; updated where ``blocked`` changed since the last step
        (a masked assignment over all K clients costs several times more than finding the few changes)."""
        if self._last_blocked is None:
            self._last_blocked = blocked.copy()
            self._pen = np.where(blocked, -np.inf, 0.0)
        else:
            changed = np.flatnonzero(blocked != self._last_blocked)
            self._last_blocked[changed] = blocked[changed]
            self._pen[changed] = np.where(blocked[changed], -np.inf, 0.0)
        return self._pen

    def _score_extras(self, h: np.ndarray, blocked: np.ndarray) -> None:
        """Exact scores of the clients outside the structure that are not blocked (evicted from the buffer)."""
        free_outside = self._outside & ~blocked
        new = np.flatnonzero(free_outside & ~self._extras.member(self.shape[0]))
        for m in new.tolist():
            self._extras.append(m, *self._row_of(m))
        if not self._extras.ids:
            return
        owner, cls, val = self._extras.arrays()
        base = self._pooled[cls]
        d = np.bincount(owner, weights=self._f(base + val) - self._f(base), minlength=len(self._extras.ids))
        ids = np.asarray(self._extras.ids)
        s = self._total + self._outside_sizes[ids]
        h[ids] = _h_from_parts(s, self._f(self._pooled).sum() + d)

    # ------------------------------------------------------------------ f(x) = x log2 x

    def _grow_table(self, top: float) -> bool:
        """Make the table of f cover 0..top; False when that would pass :data:`_XLOG_TABLE_MAX`."""
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


class _Rows:
    """Rows of a growing set of clients, concatenated in buffers that double: owner (position in ``ids``),
    class, value."""

    def __init__(self):
        self.ids: list[int] = []
        self._size = 0
        self._owner = np.zeros(64, dtype=np.intp)
        self._cls = np.zeros(64, dtype=np.intp)
        self._val = np.zeros(64)
        self._member = None

    def member(self, num_clients: int) -> np.ndarray:
        if self._member is None:
            self._member = np.zeros(num_clients, dtype=bool)
        return self._member

    def append(self, m: int, cls: np.ndarray, val: np.ndarray) -> None:
        end = self._size + cls.size
        if end > self._cls.size:
            grow = max(2 * self._cls.size, end)
            self._owner, self._cls, self._val = (np.resize(a, grow) for a in (self._owner, self._cls, self._val))
        self._owner[self._size : end] = len(self.ids)
        self._cls[self._size : end] = cls
        self._val[self._size : end] = val
        self._size = end
        self._member[m] = True
        self.ids.append(m)

    def arrays(self):
        return self._owner[: self._size], self._cls[: self._size], self._val[: self._size]
