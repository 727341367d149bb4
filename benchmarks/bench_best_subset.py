"""Benchmark: the exact maximum-entropy M-subset (repro.best_subset) against brute force and greedy.

Run ``python benchmarks/bench_best_subset.py`` (a few minutes on one core). Two parts, pick them with ``--parts``:

``brute``
    Candidates = the first K clients of the paper's CIFAR-10 Dir(0.1) federation (K = 100, seed 0), M = 5, K in
    ``--brute-ks``: brute force over all C(K, 5) subsets against the branch and bound, in the same process. Both
    must find the same best entropy (else the script stops); the ratio is brute force / branch and bound.
``growth``
    Candidates = the first K clients of the paper's federations (CIFAR-10 and CIFAR-100(20), C=2 and Dir(0.1),
    K = 100, seed 0), M in ``--ms``, K in ``--ks``: seconds of the branch and bound (stopped at ``--node-limit``
    nodes) and of one FedEntOpt round on the same candidates (the greedy, same process), their ratio, the nodes, and
    whether the result is proven optimal within ``--target`` seconds. Once a (setting, M) fails, larger K are
    skipped (they would fail as well: the pool only grows).

All times of one comparison are taken in the same process; on a loaded machine compare ratios, not seconds. The
header prints the load average.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing fedlib
from fedlib.selection.selectors import FedEntOptSelector  # noqa: E402
from repro.best_subset import GAP_TOL, best_subset, brute_force_subset  # noqa: E402
from repro.greedy_gap import paper_counts  # noqa: E402

SETTINGS = [("cifar10", "C=2"), ("cifar10", "Dir(0.1)"), ("cifar100-20", "C=2"), ("cifar100-20", "Dir(0.1)")]


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def brute_part(ks, clients_per_round: int = 5) -> None:
    counts = paper_counts("cifar10", "Dir(0.1)", 100, 0)
    print(f"\n### Against brute force: CIFAR-10 Dir(0.1), candidates = the first K clients, M = {clients_per_round}\n")
    print("| K | subsets | brute force [s] | branch and bound [s] | ratio | nodes | same best |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | :---: |")
    for k in ks:
        candidates = np.arange(k)
        (best, _), brute = _timed(
            lambda: brute_force_subset(counts, clients_per_round, candidates=candidates, max_subsets=10**8)
        )
        result, exact = _timed(lambda: best_subset(counts, clients_per_round, candidates=candidates))
        same = result.optimal and abs(result.entropy - best) <= GAP_TOL
        if not same:
            raise SystemExit(f"K={k}: branch and bound {result.entropy} != brute force {best}")
        print(
            f"| {k} | {math.comb(k, clients_per_round):,} | {brute:.3f} | {exact:.3f} | {brute / exact:.1f}x | "
            f"{result.nodes:,} | yes |",
            flush=True,
        )


def _greedy_seconds(counts, candidates, clients_per_round: int, repeats: int = 5) -> float:
    """Best of ``repeats`` FedEntOpt rounds on the candidates alone (rows outside them are not scored)."""
    sub = counts[candidates]
    selector = FedEntOptSelector(buffer_size=0)
    times = [
        _timed(lambda: selector.select(sub, clients_per_round, (), np.random.default_rng(r)))[1] for r in range(repeats)
    ]
    return min(times)


def growth_part(ks, ms, node_limit: int, target: float) -> None:
    print(
        f"\n### Growth: candidates = the first K clients of the paper's federations (seed 0), node limit "
        f"{node_limit:,}, target {target:g} s\n"
    )
    print(
        "| data set | partition | M | K | branch and bound [s] | greedy [s] | ratio | nodes | proven | "
        f"within {target:g} s |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | :---: | :---: |")
    for profile, partition in SETTINGS:
        counts = paper_counts(profile, partition, 100, 0)
        for m in ms:
            for k in ks:
                candidates = np.arange(k)
                result, exact = _timed(lambda: best_subset(counts, m, candidates=candidates, node_limit=node_limit))
                greedy = _greedy_seconds(counts, candidates, m)
                ok = result.optimal and exact <= target
                print(
                    f"| {profile} | {partition} | {m} | {k} | {exact:.3f} | {greedy:.4f} | {exact / greedy:,.0f}x | "
                    f"{result.nodes:,} | {'yes' if result.optimal else 'no'} | {'yes' if ok else 'no'} |",
                    flush=True,
                )
                if not ok:
                    break


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="brute,growth")
    parser.add_argument("--brute-ks", default="16,20,24,28")
    parser.add_argument("--ks", default="20,30,40,50,60,80,100")
    parser.add_argument("--ms", default="5,10")
    parser.add_argument("--node-limit", type=int, default=50_000)
    parser.add_argument("--target", type=float, default=10.0)
    args = parser.parse_args(argv)
    ints = lambda text: [int(x) for x in text.split(",") if x]  # noqa: E731
    print(f"# bench_best_subset: load average {os.getloadavg()[0]:.1f} at the start, {os.cpu_count()} CPUs")
    parts = args.parts.split(",")
    for part in parts:
        if part not in ("brute", "growth"):
            parser.error(f"--parts: unknown part {part!r}; allowed: brute, growth")
    if "brute" in parts:
        brute_part(ints(args.brute_ks))
    if "growth" in parts:
        growth_part(ints(args.ks), ints(args.ms), args.node_limit, args.target)
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
