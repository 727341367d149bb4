"""The M-subset of a round's candidates with the highest pooled label entropy, which FedEntOpt's greedy step
approximates (a study beyond the paper): :func:`best_subset` (branch and bound, exact up to :data:`GAP_TOL` bits),
:func:`brute_force_subset` (for tests), :func:`swap_search` (a lower bound) and :func:`round_candidates` (what
Algorithm 1 can pick in a round)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from fedlib._validate import ParameterError, check_count_matrix, check_int
from fedlib.selection.scoring import ENTROPY_TIE_TOL, first_best

__all__ = [
    "GAP_TOL",
    "SubsetResult",
    "round_candidates",
    "subset_entropy",
    "brute_force_subset",
    "swap_search",
    "best_subset",
]

#: Subsets within this many bits of the best are optimal (ties); far above the rounding of entropies.
GAP_TOL = 1e-9

_TINY = 1e-300  # log2 argument floor, as in fedlib's scorers: x * log2(max(x, tiny)) is exactly 0 at x = 0


@dataclass(frozen=True)
class SubsetResult:
    """A subset (ascending client indices), its pooled entropy in bits, whether it is proven within :data:`GAP_TOL`
    of the best, and the search nodes visited (or swaps made)."""

    subset: np.ndarray
    entropy: float
    optimal: bool
    nodes: int


def round_candidates(buffer, num_clients: int, clients_per_round: int, buffer_size: int) -> np.ndarray:
    """The clients Algorithm 1 can pick in a round that starts with FIFO buffer ``buffer`` (oldest first): the
    unbuffered ones and the ``max(0, |B| + M - 1 - Q)`` oldest buffered ones, which picks evict (lines 10-12).

    >>> round_candidates((3, 4, 5), 8, 2, 3).tolist()  # buffer full: client 3 is evicted by the first pick
    [0, 1, 2, 3, 6, 7]
    """
    num_clients = check_int("num_clients", num_clients, low=1)
    clients_per_round = check_int("clients_per_round", clients_per_round, low=1, high=num_clients)
    buffer_size = check_int("buffer_size", buffer_size, low=0, high=num_clients - clients_per_round)
    allowed = f"at most buffer_size={buffer_size} distinct client indices in [0, {num_clients - 1}]"
    given, buffer = buffer, list(buffer)
    if (
        len(buffer) > buffer_size
        or len(set(buffer)) != len(buffer)
        or any(isinstance(b, bool) or not isinstance(b, (int, np.integer)) or not 0 <= b < num_clients for b in buffer)
    ):
        raise ParameterError(None, "buffer", given, allowed)
    buffer = [int(b) for b in buffer]
    evicted = max(0, len(buffer) + clients_per_round - 1 - buffer_size)
    blocked = np.zeros(num_clients, dtype=bool)
    blocked[buffer[evicted:]] = True
    return np.flatnonzero(~blocked)


def _entropies(pooled: np.ndarray) -> np.ndarray:
    """Entropy in bits of each count vector along the last axis (no validation; 0 for an all-zero vector)."""
    total = pooled.sum(axis=-1)
    xlx = (pooled * np.log2(np.maximum(pooled, _TINY))).sum(axis=-1)
    safe = np.where(total > 0, total, 1.0)
    return np.maximum(np.where(total > 0, np.log2(safe) - xlx / safe, 0.0), 0.0)


def subset_entropy(counts, subset) -> float:
    """Pooled entropy in bits of the clients ``subset`` (rows of ``counts``)."""
    arr = check_count_matrix("counts", counts)
    return float(_entropies(arr[np.asarray(subset, dtype=np.int64)].sum(axis=0)))


def _check_problem(counts, clients_per_round, candidates):
    """Validated ``(counts, M, candidates)``: non-negative counts, distinct candidates, ``1 <= M <= #candidates``."""
    arr = check_count_matrix("counts", counts)
    if candidates is None:
        cand = np.arange(arr.shape[0])
    else:
        cand = np.asarray(candidates)
        allowed = f"a non-empty 1-D array of distinct client indices in [0, {arr.shape[0] - 1}]"
        if cand.ndim != 1 or cand.size == 0 or not np.issubdtype(cand.dtype, np.integer):
            raise ParameterError(None, "candidates", candidates, allowed)
        if cand.min() < 0 or cand.max() >= arr.shape[0] or np.unique(cand).size != cand.size:
            raise ParameterError(None, "candidates", candidates, allowed, got=repr(cand.tolist()))
        cand = np.sort(cand.astype(np.int64))
    clients_per_round = check_int("clients_per_round", clients_per_round, low=1)
    if clients_per_round > cand.size:
        raise ParameterError(
            None, "clients_per_round", clients_per_round, f"an integer >= 1 and <= the {cand.size} candidates"
        )
    return arr, clients_per_round, cand


def brute_force_subset(counts, clients_per_round: int, *, candidates=None, max_subsets: int = 2_000_000):
    """Every M-subset of ``candidates`` (default: all clients): ``(best entropy, optimal subsets)``, the subsets
    within :data:`GAP_TOL` of the best as ascending tuples in lexicographic order; refuses over ``max_subsets``.

    >>> brute_force_subset([[2, 0], [0, 2], [0, 2]], 2)
    (1.0, [(0, 1), (0, 2)])
    """
    arr, m, cand = _check_problem(counts, clients_per_round, candidates)
    total = math.comb(cand.size, m)
    if total > check_int("max_subsets", max_subsets, low=1):
        allowed = f"an integer >= C({cand.size}, {m}) = {total}, the number of subsets to try"
        raise ParameterError(None, "max_subsets", max_subsets, allowed, hint="Or use fewer candidates.")
    combos = itertools.combinations(cand.tolist(), m)
    values, subsets = [], []
    while chunk := list(itertools.islice(combos, 65_536)):  # bounded memory: chunks of (65,536, M, C)
        block = np.array(chunk, dtype=np.int64).reshape(len(chunk), m)
        values.append(_entropies(arr[block].sum(axis=1)))
        subsets.append(block)
    values, subsets = np.concatenate(values), np.concatenate(subsets)
    best = float(values.max())
    return best, [tuple(s) for s in subsets[values >= best - GAP_TOL].tolist()]


def _greedy_from_every_start(rows: np.ndarray, clients_per_round: int, chunk: int = 64) -> np.ndarray:
    """FedEntOpt's greedy (eq. 5) from every row as the first pick; the best subset found (positions)."""
    best_value, best = -1.0, None
    for start in range(0, rows.shape[0], chunk):
        firsts = np.arange(start, min(start + chunk, rows.shape[0]))
        chosen = np.zeros((firsts.size, rows.shape[0]), dtype=bool)
        chosen[np.arange(firsts.size), firsts] = True
        pooled = rows[firsts].copy()
        for _ in range(clients_per_round - 1):
            values = _entropies(pooled[:, None, :] + rows[None, :, :])
            values[chosen] = -np.inf
            picks = np.argmax(values >= values.max(axis=1, keepdims=True) - ENTROPY_TIE_TOL, axis=1)
            chosen[np.arange(firsts.size), picks] = True
            pooled += rows[picks]
        values = _entropies(pooled)
        k = first_best(values)
        if values[k] > best_value:
            best_value, best = float(values[k]), np.flatnonzero(chosen[k])
    return best


def _swap_until_stuck(rows: np.ndarray, picked: np.ndarray, max_swaps: int) -> tuple[np.ndarray, int]:
    """Best-improvement swaps on ``rows`` from positions ``picked``: ``(positions, swaps made)``."""
    inside = np.zeros(rows.shape[0], dtype=bool)
    inside[picked] = True
    pooled = rows[inside].sum(axis=0)
    current = float(_entropies(pooled))
    for swaps in range(max_swaps + 1):
        outside = np.flatnonzero(~inside)
        if outside.size == 0 or swaps == max_swaps:
            return np.flatnonzero(inside), swaps
        best = (current + GAP_TOL, -1, -1)
        for i in np.flatnonzero(inside):
            values = _entropies(pooled - rows[i] + rows[outside])
            j = first_best(values)
            if values[j] > best[0]:
                best = (float(values[j]), int(i), int(outside[j]))
        if best[1] < 0:
            return np.flatnonzero(inside), swaps
        current, i, j = best
        inside[i], inside[j] = False, True
        pooled = pooled - rows[i] + rows[j]
    raise AssertionError("unreachable")


def _positions(name: str, subset, cand: np.ndarray, size: int) -> np.ndarray:
    """Positions in ``cand`` of ``subset``: ``size`` distinct clients among the candidates, else a ParameterError."""
    given, subset = subset, np.asarray(subset)
    allowed = f"a 1-D array of {size} distinct client indices among the candidates"
    if subset.ndim != 1 or subset.size != size or (size and not np.issubdtype(subset.dtype, np.integer)):
        raise ParameterError(None, name, given, allowed)
    position = np.minimum(np.searchsorted(cand, subset), cand.size - 1)
    if np.unique(subset).size != size or np.any(cand[position] != subset):
        raise ParameterError(None, name, given, allowed)
    return position


def swap_search(counts, start, *, candidates=None, max_swaps: int = 1000) -> SubsetResult:
    """Local search from ``start`` (e.g. FedEntOpt's pick): the best swap of a picked client for another candidate
    while it raises the pooled entropy by more than :data:`GAP_TOL`, at most ``max_swaps`` times (ties: lowest).

    >>> r = swap_search([[4, 0, 0], [3, 1, 0], [0, 0, 4], [0, 4, 0]], [0, 1])  # pooled [7, 1, 0]
    >>> r.subset.tolist(), round(r.entropy, 3), r.nodes  # client 0 out, client 2 in: pooled [3, 1, 4]
    ([1, 2], 1.406, 1)
    """
    arr, m, cand = _check_problem(counts, max(1, np.size(start)), candidates)
    max_swaps = check_int("max_swaps", max_swaps, low=0)
    position = _positions("start", start, cand, m)
    picked, swaps = _swap_until_stuck(arr[cand], position, max_swaps)
    subset = cand[picked]
    return SubsetResult(subset, float(_entropies(arr[subset].sum(axis=0))), False, swaps)


class _Stop(Exception):
    """The node limit was reached."""


class _BranchAndBound:
    """Depth-first search over ``rows``: include row i, or exclude it and the rest of its group of equal rows
    (consecutive; ``group_end[i]`` is the position after it). A node is pruned when :meth:`_bound` proves that no
    completion beats the incumbent by more than GAP_TOL; with one or two picks left, completions are enumerated.
    """

    def __init__(self, rows, group_end, clients_per_round, incumbent, node_limit, bound_steps):
        self.rows, self.group_end, self.m = rows, group_end, clients_per_round
        self.sizes = rows.sum(axis=1)
        self.best_set = [int(i) for i in incumbent]
        self.best = float(_entropies(rows[self.best_set].sum(axis=0)))
        self.nodes, self.node_limit, self.bound_steps = 0, node_limit, bound_steps

    def run(self) -> bool:
        """Search; True if it finished (the incumbent is then optimal), False if it hit the node limit."""
        try:
            self._visit(0, self.m, np.zeros(self.rows.shape[1]), [], None)
        except _Stop:
            return False
        return True

    def _offer(self, value: float, chosen: list) -> None:
        if value > self.best:
            self.best, self.best_set = value, chosen

    def _visit(self, i: int, r: int, pooled: np.ndarray, chosen: list, weights) -> None:
        self.nodes += 1
        if self.node_limit is not None and self.nodes > self.node_limit:
            raise _Stop
        n = self.rows.shape[0]
        if r == 0 or n - i == r:
            rest = list(range(i, n)) if r else []
            self._offer(float(_entropies(pooled + self.rows[i:].sum(axis=0) * bool(r))), chosen + rest)
            return
        if r <= 2:
            self._enumerate(i, r, pooled, chosen)
            return
        weights = self._bound(i, r, pooled, weights)
        if weights is None:
            return
        self._visit(i + 1, r - 1, pooled + self.rows[i], chosen + [i], weights[1:] * ((r - 1) / (r - weights[0])))
        j = int(self.group_end[i])
        if n - j >= r:
            rest = weights[j - i :]
            slack = 1.0 - rest
            if slack.sum() > 0:
                rest = rest + (r - rest.sum()) * slack / slack.sum()
            self._visit(j, r, pooled, chosen, np.minimum(rest, 1.0))

    def _enumerate(self, i: int, r: int, pooled: np.ndarray, chosen: list) -> None:
        """Every completion of one or two rows from position i on."""
        tail = self.rows[i:]
        if r == 1:
            values = _entropies(pooled + tail)
            k = int(np.argmax(values))
            self._offer(float(values[k]), chosen + [i + k])
            return
        a, b = np.triu_indices(tail.shape[0], 1)
        values = _entropies(pooled + tail[a] + tail[b])
        k = int(np.argmax(values))
        self._offer(float(values[k]), chosen + [i + int(a[k]), i + int(b[k])])

    def _bound(self, i: int, r: int, pooled: np.ndarray, weights):
        """None if no r rows from position i on lift ``pooled`` above best + GAP_TOL, else fractional weights.

        Gibbs' inequality with q = the class shares of ``pooled + weights @ rows``: H(P + sum_X l_k) <= (a + sum_X
        b_k) / (|P| + sum_X n_k) with w = -log2 q, a = P.w, b_k = l_k.w, so no r-subset X exceeds t iff the r
        largest b_k - t n_k sum to at most t |P| - a (Dinkelbach). Otherwise a Frank-Wolfe step on the fractional
        relaxation moves the weights and the test is repeated, ``bound_steps`` times at most.
        """
        tail, sizes = self.rows[i:], self.sizes[i:]
        rest = tail.shape[0]
        weights = np.full(rest, r / rest) if weights is None else weights
        active = (pooled + tail.sum(axis=0)) > 0
        if not active.any():  # every completion pools nothing: entropy 0, never above the incumbent
            return None
        target = self.best + GAP_TOL
        for _ in range(self.bound_steps):
            frac = pooled + weights @ tail
            logs = np.where(active, -np.log2(np.maximum(frac / frac[active].sum(), _TINY)), 0.0)
            b = tail @ logs
            slack = target * pooled.sum() - pooled @ logs
            if np.partition(b - target * sizes, rest - r)[rest - r :].sum() <= slack:
                return None
            corner = np.argpartition(b - float(_entropies(frac)) * sizes, rest - r)[rest - r :]
            gamma = _line_search(frac, pooled + tail[corner].sum(axis=0))
            weights = (1.0 - gamma) * weights
            weights[corner] += gamma
        return weights


def _line_search(start: np.ndarray, end: np.ndarray) -> float:
    """A step in [0, 0.99] that (about) maximises the entropy of ``(1 - g) start + g end`` (two grids)."""
    grid = np.linspace(0.0, 0.99, 12)
    k = int(np.argmax(_entropies(start + grid[:, None] * (end - start))))
    fine = np.linspace(grid[max(k - 1, 0)], grid[min(k + 1, 11)], 9)
    return float(fine[int(np.argmax(_entropies(start + fine[:, None] * (end - start))))])


def _search_order(rows: np.ndarray):
    """Positions in search order (groups of equal rows, larger rows first) and the end of each one's group."""
    _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    sizes = rows.sum(axis=1)
    group_rank = np.empty(first.size, dtype=np.int64)
    group_rank[np.lexsort((first, -sizes[first]))] = np.arange(first.size)
    order = np.lexsort((np.arange(rows.shape[0]), group_rank[inverse]))
    ranks = group_rank[inverse][order]
    group_end = np.searchsorted(ranks, ranks, side="right")
    return order, group_end


def best_subset(
    counts, clients_per_round: int, *, candidates=None, node_limit: int | None = None, bound_steps: int = 2, start=None
) -> SubsetResult:
    """The M-subset of ``candidates`` (default: all clients) with the highest pooled entropy, by branch and bound
    from ``start`` (default: the best greedy pick over every first client, improved by swaps); ``optimal`` is False
    when ``node_limit`` stopped it; ``bound_steps``: Frank-Wolfe steps per node that try to prune it.

    >>> r = best_subset([[4, 0, 0], [3, 1, 0], [0, 0, 4], [0, 4, 0], [2, 2, 0]], 3)
    >>> r.subset.tolist(), round(r.entropy, 3), r.optimal
    ([0, 2, 3], 1.585, True)
    """
    arr, m, cand = _check_problem(counts, clients_per_round, candidates)
    if node_limit is not None:
        node_limit = check_int("node_limit", node_limit, low=1)
    bound_steps = check_int("bound_steps", bound_steps, low=1)
    rows = arr[cand]
    held = rows.sum(axis=0) > 0
    rows = rows[:, held] if held.any() else rows[:, :1]
    order, group_end = _search_order(rows)
    rows = rows[order]
    if start is None:
        start, _ = _swap_until_stuck(rows, _greedy_from_every_start(rows, m), max_swaps=10 * m)
    else:
        start = np.argsort(order)[_positions("start", start, cand, m)]
    search = _BranchAndBound(rows, group_end, m, start, node_limit, bound_steps)
    optimal = search.run()
    subset = np.sort(cand[order[search.best_set]])
    return SubsetResult(subset, float(_entropies(arr[subset].sum(axis=0))), optimal, search.nodes)
