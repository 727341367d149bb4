"""How often a statement that a seed plan promises to decide does decide: the planner's promise checked by simulation.

A "best"-style statement (FedEntOpt above each rival, every comparison must pass) with known true seed-paired gaps
and spread: a pilot of 3 seeds drawn from that normal, the planner of ``repro.seed_plan`` (one seed count for all,
or seeds per comparison), fresh seeds drawn from the same normal, and the rule (``repro.rules.direction``) judging
them.  Prints, per scenario, how many pilots the planner planned, the share of those that decided, and the chance
the plan promised (its mean).  Seeds of the simulation: ``--seed``.

    python scripts/plan_calibration.py --reps 200      # about 20 min on one core
"""

from __future__ import annotations

import argparse
import sys
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


def one(rng, means, sd, per_comparison: bool, cap: int, pilot: int = 3):
    """(promised chance, verdict on the fresh seeds) of one pilot, or None where the planner plans nothing."""
    names = [f"B{i}" for i in range(len(means))]
    pairs = [("R", x) for x in names]
    j = rules.direction(_frame({x: rng.normal(m, sd, pilot) for x, m in zip(names, means)}, range(pilot)), pairs)
    planner = seed_plan.fresh_seeds_per_comparison if per_comparison else seed_plan.fresh_seeds
    plan = planner(j, cap=cap)
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
    args = ap.parse_args(argv)
    for means, sd in SCENARIOS:
        for per_comparison in (False, True):
            rng = np.random.default_rng(args.seed)
            drawn = (one(rng, means, sd, per_comparison, args.cap) for _ in range(args.reps))
            out = [o for o in drawn if o is not None]
            decided = sum(v in (rules.REPRODUCES, rules.DOES_NOT) for _, v in out)
            how = "seeds per comparison" if per_comparison else "one seed count"
            print(
                f"gaps {list(means)} pp, sd {sd} pp, {how}: planned {len(out)} of {args.reps} pilots; decided "
                f"{decided} ({decided / max(len(out), 1):.2f}); promised {np.mean([c for c, _ in out]):.2f} on average",
                flush=True,
            )


if __name__ == "__main__":
    main()
