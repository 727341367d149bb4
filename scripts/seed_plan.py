"""Print a tier's committed seed plan and how far its runs have got.

    python scripts/seed_plan.py                   # the subset tier's plan (plans/subset_seed_plan.yaml)
    python scripts/seed_plan.py --tier subset --results-dir DIR

A plan is computed once, before the runs it asks for, and never again once they began.  The subset tier's plan was
written by this script at the commit the file records (``git_commit``), from the statement inventory the scorecard
had before ``repro/statements.yaml`` and the rules replaced it: ``git show <git_commit>:scripts/seed_plan.py`` is
the script that wrote it.  A plan from the statement table and :mod:`repro.rules` is a new plan, in a new file.
The tier (``repro.tiers``, ``Tier.seed_plan``) reads the plan's ``cells`` and runs their seeds;
``scripts/run_experiments.py --tier <tier> --group all`` trains them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from repro import seed_plan, tiers  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tier", default="subset", choices=tuple(tiers.TIERS))
    p.add_argument("--results-dir", default=None, help="stored result tables (default: the repository's results/)")
    args = p.parse_args(argv)
    plan = seed_plan.read_plan(args.tier)
    print(
        f"{tiers.get_tier(args.tier).seed_plan}: computed {plan['computed_at']} at commit {plan['git_commit']}, "
        f"level {plan['alpha']}, power {plan['power']}, at most {plan['cap']} seeds a cell"
    )
    rows = seed_plan.progress(args.tier, args.results_dir)
    print(f"  {'group':<14} {'runs':>5} {'stored':>7} {'to train':>9} {'CPU hours left':>15}")
    for r in rows:
        print(f"  {r['group']:<14} {r['runs']:>5} {r['stored']:>7} {r['to_train']:>9} {r['cpu_hours_left']:>15}")
    total = {k: sum(r[k] for r in rows) for k in ("runs", "stored", "to_train")}
    hours = round(sum(r["cpu_hours_left"] for r in rows), 1)
    print(f"  {'all':<14} {total['runs']:>5} {total['stored']:>7} {total['to_train']:>9} {hours:>15}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
