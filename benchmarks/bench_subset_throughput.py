"""Subset-tier runs per hour on this machine: one process with all cores or one process per core, each engine.

Every layout trains the same short subset-tier runs (``--rounds`` rounds, default 10; FedAvg, Dir(0.1), K = 100,
M = 10, E = 5, LeNet-5, the real CIFAR-10 images at hand) through the sweep's own code path,
``repro.results.ensure_runs`` (``--workers`` processes with ``--threads`` torch threads each), into a
temporary folder.  From each run's stored table (seconds per round) and its wall time it projects a full run of the
tier's rounds (300): set-up + round 0 + rounds x the mean of rounds 2 and later (round 1 warms up).  Runs per hour
= processes x 3600 / the mean projected run time (the processes train side by side), given as a ratio against the
first layout measured in the same invocation.  The load average of the machine before and after is printed: other
jobs on the cores move every figure.

    nice python benchmarks/bench_subset_throughput.py                       # 4 layouts, 2 runs each (~3 min)
    nice python benchmarks/bench_subset_throughput.py --out benchmarks/results/subset_throughput.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from repro import results, tiers  # noqa: E402

#: (processes, torch threads per process, engine); the first is the baseline of the ratios.
LAYOUTS = ((1, 2, "reference"), (2, 1, "reference"), (1, 2, "batched"), (2, 1, "batched"))


def measure(processes: int, threads: int, engine: str, rounds: int, runs: int, full_rounds: int) -> dict:
    """Train ``runs`` short runs (seeds 0, 1, ...) in one layout; their projected full-run time and throughput."""
    planned = [
        tiers.PlannedRun(
            "bench",
            {"seed": s},
            tiers.tier_config(
                "subset", method="FedAvg", partition_name="Dir(0.1)", rounds=rounds, seed=s, engine=engine
            ),
        )
        for s in range(runs)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        info = results.ensure_runs(
            planned, "subset", results_dir=tmp, run_root=None, workers=processes, threads=threads, log=lambda s: None
        )
        wall = time.perf_counter() - t0
        if info["trained"] != runs:
            raise RuntimeError(f"layout {processes}x{threads} {engine}: trained {info['trained']} of {runs} runs")
        projected = []
        for csv in sorted(results.group_dir(tmp, "subset", "bench").glob("*.csv")):
            table, meta = results.load_run(csv)
            sec = table.set_index("round")["seconds"]
            setup = meta["wall_seconds"] - float(sec.sum())
            per_round = float(sec.loc[2:].mean())
            projected.append(setup + float(sec.loc[0]) + full_rounds * per_round)
    run_s = sum(projected) / len(projected)
    return {
        "processes": processes,
        "threads": threads,
        "engine": engine,
        "runs": runs,
        "rounds": rounds,
        "wall_seconds": round(wall, 2),
        "projected_run_seconds": round(run_s, 1),
        "runs_per_hour": round(processes * 3600 / run_s, 2),
        "cpu_seconds_per_run": round(run_s * threads, 1),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=10, help="rounds of each timed run (default 10)")
    p.add_argument("--runs", type=int, default=2, help="runs per layout (default 2: one per process)")
    p.add_argument("--out", default=None, help="also write the figures as JSON to this file")
    args = p.parse_args(argv)
    if args.rounds < 3:
        raise SystemExit(f"--rounds must be at least 3 (got {args.rounds}): round 1 warms up and is not used.")
    full = tiers.get_tier("subset").base["rounds"]
    load0 = os.getloadavg()[0]
    rows = [measure(pr, th, eng, args.rounds, args.runs, full) for pr, th, eng in LAYOUTS]
    load1 = os.getloadavg()[0]
    base = rows[0]["runs_per_hour"]
    for r in rows:
        r["ratio"] = round(r["runs_per_hour"] / base, 3)
    print(
        f"subset tier, FedAvg Dir(0.1), K=100, M=10: {args.runs} runs of {args.rounds} rounds per layout, projected "
        f"to {full} rounds; {os.cpu_count()} cores, load average {load0:.2f} before, {load1:.2f} after"
    )
    print(f"{'layout':<28} {'s per run':>10} {'runs/hour':>10} {'ratio':>7} {'wall (s)':>9}")
    for r in rows:
        name = f"{r['processes']} x {r['threads']} thread(s), {r['engine']}"
        print(
            f"{name:<28} {r['projected_run_seconds']:>10.1f} {r['runs_per_hour']:>10.2f} {r['ratio']:>7.3f} "
            f"{r['wall_seconds']:>9.1f}"
        )
    best = max(rows, key=lambda r: r["runs_per_hour"])
    print(f"most runs per hour: {best['processes']} process(es) x {best['threads']} thread(s), {best['engine']}")
    if args.out:
        out = {
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "git_commit": results.git_commit(),
            "cores": os.cpu_count(),
            "load_average": [round(load0, 2), round(load1, 2)],
            "full_rounds": full,
            "layouts": rows,
            "best": {k: best[k] for k in ("processes", "threads", "engine")},
        }
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
