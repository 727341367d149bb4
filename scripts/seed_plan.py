"""Print a tier's committed seed plan and how far its runs have got.

    python scripts/seed_plan.py                   # the subset tier's plans and how far their runs have got
    python scripts/seed_plan.py --tier subset --results-dir DIR
    python scripts/seed_plan.py --write-confirmatory   # the tier's next confirmatory plan (Tier.confirmatory_plans)
    python scripts/seed_plan.py --write-confirmatory --cap 100 --budget-hours 30   # more seeds, within a budget
    python scripts/seed_plan.py --write-confirmatory --per-comparison   # seeds per comparison (close ones more)
    python scripts/seed_plan.py --write-confirmatory --assurance --dry-run   # the pilot's uncertainty weighed; print
    python scripts/seed_plan.py --complete 10 --why "..."   # the cells plan 10 asked seeds for but did not list

A plan is computed once, before the runs it asks for, and never again once they began.  The subset tier's plan was
written by this script at the commit the file records (``git_commit``), from the statement inventory the scorecard
had before ``repro/statements.yaml`` and the rules replaced it: ``git show <git_commit>:scripts/seed_plan.py`` is
the script that wrote it.  A plan from the statement table and :mod:`repro.rules` is a new plan, in a new file:
``--write-confirmatory`` writes the tier's next confirmatory plan (the first of ``Tier.confirmatory_plans`` not yet
written, :func:`repro.seed_plan.confirmatory_plan`) from the runs stored so far, for the undecided statements no
earlier plan lists; it never writes over a plan.
``--complete N`` appends to ``Tier.plan_completions`` the cells that plan N's own seeds per comparison ask for and
its file does not list (:func:`repro.seed_plan.completion`), once per plan: the seeds the plan asked for, no more.
The tier (``repro.tiers``, ``Tier.seed_plan``) reads the plan's ``cells`` and runs their seeds;
``scripts/run_experiments.py --tier <tier> --group all`` trains them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from repro import scorecard, seed_plan, tiers  # noqa: E402


def _print_progress(tier: str, which, results_dir) -> None:
    plan = seed_plan.read_plan(tier, which)
    name = tiers.get_tier(tier).seed_plan if which == "seed" else tiers.written_confirmatory_plans(tier)[which - 1]
    print(
        f"{name}: computed {plan['computed_at']} at commit "
        f"{plan['git_commit']}, level {plan['alpha']}, power {plan['power']}, at most {plan['cap']} seeds a cell"
    )
    rows = seed_plan.progress(tier, results_dir, which)
    print(f"  {'group':<14} {'runs':>5} {'stored':>7} {'to train':>9} {'CPU hours left':>15}")
    for r in rows:
        print(f"  {r['group']:<14} {r['runs']:>5} {r['stored']:>7} {r['to_train']:>9} {r['cpu_hours_left']:>15}")
    total = {k: sum(r[k] for r in rows) for k in ("runs", "stored", "to_train")}
    hours = round(sum(r["cpu_hours_left"] for r in rows), 1)
    print(f"  {'all':<14} {total['runs']:>5} {total['stored']:>7} {total['to_train']:>9} {hours:>15}")


def _write_confirmatory(tier: str, cap: int, budget_hours, per_comparison: bool, assurance: bool, dry: bool) -> int:
    import yaml

    paths, written = tiers.get_tier(tier).confirmatory_plans, tiers.written_confirmatory_plans(tier)
    if len(written) == len(paths):
        have = ", ".join(paths) or "none"
        print(
            f"tier {tier!r}: every confirmatory plan path is written ({have}); add the next to "
            "Tier.confirmatory_plans (repro.tiers)",
            file=sys.stderr,
        )
        return 2
    number = len(written) + 1
    path = paths[number - 1]
    plan = seed_plan.confirmatory_plan(
        tier,
        scorecard.undecided(tier),
        number=number,
        cap=cap,
        budget_hours=budget_hours,
        per_comparison=per_comparison,
        assurance=assurance,
    )
    if dry:
        print(yaml.safe_dump({k: plan[k] for k in ("judges", "totals", "statements")}, sort_keys=False, width=120))
        return 0
    head = (
        f"# Confirmatory seed plan {number} of the {tier} tier, written by scripts/seed_plan.py --write-confirmatory\n"
        "# before the runs it plans. Not edited by hand; not recomputed once its runs began (a new plan gets a new\n"
        "# file).\n"
    )
    (ROOT / path).write_text(head + yaml.safe_dump(plan, sort_keys=False, width=120, allow_unicode=True))
    totals = plan["totals"]
    print(f"wrote {path}: {len(plan['judges'])} statements, {totals['runs']} runs, {totals['cpu_hours']} CPU hours")
    return 0


def _complete(tier: str, number: int, why: str, dry: bool) -> int:
    import yaml

    path = tiers.get_tier(tier).plan_completions
    if not path:
        print(f"tier {tier!r} has no Tier.plan_completions file (repro.tiers)", file=sys.stderr)
        return 2
    if number in tiers.completions(tier):
        print(f"{path} already completes plan {number}: a plan is completed once", file=sys.stderr)
        return 2
    if not why.strip():
        print("--why: say why the plan's file missed the cells (it is kept with them)", file=sys.stderr)
        return 2
    record = seed_plan.completion(tier, number, why)
    text = yaml.safe_dump([record], sort_keys=False, width=120, allow_unicode=True)
    print(f"plan {number}: {len(record['cells'])} cells missing, {record['runs']} runs, {record['cpu_hours']} CPU h")
    if dry or not record["cells"]:
        print(text if dry else "nothing to complete: written nothing")
        return 0
    file = ROOT / path
    head = (
        "# Completions of confirmatory plans, written by scripts/seed_plan.py --complete: the cells a plan's own\n"
        "# seeds per comparison asked for that its file did not list. Appended once per plan; not edited by hand.\n"
    )
    file.write_text((file.read_text() if file.is_file() else head) + text)
    print(f"appended to {path}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tier", default="subset", choices=tuple(tiers.TIERS))
    p.add_argument("--results-dir", default=None, help="stored result tables (default: the repository's results/)")
    p.add_argument("--write-confirmatory", action="store_true", help="write the tier's next confirmatory plan")
    p.add_argument(
        "--cap",
        type=int,
        default=seed_plan.CAP,
        help="with --write-confirmatory: the most fresh seeds a cell gets (default %(default)s)",
    )
    p.add_argument(
        "--budget-hours",
        type=float,
        default=None,
        help="with --write-confirmatory: the plan's CPU hours at most, statements taken cheapest first (default: none)",
    )
    p.add_argument(
        "--per-comparison",
        action="store_true",
        help="with --write-confirmatory: seeds per comparison, not one number per statement",
    )
    p.add_argument(
        "--assurance",
        action="store_true",
        help="with --write-confirmatory: chances averaged over the pilot's uncertainty, not at its estimates",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="with --write-confirmatory or --complete: print, write nothing"
    )
    p.add_argument("--complete", type=int, default=None, help="complete confirmatory plan N (its missing cells)")
    p.add_argument("--why", default="", help="with --complete: why the plan's file missed them")
    args = p.parse_args(argv)
    if args.complete is not None:
        return _complete(args.tier, args.complete, args.why, args.dry_run)
    if args.write_confirmatory:
        return _write_confirmatory(
            args.tier, args.cap, args.budget_hours, args.per_comparison, args.assurance, args.dry_run
        )
    _print_progress(args.tier, "seed", args.results_dir)
    gone = tiers.withdrawn(args.tier)
    for number in range(1, len(tiers.written_confirmatory_plans(args.tier)) + 1):
        if number in gone:
            print(f"confirmatory plan {number}: withdrawn {gone[number]['at']} before its runs (see below)")
            continue
        _print_progress(args.tier, number, args.results_dir)
    for record in {id(w): w for w in gone.values()}.values():
        numbers = ", ".join(map(str, record["plans"]))
        print(
            f"withdrawn {record['at']}: plans {numbers} ({tiers.get_tier(args.tier).withdrawn_plans}): {record['why']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
