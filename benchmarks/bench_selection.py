"""Benchmark: FedEntOpt selection (fedlib.selection.selectors) - incremental scorer vs. the plain line 9 vs. the
literal loop.

Run ``python benchmarks/bench_selection.py`` (a few minutes on 2 cores). Three parts, pick them with ``--parts``
(and a fourth, ``small``, run only when asked):

``headline``
    One round at K=100,000, M=1,000, C=100 (``--headline-size``; Dir(0.1) counts of a balanced data set, 500
    samples per client on average, Q = K/2), the first (empty buffer) and a steady-state one
    (buffer full: Q = K/2 distinct clients,
    :func:`full_buffer`): the default engine (incremental, :mod:`fedlib.selection.scoring`) against the plain line 9
    (every candidate re-scored at every step, the ``"plain"`` path), in the same process. Both must pick
    the same clients and leave the same buffer; the ratio is baseline / incremental (target >= 4x on a 2-core
    CPU). The baseline runs ``--baseline-repeats`` times, the incremental engine ``--repeats`` times; best
    times count. ``--torch cuda`` adds the torch engine (:mod:`fedlib.selection._torch_scoring`; target <= 0.1 s per
    round on a GPU).
``literal``
    K=1,000, M=20, C in {10, 100}: the selector (default engine, forced incremental, and the plain path)
    against a literal per-candidate loop of Algorithm 1 over 5 rounds (same
    picks), then the time of one round of each; K=10,000, M=100, C=100 against the < 1 s target.
``growth``
    Steady-state round time (buffer full) of the default engine for K in ``--ks`` and M in ``--ms`` (M <= K/2, so
    that Q = K/2 <= K - M),
    from sparse counts (K=10^6 needs no dense K x C array); the plain baseline too where
    nnz * M <= ``--baseline-budget`` (and at K=100,000, M=1,000 from the headline part when it ran). Writes
    ``--plot`` (PNG) and prints a Markdown table.

``small``
    K from 50 to 2,000, M = 10, C in {10, 100, 1000}: 20 rounds of the plain path against the incremental one (same
    picks), the ratio incremental / plain: where the plain path is quicker, which sets ``AUTO_PLAIN_ENTRIES`` (the
    K x C up to which ``"auto"`` scores plainly).

All times of one comparison are taken in the same process; on a loaded machine compare ratios, not seconds.
The header prints the load average.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
import time
from collections import deque
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing fedlib
import fedlib.selection.scoring as scoring  # noqa: E402
from fedlib.selection.selectors import ENTROPY_TIE_TOL, FedEntOptSelector  # noqa: E402
from repro.cross_device import dirichlet_counts  # noqa: E402

__all__ = ["literal_fedentopt", "synthetic_counts", "scoring_path", "dense_scoring", "density", "full_buffer", "main"]

HERE = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=4)
def synthetic_counts(
    num_clients: int,
    num_classes: int,
    *,
    beta: float = 0.1,
    seed: int = 0,
    samples_per_client: int = 500,
    sparse: bool = False,
):
    """Integer counts of a Dir(beta) partition (NIID-Bench style) of a balanced data set.

    :func:`repro.cross_device.dirichlet_counts`: the data set has ``samples_per_client * K`` samples, split
    evenly over the C classes; each class is dealt to the clients with shares ~ Dir_K(beta) and the balance
    step of :func:`fedlib.data.partition.dirichlet_partition` (the same counts as that partitioner gives).
    ``min_partition_size=0``: at K >= 1,000 and beta = 0.1 a few clients draw nothing.
    """
    counts = dirichlet_counts(
        num_clients, num_classes, seed=seed, samples_per_client=samples_per_client, beta=beta, sparse=sparse
    )
    if not sparse:
        counts.setflags(write=False)
    return counts


def scoring_path(path: str):
    """Within the block the selectors use the given scorer path ("incremental", "plain")."""
    return scoring.scorer_path(path)


def dense_scoring():
    """Within the block the selectors score line 9 plainly (one log per (candidate, class))."""
    return scoring_path("plain")


def _entropy_literal(vector: np.ndarray) -> float:
    """H(v / ||v||_1) in bits for one vector, exactly as eq. (5) reads (0 log 0 = 0)."""
    p = vector / vector.sum()
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum())


def literal_fedentopt(counts: np.ndarray, clients_per_round: int, buffer: tuple, buffer_size: int, rng):
    """Algorithm 1 line by line: every candidate's entropy is computed on its own in a Python loop."""
    counts = np.asarray(counts, dtype=float)
    num_clients = counts.shape[0]
    big_l = np.zeros(counts.shape[1])
    chosen: list[int] = []
    remaining = set(range(num_clients))  # A
    fifo = deque(buffer)  # B
    for i in range(1, clients_per_round + 1):
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


def _best_time(fn, repeats: int) -> tuple[float, object]:
    best, out = np.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def density(counts) -> float:
    """Share of non-zero entries."""
    nnz = counts.nnz if hasattr(counts, "nnz") else np.count_nonzero(counts)
    return float(nnz) / (counts.shape[0] * counts.shape[1])


def _nnz(counts) -> int:
    return int(counts.nnz if hasattr(counts, "nnz") else np.count_nonzero(counts))


def full_buffer(num_clients: int, seed: int = 11) -> tuple:
    """A steady-state FedEntOpt state: the buffer full with Q = K/2 distinct clients (random, oldest first)."""
    q = FedEntOptSelector(buffer_fraction=0.5).resolve_buffer_size(num_clients, 1)
    return tuple(np.random.default_rng(seed).choice(num_clients, size=q, replace=False).tolist())


def _one_round(counts, clients_per_round: int, path: str | None, state: tuple = (), seed: int = 7):
    sel = FedEntOptSelector(buffer_fraction=0.5)
    with scoring_path(path) if path else contextlib.nullcontext():
        return sel.select(counts, clients_per_round, state, np.random.default_rng(seed))


# --------------------------------------------------------------------------- parts


def headline(args) -> None:
    k, m, c = args.headline_size
    counts = synthetic_counts(k, c)
    print(
        f"\n## Headline: one round at K={k:,}, M={m:,}, C={c}, Q=K/2 (density {density(counts):.3f}, "
        f"{_nnz(counts):,} non-zeros)"
    )
    for label, start in (("round 1 (empty buffer)", ()), ("steady state (buffer full, Q=K/2)", full_buffer(k))):
        t_new, (picked, state) = _best_time(lambda: _one_round(counts, m, None, start), args.repeats)
        t_old, (picked_old, state_old) = _best_time(
            lambda: _one_round(counts, m, "plain", start), args.baseline_repeats
        )
        same = bool(np.array_equal(picked, picked_old) and state == state_old)
        print(
            f"{label}: plain {t_old:7.3f} s, incremental (default) {t_new:7.3f} s; "
            f"same picks and buffer: {same}; speed-up {t_old / t_new:.1f}x (target >= 4x)",
            flush=True,
        )
        assert same, "the incremental engine and the plain path disagree"
        args.headline_times = (k, m, t_old, same)  # the steady-state baseline joins the growth table
        if args.torch:
            with scoring.scorer_path("torch", device=args.torch):
                _one_round(counts, 5, None, start)  # warm-up (CUDA context, kernels)
                t_gpu, (p_gpu, s_gpu) = _best_time(lambda: _one_round(counts, m, None, start), args.repeats)
            same_gpu = bool(np.array_equal(p_gpu, picked_old) and s_gpu == state_old)
            print(
                f"{label}: torch engine on {args.torch} {t_gpu:7.3f} s; same picks and buffer: {same_gpu}; "
                f"speed-up over the plain path {t_old / t_gpu:.1f}x (target on a GPU: <= 0.1 s)",
                flush=True,
            )


def literal(args) -> None:
    print("\n## Against the literal loop of Algorithm 1 (5 rounds same picks, then one round timed)")
    print(
        f"{'K':>6} {'M':>4} {'C':>4} {'density':>8} {'same':>5} {'loop [s]':>9} {'default [s]':>11} "
        f"{'incr. [s]':>10} {'plain [s]':>10} {'loop/default':>12}"
    )
    for k, m, c in [(1000, 20, 10), (1000, 20, 100)]:
        counts = synthetic_counts(k, c)
        sel = FedEntOptSelector(buffer_fraction=0.5)
        q = sel.resolve_buffer_size(k, m)
        fast = lambda st, rng: sel.select(counts, m, st, rng)  # noqa: E731
        slow = lambda st, rng: literal_fedentopt(counts, m, st, q, rng)  # noqa: E731
        reference = _run_rounds(slow, 5, seed=123)
        same = True
        times = {}
        for path in (None, "incremental", "plain"):
            with scoring_path(path) if path else contextlib.nullcontext():
                hist, state = _run_rounds(fast, 5, seed=123)
                same &= bool(np.array_equal(hist, reference[0]) and state == reference[1])
                times[path], _ = _best_time(lambda: fast((), np.random.default_rng(7)), args.vector_repeats)
        assert same, f"the implementations disagree at K={k}, M={m}, C={c}"
        t_loop, _ = _best_time(lambda: slow((), np.random.default_rng(7)), args.repeats)
        print(
            f"{k:>6} {m:>4} {c:>4} {density(counts):>8.3f} {str(same):>5} {t_loop:>9.4f} {times[None]:>11.5f} "
            f"{times['incremental']:>10.5f} {times['plain']:>10.5f} "
            f"{t_loop / times[None]:>11.0f}x"
        )
    counts = synthetic_counts(10_000, 100)
    for frac in (0.5, 0.0):
        sel = FedEntOptSelector(buffer_fraction=frac)
        t, _ = _best_time(lambda: sel.select(counts, 100, (), np.random.default_rng(7)), args.repeats)
        print(
            f"K=10000 M=100 C=100 (density {density(counts):.3f}) Q={frac:.0%} of K: {t:.3f} s per round (target < 1 s)"
        )


def small(args) -> None:
    """Small pools: the plain path against the incremental one, 20 rounds each from one start (same picks), the
    ratio incremental / plain (above 1: plain is quicker; "auto" scores plainly up to AUTO_PLAIN_ENTRIES = K x C)."""
    print(f'\n## Small pools: plain or incremental ("auto" is plain up to K x C = {scoring.AUTO_PLAIN_ENTRIES})')
    print(f"{'K':>6} {'M':>4} {'C':>4} {'same':>5} {'plain [ms]':>11} {'incr. [ms]':>11} {'incr./plain':>12}")
    sizes = [(50, 10), (100, 10), (100, 100), (200, 10), (200, 100), (500, 10), (500, 100), (1000, 10), (2000, 10)]
    for k, c in [*sizes, (100, 1000)]:
        counts, m = synthetic_counts(k, c), 10
        sel = FedEntOptSelector(buffer_fraction=0.5)
        times, picks = {}, {}
        for path in ("plain", "incremental"):
            with scoring_path(path):
                t, (picks[path], _) = _best_time(
                    lambda: _run_rounds(lambda st, rng: sel.select(counts, m, st, rng), 20, seed=5), args.repeats
                )
            times[path] = t / 20 * 1e3
        same = bool(np.array_equal(picks["plain"], picks["incremental"]))
        assert same, f"the paths disagree at K={k}, C={c}"
        ratio = times["incremental"] / times["plain"]
        print(
            f"{k:>6} {m:>4} {c:>4} {str(same):>5} {times['plain']:>11.3f} {times['incremental']:>11.3f} {ratio:>11.2f}x"
        )


def growth(args) -> None:
    print(
        f"\n## Growth: seconds per steady-state round (buffer full), C={args.classes}, Dir(0.1), 500 samples per "
        "client, Q=K/2 "
        f"(baseline where nnz*M <= {args.baseline_budget:.0e})"
    )
    rows = []
    for k in args.ks:
        counts = synthetic_counts(k, args.classes, sparse=True)
        dense = None
        for m in args.ms:
            if m > k // 2:
                continue
            if k >= 1_000_000 and m >= 10_000 and not args.big:
                print(f"K={k:,} M={m:,}: skipped (several minutes; --big runs it)")
                continue
            reps = 3 if _nnz(counts) * m < 5e7 else 1
            start = full_buffer(k)
            t_new, (picked, state) = _best_time(lambda: _one_round(counts, m, None, start), reps)
            t_old = same = None
            if _nnz(counts) * m <= args.baseline_budget:
                if dense is None:
                    dense = counts.toarray()
                t_old, (p_old, s_old) = _best_time(lambda: _one_round(dense, m, "plain", start), reps)
                same = bool(np.array_equal(picked, p_old) and s_old == state)
                assert same, f"engines disagree at K={k}, M={m}"
            if t_old is None and getattr(args, "headline_times", (None,) * 4)[:2] == (k, m):
                t_old, same = args.headline_times[2:]  # measured in the headline part, same state and seed
            rows.append((k, m, _nnz(counts), t_new, t_old, same))
            print(
                f"K={k:>9,} M={m:>6,} nnz={_nnz(counts):>11,} incremental {t_new:9.3f} s"
                + (f"   plain {t_old:9.3f} s   ratio {t_old / t_new:6.1f}x   same {same}" if t_old else ""),
                flush=True,
            )
    print("\n| K | M | non-zeros | incremental [s/round] | plain [s/round] | ratio | same picks |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | :---: |")
    for k, m, nnz, t_new, t_old, same in rows:
        old = f"{t_old:.3f}" if t_old else "–"
        ratio = f"{t_old / t_new:.1f}×" if t_old else "–"
        print(f"| {k:,} | {m:,} | {nnz:,} | {t_new:.3f} | {old} | {ratio} | {'yes' if same else '–'} |")
    if args.plot:
        _plot(rows, args.plot, args.classes)


def _plot(rows, path: str, num_classes: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, m in enumerate(sorted({r[1] for r in rows})):
        pts = sorted((k, t) for k, mm, _, t, _, _ in rows if mm == m)
        ax.plot(*zip(*pts), "o-", color=f"C{i}", label=f"M={m:,} incremental")
        old = sorted((k, t) for k, mm, _, _, t, _ in rows if mm == m and t)
        if old:
            ax.plot(*zip(*old), "s--", color=f"C{i}", alpha=0.6, label=f"M={m:,} plain")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="clients K",
        ylabel="seconds per round",
        title=f"FedEntOpt round time, C={num_classes}, Dir(0.1), Q=K/2 (2-core CPU)",
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--parts", default="headline,literal,growth", help="comma-separated: headline,literal,growth,small"
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of the incremental rounds (best counts)")
    parser.add_argument("--baseline-repeats", type=int, default=1, help="timed runs of the headline baseline")
    parser.add_argument("--vector-repeats", type=int, default=20, help="timed runs of the K=1,000 rounds")
    parser.add_argument(
        "--ks",
        type=lambda s: [int(float(x)) for x in s.split(",")],
        default=[1000, 10_000, 100_000, 1_000_000],
        help="growth: pool sizes K (e.g. 1e3,1e4)",
    )
    parser.add_argument(
        "--ms",
        type=lambda s: [int(float(x)) for x in s.split(",")],
        default=[10, 100, 1000, 10_000],
        help="growth: picks per round M",
    )
    parser.add_argument("--classes", type=int, default=100, help="growth: classes C")
    parser.add_argument(
        "--headline-size",
        type=lambda s: [int(float(x)) for x in s.split(",")],
        default=[100_000, 1_000, 100],
        help="headline: K,M,C (the plain baseline takes minutes at the default 1e5,1e3,100)",
    )
    parser.add_argument(
        "--baseline-budget",
        type=float,
        default=4e8,
        help="growth: time the plain baseline where non-zeros * M is at most this",
    )
    parser.add_argument("--big", action="store_true", help="growth: also K=10^6 with M=10^4 (several minutes)")
    parser.add_argument("--plot", default=str(HERE / "selection_growth.png"), help="growth plot (PNG); '' for none")
    parser.add_argument(
        "--torch",
        default=None,
        metavar="DEVICE",
        help="headline: also time the torch engine on this device (e.g. cuda)",
    )
    args = parser.parse_args(argv)
    load = os.getloadavg()
    print(
        f"FedEntOpt selection benchmark; {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} "
        f"{load[2]:.2f}; numpy {np.__version__}; compiled accumulation: {scoring._CSC_MATVEC is not None}"
    )
    parts = {"headline": headline, "literal": literal, "growth": growth, "small": small}
    for name in args.parts.split(","):
        parts[name.strip()](args)
    load = os.getloadavg()
    print(f"\nload average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
