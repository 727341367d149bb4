"""Benchmark: vectorised FedEntOpt selection (fedlib.selection) vs. a literal per-candidate loop of Algorithm 1 (v2).

Run ``python benchmarks/bench_selection.py``. For each case it checks that both implementations pick the
same clients (and return the same buffer) for the same rng seed over several rounds, then prints the
best-of-repeats time per round, the speed-up, and the density (share of non-zero entries) of the count
matrix. The "dense" column times the same selector forced onto the dense scoring path (one log per
(candidate, class) entry), the path that non-negative counts used before the sparse one. Targets: >= 50x
at K=1,000, M=20 (C=10 and C=100); the vectorised version under 1 s per round at K=10,000, M=100, C=100.
All times of one row are taken in the same process; on a loaded machine compare ratios, not seconds.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import sys
import time
from collections import deque
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing fedlib
import fedlib.selection as selection  # noqa: E402
from fedlib.partition import client_label_counts, labels_from_counts  # noqa: E402
from fedlib.selection import ENTROPY_TIE_TOL, FedEntOptSelector  # noqa: E402

__all__ = ["literal_fedentopt", "synthetic_counts", "dense_scoring", "density", "main"]


@functools.lru_cache(maxsize=None)
def synthetic_counts(num_clients: int, num_classes: int, *, beta: float = 0.1, seed: int = 0,
                     samples_per_client: int = 500) -> np.ndarray:
    """Integer counts of a Dir(beta) partition (NIID-Bench style) of a balanced data set.

    The data set has ``samples_per_client * K`` samples, split evenly over the C classes; each class is
    dealt to the clients with shares ~ Dir_K(beta) and the balance step of
    :func:`fedlib.partition.dirichlet_partition`. ``min_partition_size=0``: at K >= 1,000 and beta = 0.1 a
    few clients draw nothing, and the size-10 redraw rule would not succeed.
    """
    labels = labels_from_counts([samples_per_client * num_clients // num_classes] * num_classes)
    counts = client_label_counts(labels, "dirichlet", num_clients, seed=seed, beta=beta, min_partition_size=0)
    counts.setflags(write=False)
    return counts


@contextlib.contextmanager
def dense_scoring():
    """Within the block the selectors score on the dense path (for the "dense" column)."""
    original = selection._EntropyScorer
    selection._EntropyScorer = functools.partial(original, path="dense")
    try:
        yield
    finally:
        selection._EntropyScorer = original


def _entropy_literal(vector: np.ndarray) -> float:
    """H(v / ||v||_1) in bits for one vector, exactly as eq. (5) reads (0 log 0 = 0)."""
    p = vector / vector.sum()
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum())


def literal_fedentopt(counts: np.ndarray, num_selected: int, buffer: tuple, buffer_size: int, rng):
    """Algorithm 1 line by line: every candidate's entropy is computed on its own in a Python loop."""
    counts = np.asarray(counts, dtype=float)
    num_clients = counts.shape[0]
    big_l = np.zeros(counts.shape[1])
    chosen: list[int] = []
    remaining = set(range(num_clients))  # A
    fifo = deque(buffer)  # B
    for i in range(1, num_selected + 1):
        candidates = sorted(remaining - set(fifo))  # U = A \ B
        if i == 1:
            m_star = candidates[rng.integers(len(candidates))]
        else:
            scores = [_entropy_literal(big_l + counts[m]) for m in candidates]
            best = max(scores)
            m_star = next(m for m, h in zip(candidates, scores) if h >= best - ENTROPY_TIE_TOL)
        fifo.append(m_star)
        while len(fifo) > buffer_size:
            fifo.popleft()
        big_l = big_l + counts[m_star]
        chosen.append(m_star)
        remaining.discard(m_star)
    return np.array(chosen, dtype=np.int64), tuple(fifo)


def _run_rounds(fn, rounds: int, seed: int):
    rng = np.random.default_rng(seed)
    state, history = (), []
    for _ in range(rounds):
        picked, state = fn(state, rng)
        history.append(picked)
    return np.stack(history), state


def _best_time(fn, repeats: int) -> float:
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def compare(num_clients: int, num_selected: int, num_classes: int, *, fraction: float, rounds: int, repeats: int,
            vector_repeats: int):
    """Check identical picks over ``rounds`` rounds (sparse and dense paths), then time one round of each."""
    counts = synthetic_counts(num_clients, num_classes)
    sel = FedEntOptSelector(buffer_fraction=fraction)
    q = sel.resolve_buffer_size(num_clients, num_selected)
    fast = lambda st, rng: sel.select(counts, num_selected, st, rng)  # noqa: E731
    slow = lambda st, rng: literal_fedentopt(counts, num_selected, st, q, rng)  # noqa: E731
    fast_hist, fast_state = _run_rounds(fast, rounds, seed=123)
    slow_hist, slow_state = _run_rounds(slow, rounds, seed=123)
    with dense_scoring():
        dense_hist, dense_state = _run_rounds(fast, rounds, seed=123)
    identical = bool(
        np.array_equal(fast_hist, slow_hist) and fast_state == slow_state
        and np.array_equal(dense_hist, slow_hist) and dense_state == slow_state
    )
    assert identical, f"the implementations disagree at K={num_clients}, M={num_selected}, C={num_classes}"
    t_fast = _best_time(lambda: fast((), np.random.default_rng(7)), vector_repeats)
    t_slow = _best_time(lambda: slow((), np.random.default_rng(7)), repeats)
    with dense_scoring():
        t_dense = _best_time(lambda: fast((), np.random.default_rng(7)), vector_repeats)
    return identical, t_fast, t_slow, t_dense


def time_vectorised(num_clients: int, num_selected: int, num_classes: int, *, fraction: float, repeats: int):
    """Best-of-repeats time of one round on the default (sparse) and the dense path."""
    counts = synthetic_counts(num_clients, num_classes)
    sel = FedEntOptSelector(buffer_fraction=fraction)
    run = lambda: sel.select(counts, num_selected, (), np.random.default_rng(7))  # noqa: E731
    with dense_scoring():
        dense_picks = run()
    assert np.array_equal(run()[0], dense_picks[0]) and run()[1] == dense_picks[1]
    t = _best_time(run, repeats)
    with dense_scoring():
        t_dense = _best_time(run, repeats)
    return t, t_dense


def density(counts: np.ndarray) -> float:
    """Share of non-zero entries."""
    return float(np.count_nonzero(counts)) / counts.size


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs of the loop and of the K=10,000 rounds")
    parser.add_argument("--vector-repeats", type=int, default=30,
                        help="timed runs of the vectorised rounds at K=1,000 (milliseconds each: more runs are "
                             "needed to find an unloaded moment on a busy machine)")
    parser.add_argument("--fraction", type=float, default=0.5, help="buffer fraction Q/K (paper: 0.5 for Dir)")
    args = parser.parse_args(argv)
    print(f"FedEntOpt selection, one round, Q = {args.fraction:.0%} of K, counts of a Dir(0.1) partition of a "
          "balanced data set (500 samples per client on average)")
    print(f"{'K':>6} {'M':>4} {'C':>4} {'density':>8} {'same picks':>10} {'loop [s]':>10} {'vector [s]':>11} "
          f"{'speed-up':>9} {'dense [s]':>10} {'dense speed-up':>15}")
    for k, m, c in [(1000, 20, 10), (1000, 20, 100)]:
        same, t_fast, t_slow, t_dense = compare(k, m, c, fraction=args.fraction, rounds=5, repeats=args.repeats,
                                                vector_repeats=args.vector_repeats)
        print(f"{k:>6} {m:>4} {c:>4} {density(synthetic_counts(k, c)):>8.3f} {str(same):>10} {t_slow:>10.4f} "
              f"{t_fast:>11.5f} {t_slow / t_fast:>8.0f}x {t_dense:>10.5f} {t_slow / t_dense:>14.0f}x")
    dens = density(synthetic_counts(10_000, 100))
    for q in (args.fraction, 0.0):
        t, t_dense = time_vectorised(10_000, 100, 100, fraction=q, repeats=args.repeats)
        print(f"vectorised only: K=10000 M=100 C=100 (density {dens:.3f}) Q={q:.0%} of K: {t:.3f} s per round "
              f"(target < 1 s; dense path {t_dense:.3f} s)")


if __name__ == "__main__":
    main()
