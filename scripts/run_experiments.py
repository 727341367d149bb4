"""Run the missing configurations of one group of runs at one tier and store their result tables.

Examples (from the repository root)::

    python scripts/run_experiments.py --tier quick --group all            # every group, minutes on CPU
    python scripts/run_experiments.py --tier subset --group table1 --data-root ../shared/data --workers 2
    python scripts/run_experiments.py --tier subset --group table1 --methods FedAvg,FedEntOpt --rounds 30
    python scripts/run_experiments.py --tier paper --group table1           # network + GPU
    nice python scripts/run_experiments.py --tier subset --group all --workers 2 --threads 1 --engine batched

The last line runs the subset tier with its seed plan (``plans/subset_seed_plan.yaml``, read by
``repro.tiers``) in the layout ``benchmarks/bench_subset_throughput.py`` measured fastest on 2 cores.

Runs are trained with ``fedlib.training.trainer.run_experiment`` under the run cache ``--run-root`` (default ``runs``;
an interrupted run resumes there) and stored as small tables under ``results/<tier>/<group>/``
(``repro.results``).  Stored runs are never retrained.  Prints the group's summary and the wall time.  ``--experiment``
is the old name of ``--group`` (deprecated).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from repro import reporting, results, tiers  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tier", required=True, choices=tuple(tiers.TIERS))
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--group", help=f"one of {', '.join(tiers.GROUPS)}, a comma list of them, or 'all'")
    which.add_argument("--experiment", help="deprecated: the old name of --group")
    p.add_argument("--rounds", type=int, default=None, help="override the tier's number of rounds")
    p.add_argument("--methods", default=None, help="comma-separated subset of methods (table1 and table2)")
    p.add_argument("--partitions", default=None, help="comma-separated subset of partitions, e.g. 'Dir(0.1)'")
    p.add_argument("--seeds", default=None, help="comma-separated subset of seeds")
    p.add_argument("--data-root", default=None, help="folder of the data files (sets $FEDLIB_DATA_ROOT)")
    p.add_argument("--results-dir", default=str(results.RESULTS_DIR))
    p.add_argument("--run-root", default=str(ROOT / "runs"))
    p.add_argument("--workers", type=int, default=1, help="parallel training processes")
    p.add_argument("--threads", type=int, default=None, help="torch threads per process")
    p.add_argument("--dry-run", action="store_true", help="list the missing runs and exit")
    p.add_argument(
        "--backend",
        default="process",
        choices=["process", "ray"],
        help="process: --workers local processes; ray: every run a Ray task (pip install -e '.[ray]')",
    )
    p.add_argument("--ray-address", default=None, help="Ray cluster to join ('auto'); default: start Ray here")
    p.add_argument("--cpus-per-run", type=float, default=1.0, help="Ray CPUs per run (torch threads: --threads)")
    p.add_argument("--gpus-per-run", type=float, default=1.0, help="Ray GPUs per run on cuda (0.5: two per GPU)")
    p.add_argument(
        "--device",
        default=None,
        help="override the tier's device, e.g. cuda from a Ray head node without a GPU (--backend ray)",
    )
    p.add_argument(
        "--engine",
        default=None,
        choices=["reference", "batched"],
        help="override the tier's training engine (not part of the run keys; on CPU the batched engine's loop kernel "
        "gives the reference results bit for bit)",
    )
    args = p.parse_args(argv)
    if args.data_root:
        os.environ["FEDLIB_DATA_ROOT"] = str(Path(args.data_root).resolve())
    if args.experiment:
        print("--experiment is deprecated: use --group", file=sys.stderr, flush=True)
    group = args.group or args.experiment
    names = list(tiers.tier_groups(args.tier)) if group == "all" else group.split(",")
    for n in names:
        if n not in tiers.GROUPS:
            p.error(f"unknown group {n!r}; allowed: {', '.join(tiers.GROUPS)}, all")
    ray = None
    if args.backend == "ray":
        from repro.distributed import RayOptions

        ray = RayOptions(
            address=args.ray_address,
            cpus_per_run=args.cpus_per_run,
            gpus_per_run=args.gpus_per_run,
            threads=args.threads,
        )
    t0 = time.perf_counter()
    for name in names:
        runs = tiers.group_configs(args.tier, name, rounds=args.rounds)
        if args.device or args.engine:  # neither is part of a stored run's key (repro.results.run_key)
            import dataclasses

            swap = {k: v for k, v in (("device", args.device), ("engine", args.engine)) if v}
            runs = [r._replace(config=dataclasses.replace(r.config, **swap)) for r in runs]
        if args.methods:
            keep = set(args.methods.split(","))
            runs = [
                r
                for r in runs
                if r.label.get("method") in keep
                or r.label.get("method", "").replace("FedEntOpt+", "") in keep
                and name == "table2"
            ]
        if args.partitions:
            keep = set(args.partitions.split(","))
            runs = [r for r in runs if r.label.get("partition") in keep]
        if args.seeds:
            keep = {int(s) for s in args.seeds.split(",")}
            runs = [r for r in runs if r.label.get("seed") in keep]
        missing = results.missing_runs(runs, args.tier, args.results_dir)
        print(f"== {args.tier}/{name}: {len(runs)} runs, {len(missing)} missing", flush=True)
        if args.dry_run:
            for r in missing:
                print("   ", r.label)
            continue
        info = results.ensure_runs(
            runs,
            args.tier,
            results_dir=args.results_dir,
            run_root=args.run_root,
            workers=args.workers,
            threads=args.threads,
            ray=ray,
            log=lambda s: print("   " + s, flush=True),
        )
        print(
            f"   trained {info['trained']}, copied {info['copied']}, already stored {info['already']}; "
            f"{info['wall_seconds']:.1f} s",
            flush=True,
        )
        stored = results.load_group(args.tier, name, args.results_dir)
        print("   " + reporting.provenance(stored))
        if name in reporting.SUMMARIES and not stored.empty:
            import pandas as pd

            with pd.option_context("display.width", 200, "display.max_rows", 200, "display.precision", 2):
                print(reporting.SUMMARIES[name](stored).to_string(index=False))
    print(f"total wall time {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
