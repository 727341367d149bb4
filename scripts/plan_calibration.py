"""How often a statement that a seed plan promises to decide does decide: the planner's promise checked by simulation.

A "best"-style statement (FedEntOpt above each rival, every comparison must pass) with known true seed-paired gaps
and spread: a pilot of 3 seeds drawn from that normal and kept when the rule leaves it undecided (a plan sees no
other), the planner of ``repro.seed_plan`` (one seed count for all, or seeds per comparison; chances at the
pilot's estimates, or averaged over the truths the pilot allows), fresh seeds drawn from the same normal, and the
rule (``repro.rules.direction``) judging them.  Prints, per scenario, how many pilots the planner planned, the
share of those that decided, and the chance the plan promised (its mean).  Seeds of the simulation: ``--seed``.

    python scripts/plan_calibration.py --reps 200 --write   # about an hour on one core; writes the book's table
"""

from __future__ import annotations

import argparse
import sys
from itertools import product
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from repro import rules, seed_plan  # noqa: E402

#: (true gaps of FedEntOpt over each rival, seed-paired sd), both in pp.
SCENARIOS = (((1.0,), 1.0), ((3.0, 3.0, 1.0, 3.0), 1.0))


def _frame(gaps: dict, seeds) -> pd.DataFrame:
    rows = [{"method": "R", "seed": s, "value": 0.0} for s in seeds]
    rows += [{"method": x, "seed": s, "value": -g[i]} for x, g in gaps.items() for i, s in enumerate(seeds)]
    return pd.DataFrame(rows)


def one(rng, means, sd, per_comparison: bool, cap: int, draws: int, pilot: int = 3):
    """(promised chance, verdict on the fresh seeds) of one pilot, or None where the planner plans nothing (the pilot
    decided already, or no seed count within ``cap`` decides)."""
    names = [f"B{i}" for i in range(len(means))]
    pairs = [("R", x) for x in names]
    j = rules.direction(_frame({x: rng.normal(m, sd, pilot) for x, m in zip(names, means)}, range(pilot)), pairs)
    planner = seed_plan.fresh_seeds_per_comparison if per_comparison else seed_plan.fresh_seeds
    if j.verdict != rules.UNDECIDED:
        return None
    plan = planner(j, cap=cap, draws=draws, seed=int(rng.integers(2**31)))
    if plan["n"] is None:
        return None
    keys = [seed_plan.comparison_key(v) for v in j.comparisons()]
    n = plan["n"] if per_comparison else dict.fromkeys(keys, plan["n"])
    by_rival = {k[1].split(" - ")[1]: v for k, v in n.items()}
    fresh = {x: rng.normal(m, sd, by_rival[x]) for x, m in zip(names, means)}
    rows = [{"method": "R", "seed": s, "value": 0.0} for s in range(max(by_rival.values()))]
    rows += [{"method": x, "seed": s, "value": -g} for x, gs in fresh.items() for s, g in enumerate(gs)]
    return sum(plan["chances"]), rules.direction(pd.DataFrame(rows), pairs).verdict


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cap", type=int, default=100, help="most fresh seeds a cell (the confirmatory plans' 100)")
    ap.add_argument("--write", action="store_true", help=f"also write the table to {seed_plan.CALIBRATION}")
    args = ap.parse_args(argv)
    rows = []
    for means, sd in SCENARIOS:
        for per_comparison, draws in product((False, True), (0, seed_plan.DRAWS)):
            rng = np.random.default_rng(args.seed)
            drawn = (one(rng, means, sd, per_comparison, args.cap, draws) for _ in range(args.reps))
            out = [o for o in drawn if o is not None]
            decided = sum(v in (rules.REPRODUCES, rules.DOES_NOT) for _, v in out)
            rows.append(
                {
                    "true gaps (pp)": " ".join(f"{m:g}" for m in means),
                    "sd (pp)": sd,
                    "seeds": "per comparison" if per_comparison else "one count",
                    "chances": f"averaged over {draws} draws" if draws else "at the pilot's estimates",
                    "pilots": args.reps,
                    "planned": len(out),
                    "decided": decided,
                    "share decided": round(decided / max(len(out), 1), 3),
                    "chance promised": round(float(np.mean([c for c, _ in out])), 3) if out else None,
                }
            )
            print(", ".join(f"{k} {v}" for k, v in rows[-1].items()), flush=True)
    if args.write:
        pd.DataFrame(rows).to_csv(ROOT / seed_plan.CALIBRATION, index=False)
        print(f"wrote {seed_plan.CALIBRATION}")


if __name__ == "__main__":
    main()
