"""Write a tier's seed plan: the seeds every undecided training statement needs, fixed before the runs it plans.

    python scripts/seed_plan.py                       # plans/subset_seed_plan.yaml (+ _gaps.csv) from the stored runs
    python scripts/seed_plan.py --dry-run             # print the plan, write nothing

The plan (``repro.seed_plan.plan``) is computed from the runs stored under ``results/<tier>/`` (the
pilot); the tier (``repro.tiers``, ``Tier.seed_plan``) reads its ``cells`` and runs their seeds, and
``scripts/run_experiments.py --tier <tier> --experiment all`` trains them.  The file also holds, per statement and
claim, the route to a verdict and its seeds, and the runs to train with their CPU time; ``<plan>_gaps.csv`` beside it
gives every gap's effect, spread and seeds needed.  Seconds per
run from the throughput benchmark (``benchmarks/bench_subset_throughput.py``, its fastest layout), scaled per run by
the clients' share of the work (a line fitted to the stored runs' seconds per round against M x 100 / K).

A plan is written once: an existing file is not replaced (``--replace`` does, for a plan not yet run), so that no
seeds are added after a verdict came close.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import yaml  # noqa: E402

from repro import claims, results, seed_plan, tiers  # noqa: E402

RULE = (
    "today's rules (repro/claims.py): a gap decides when the two-sided 95 % t-interval of its mean "
    "over seeds excludes 0 (or the rule's margin), or for dp_matches lies inside ± the margin; a claim decides "
    "when its rule's count of gaps do (every gap for 'best'), a statement when one claim goes against it or all "
    "decide.  Seeds per gap: the fewest n with power >= POWER (non-central t), capped; the effect is the pilot's "
    "mean gap, or the paper's where it has the same sign, is smaller and lies inside the pilot's interval; the "
    "spread is the pilot's sd.  A gap asks its seeds of both cells it compares; a cell takes the largest ask."
)


def cost_line(tier: str, results_dir=None) -> tuple[float, float]:
    """(a, b) of seconds per round = a + b x M x 100 / K, fitted to the stored runs of ``tier``."""
    xs, ys = [], []
    for group in tiers.tier_groups(tier):
        for csv in sorted(results.group_dir(results_dir, tier, group).glob("*.csv")):
            table, meta = results.load_run(csv)
            c = meta["config"]
            xs.append(c["clients_per_round"] * 100 / c["num_clients"])
            ys.append(float(table["seconds"].iloc[2:].median()))
    b, a = np.polyfit(xs, ys, 1)
    return float(a), float(b)


def runs_to_train(tier: tiers.Tier, cost: tuple[float, float], cpu_s: float, results_dir=None) -> dict:
    """Per group: runs in the tier, stored, copied from another group, to train, and their CPU hours."""
    a, b = cost
    ref = a + b * tier.base["clients_per_round"] * 100 / tier.base["num_clients"]
    seen, out = set(), {}
    for group in tiers.tier_groups(tier):
        row = {"runs": 0, "stored": 0, "copied": 0, "to_train": 0, "cpu_hours": 0.0}
        for r in tiers.group_configs(tier, group):
            key = results.run_key(r.config)
            row["runs"] += 1
            if (results.group_dir(results_dir, tier.name, group) / f"{key}.csv").exists():
                row["stored"] += 1
            elif key in seen or results.find_stored(r.config, tier.name, results_dir) is not None:
                row["copied"] += 1
            else:
                seen.add(key)
                row["to_train"] += 1
                c = r.config
                row["cpu_hours"] += cpu_s * (a + b * c.clients_per_round * 100 / c.num_clients) / ref / 3600
        row["cpu_hours"] = round(row["cpu_hours"], 1)
        out[group] = row
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tier", default="subset", choices=tuple(tiers.TIERS))
    p.add_argument("--out", default=None, help="plan file (default: the tier's Tier.seed_plan)")
    p.add_argument("--benchmark", default=str(ROOT / "benchmarks" / "results" / "subset_throughput.json"))
    p.add_argument("--power", type=float, default=seed_plan.POWER)
    p.add_argument("--cap", type=int, default=seed_plan.CAP)
    p.add_argument("--results-dir", default=None)
    p.add_argument("--replace", action="store_true", help="replace an existing plan (only one not yet run)")
    p.add_argument("--dry-run", action="store_true", help="print the totals, write nothing")
    args = p.parse_args(argv)
    tier = tiers.get_tier(args.tier)
    out = ROOT / (args.out or tier.seed_plan or f"plans/{args.tier}_seed_plan.yaml")
    if out.exists() and not (args.replace or args.dry_run):
        raise SystemExit(
            f"{out} exists: a seed plan is fixed before its runs. Pass --replace only for a plan nothing was run for."
        )
    bench = json.loads(Path(args.benchmark).read_text())
    best = next(r for r in bench["layouts"] if {k: r[k] for k in ("processes", "threads", "engine")} == bench["best"])
    found = seed_plan.plan(args.tier, args.results_dir, target=args.power, cap=args.cap)

    base = dataclasses.replace(tier, seed_plan=None)
    have = {}
    for group in tiers.tier_groups(base):
        for r in tiers.group_configs(base, group):
            k = seed_plan.cell_key(group, r.label)
            have[k] = have.get(k, 0) + 1
    cells = {k: n for k, n in found["cells"].items() if n > have.get(k, 0)}
    cost = cost_line(args.tier, args.results_dir)
    by_group = runs_to_train(
        dataclasses.replace(tier, seed_plan=cells), cost, best["cpu_seconds_per_run"], args.results_dir
    )
    for group, row in runs_to_train(base, cost, best["cpu_seconds_per_run"], args.results_dir).items():
        by_group[group]["to_train_without_plan"] = row["to_train"]  # the tier's own seeds of cells not yet stored
    total = {
        k: sum(g[k] for g in by_group.values())
        for k in ("runs", "stored", "copied", "to_train", "to_train_without_plan")
    }
    cpu = round(sum(g["cpu_hours"] for g in by_group.values()), 1)
    layout = f"{best['processes']} process(es) x {best['threads']} thread(s), {best['engine']} engine"
    doc = {
        "tier": args.tier,
        "computed_at": datetime.datetime.now().isoformat(timespec="seconds"),
        "git_commit": results.git_commit(),
        "how": f"python scripts/seed_plan.py --tier {args.tier} (repro.seed_plan.plan)",
        "pilot": {g: len(results.load_group(args.tier, g, args.results_dir)) for g in tiers.tier_groups(base)},
        "rule": RULE,
        "alpha": claims.ALPHA,
        "power": args.power,
        "cap": args.cap,
        "seconds": {
            "layout": layout,
            "cpu_seconds_per_run": best["cpu_seconds_per_run"],
            "from": f"{Path(args.benchmark).relative_to(ROOT)} (measured {bench['measured_at']})",
            "per_run": f"x (a + b M 100/K) / (a + b 10), seconds per round a = {cost[0]:.3f}, b = {cost[1]:.4f} "
            "fitted to the stored runs",
        },
        "totals": {
            **total,
            "cpu_hours": cpu,
            "wall_hours": round(cpu / (best["processes"] * best["threads"]), 1),
        },
        "groups": by_group,
        "gaps": f"{out.stem}_gaps.csv (one row per gap of every claim above)",
        "statements": found["statements"],
        "claims": found["claims"],
        "cells": [
            {"group": (d := json.loads(k)).pop("group"), "label": d, "seeds": n, "tier_seeds": have.get(k, 0)}
            for k, n in sorted(cells.items())
        ],
    }
    for s in found["statements"]:
        print(f"{s['statement']:<32} {s['route'] or '-':<8} {s['seeds'] or '-':>4}  {s['note'][:90]}")
    print(json.dumps(doc["totals"]), layout)
    for g, row in by_group.items():
        print(f"  {g:<14} {row}")
    if not args.dry_run:
        out.parent.mkdir(parents=True, exist_ok=True)
        head = (
            f"# Seed plan of the {args.tier} tier (issue 31), written by scripts/seed_plan.py from the stored runs\n"
            "# before the runs it plans; the tier reads its cells (repro/tiers.py, Tier.seed_plan).\n"
            "# Not edited by hand; not recomputed once its runs began (a new plan gets a new file).\n"
        )
        text = yaml.safe_dump(doc, sort_keys=False, width=120, allow_unicode=True, default_flow_style=None)
        out.write_text(head + text)
        gaps = out.with_name(f"{out.stem}_gaps.csv")
        gaps.write_text(
            f"# Gaps of the seed plan {out.name}: the pilot's paired mean and sd, the paper's effect, the seeds each "
            "needs\n" + pd.DataFrame(found["gaps"]).astype({"seeds_needed": "Int64"}).to_csv(index=False)
        )
        print(f"wrote {out} and {gaps.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
