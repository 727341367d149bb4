"""What each step of Algorithm 1 did in a recorded selection run, replayed on the true label counts.

§IV of v2 describes the steps: each greedy pick "incrementally increases the entropy" (line 97), the picks
"complement missing labels" and the selection is "deterministic apart from sampling the first client", which the
buffer keeps from repeating "the same subset" (line 91).  Each function reads a
:class:`fedlib.label_only.simulate.SelectionTrace` (picks in pick order) and returns one number per trace.
"""

from __future__ import annotations

import numpy as np

from fedlib.selection.metrics import entropy_bits

__all__ = [
    "prefix_entropies",
    "lowering_by_step",
    "entropy_rise_share",
    "missing_label_steps",
    "replay_share",
    "repeated_subset_share",
]

#: Entropy changes within this many bits count as no change (rounding of a sum of logs).
TOL = 1e-10


def _dense(counts) -> np.ndarray:
    return np.asarray(counts.todense() if hasattr(counts, "todense") else counts, dtype=float)


def _rounds(trace):
    """The picks of each round in pick order (a round with fewer picks has fewer)."""
    return [row[row >= 0] for row in trace.picked]


def prefix_entropies(counts, picks) -> np.ndarray:
    """The pooled entropy in bits after each pick of one round: ``H(l^(p1))``, ``H(l^(p1) + l^(p2))``, ..."""
    return np.atleast_1d(entropy_bits(_dense(counts)[picks].cumsum(axis=0)))


def lowering_by_step(counts, trace) -> np.ndarray:
    """For each greedy step (the 2nd pick of a round to the M-th), the share of rounds in which that step lowered
    the pooled entropy (by more than :data:`TOL`); NaN for a step no round reached."""
    c = _dense(counts)
    width = trace.picked.shape[1]
    drops, seen = np.zeros(width - 1), np.zeros(width - 1)
    for p in _rounds(trace):
        d = np.diff(prefix_entropies(c, p)) if p.size > 1 else np.zeros(0)
        drops[: d.size] += d < -TOL
        seen[: d.size] += 1
    return np.divide(drops, seen, out=np.full(width - 1, np.nan), where=seen > 0)


def entropy_rise_share(counts, trace) -> float:
    """The share of greedy steps (every pick after a round's first) after which the pooled entropy is not lower
    than before it (within :data:`TOL`)."""
    c = _dense(counts)
    steps = [np.diff(prefix_entropies(c, p)) for p in _rounds(trace) if p.size > 1]
    d = np.concatenate(steps) if steps else np.zeros(0)
    return float(np.mean(d >= -TOL)) if d.size else float("nan")


def missing_label_steps(counts, trace, buffer_size: int) -> tuple[float, float, int]:
    """Over the greedy steps where the pooled counts miss a class that some selectable client holds: the share whose
    pick adds a missing class, the mean chance that a uniform pick from the same selectable clients would, and the
    number of such steps.  Selectable: not picked yet this round and not in the FIFO buffer of size
    ``buffer_size``, which is replayed from the recorded picks (Algorithm 1, lines 5 and 10-12)."""
    holds = _dense(counts) > 0
    buffer: list[int] = []
    hits, chances = [], []
    for picks in _rounds(trace):
        pooled = np.zeros(holds.shape[1], dtype=bool)
        free = np.ones(holds.shape[0], dtype=bool)
        free[buffer] = False
        for i, m in enumerate(picks):
            if i > 0:
                adds = (holds & ~pooled).any(axis=1)
                if (adds & free).any():
                    hits.append(bool(adds[m]))
                    chances.append(float(adds[free].mean()))
            pooled |= holds[m]
            buffer.append(int(m))
            free[m] = False
            while len(buffer) > buffer_size:  # the oldest leaves the buffer and is selectable again this round
                old = buffer.pop(0)
                free[old] = old not in picks[: i + 1]
    if not hits:
        return float("nan"), float("nan"), 0
    return float(np.mean(hits)), float(np.mean(chances)), len(hits)


class _FirstPick(np.random.Generator):
    """A generator whose first ``integers(n)`` returns ``first``; every later draw is its own, so a selector that
    used randomness after its first pick would stray from the recorded run."""

    def __init__(self, first: int, seed: int):
        super().__init__(np.random.PCG64(seed))
        self.first, self.calls = first, 0

    def integers(self, *args, **kwargs):
        self.calls += 1
        return self.first if self.calls == 1 else super().integers(*args, **kwargs)


def replay_share(counts, trace, selector, *, seed: int = 0) -> float:
    """The share of rounds that ``selector`` picks again exactly (the same clients in the same order) when given
    the round's recorded first pick and the buffer of the recorded run, with fresh randomness for anything else.
    The first pick is passed as its position among the selectable clients sorted ascending (Algorithm 1, line 7)."""
    state = selector.initial_state(trace.num_clients)
    same = []
    for r, picks in enumerate(_rounds(trace)):
        blocked = np.zeros(trace.num_clients, dtype=bool)
        blocked[list(state)] = True
        position = int(np.searchsorted(np.flatnonzero(~blocked), picks[0]))
        again, state = selector.select(counts, picks.size, state, _FirstPick(position, seed + r))
        same.append(np.array_equal(np.asarray(again), picks))
    return float(np.mean(same))


def repeated_subset_share(trace) -> float:
    """The share of rounds whose set of picked clients equals that of an earlier round."""
    seen: set[frozenset] = set()
    repeats = []
    for picks in _rounds(trace):
        key = frozenset(picks.tolist())
        repeats.append(key in seen)
        seen.add(key)
    return float(np.mean(repeats))
