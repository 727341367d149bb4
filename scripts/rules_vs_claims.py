"""Today's verdicts beside the new rules': the Table I "best" statements and the Table II direction
statements (and a few Table I/II statements the rules can judge that have no claim today), from the stored runs.

For each statement: the scorecard's verdict at the tier (its claims, ``fedlib.reproduction.claims``, folded as
``scorecard.scorecard`` folds them, a verdict that flips with the machine counted undecided) and the verdict of
``fedlib.reproduction.rules`` with its binding interval, then the new per-setting verdicts.  Nothing is wired into
the scorecard: this only shows how the audit's cases come out.

Examples::

    python scripts/rules_vs_claims.py                # the subset tier
    python scripts/rules_vs_claims.py --tier quick
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd

from fedlib.reproduction import machine_spread, paper_values, reporting, rules, scorecard
from fedlib.reproduction.results import load_group

_MODEL = {"lenet5": "LeNet-5", "vgg11": "VGG-11"}
BASELINES = ("FedProx", "FedNova", "SCAFFOLD", "FedRS", "FedLC")


def _t1(setting: dict) -> dict:
    ds = reporting.paper_dataset(setting.get("dataset", "cifar10"))
    return paper_values.TABLE_I.get((_MODEL.get(setting.get("model", "lenet5")), ds, setting["partition"]), {})


def table1_gap(setting: dict, a: str, b: str | None):
    """The paper's Table I gap ``a - b`` (pp) in the setting (None where it has no such cell)."""
    p = _t1(setting)
    return p[a][0] - p[b][0] if a in p and b in p else None


def table2_change(setting: dict, a: str, b: str | None):
    """The paper's Table II change of ``a`` = FedEntOpt+``b`` over ``b`` (pp) in the setting."""
    ds = reporting.paper_dataset(setting.get("dataset", "cifar10"))
    v = paper_values.TABLE_II.get((setting["partition"], b, ds))
    return None if v is None else v[0 if setting.get("model", "lenet5") == "lenet5" else 1]


def _only(frame, **where):
    for c, v in where.items():
        frame = frame[frame[c] == v]
    return frame


def judgements(tier: str, results_dir=None) -> list[tuple[tuple[str, ...], rules.Judgement]]:
    """(statement keys, the new rule's judgement) for every statement compared here."""
    t1 = rules.from_group(load_group(tier, "table1", results_dir))
    t2 = rules.from_group(load_group(tier, "table2", results_dir))
    combos = [(f"FedEntOpt+{b}", b) for b in BASELINES]
    out = []
    if len(t1):
        out += [
            (
                ("abstract/outperforms", "V/consistently_outperforms", "V-B1/best_every_setting"),
                rules.best(t1, "FedEntOpt", exclude=("FedEntOpt (DP)",), paper=table1_gap, unit=" pp"),
            ),
            (
                ("V-B1/lenet_cifar10_dir_6pct",),  # "exceeding 6% compared to the second-best" (the paper's: FedAvg)
                rules.magnitude(
                    _only(t1, partition="Dir(0.1)"),
                    ("FedEntOpt", "FedAvg"),
                    value=6.0,
                    kind="over",
                    paper=table1_gap,
                    unit=" pp",
                ),
            ),
            (
                ("abstract/dp_unaffected", "V-B2/dp_matches", "VI/dp_robust"),  # margin: the paper's largest gap
                rules.equal_within(t1, ("FedEntOpt", "FedEntOpt (DP)"), margin=0.95, paper=table1_gap, unit=" pp"),
            ),
            (
                ("V-B2/dp_sometimes_higher",),
                rules.direction(t1, ("FedEntOpt (DP)", "FedEntOpt"), combine="some", paper=table1_gap, unit=" pp"),
            ),
            (
                ("V-B1/fednova_scaffold_dir",),
                rules.direction(
                    _only(t1, partition="Dir(0.1)"),
                    [("FedAvg", "FedNova"), ("FedAvg", "SCAFFOLD")],
                    paper=table1_gap,
                    unit=" pp",
                ),
            ),
        ]
    if len(t2):
        out += [
            (
                ("V-B4/dir_increases",),
                rules.direction(_only(t2, partition="Dir(0.1)"), combos, paper=table2_change, unit=" pp"),
            ),
            (
                ("V-B4/c2_modest",),
                rules.direction(_only(t2, partition="C=2"), combos, paper=table2_change, unit=" pp"),
            ),
            (
                ("abstract/combined_40pct",),  # "more than 40%": some baseline gains over 40 pp (LeNet-5)
                rules.magnitude(
                    _only(t2, partition="Dir(0.1)"),
                    combos,
                    value=40.0,
                    kind="over",
                    combine="some",
                    paper=table2_change,
                    unit=" pp",
                ),
            ),
        ]
    return out


def old_verdicts(tier: str, results_dir=None, machines_dir=None) -> dict[str, tuple[str, str]]:
    """Statement key -> (verdict, ours as text) as the scorecard gives them today at ``tier``."""
    rows = []
    for page in ("table1", "table2"):
        found = machine_spread.claims_at(tier, page, results_dir)
        v = machine_spread.verdicts(tier, page, results_dir, machines_dir)
        flips = dict(zip(v["key"], v["flips"])) if len(v) else {}
        rows += [(tier, page, c, bool(flips.get(c.key, False))) for c in found]
    found = scorecard._claim_rows(rows)
    out = {}
    for s in scorecard.STATEMENTS:
        verdict, ours = scorecard._fold(scorecard.statement_claims(s, found, tier))
        out[s.key] = (verdict or scorecard.NEEDS_PAPER, ours)
    return out


def _interval(v: rules.Verdict) -> str:
    return f"{v.estimate:+.2f} [{v.low:+.2f}, {v.high:+.2f}], n = {v.n}"


def compare(tier: str = "subset", results_dir=None, machines_dir=None, comparisons: bool = False) -> pd.DataFrame:
    """One row per (statement, level): ``statement``, ``level`` (overall / the setting / with ``comparisons`` each
    comparison of a setting that has several), ``old`` (today's verdict
    and what it shows), ``new`` (the rule's verdict), ``binding`` (its comparison and interval), ``leans``,
    ``excludes_paper`` and ``paper_agrees``."""
    old = old_verdicts(tier, results_dir, machines_dir)
    rows = []
    for keys, j in judgements(tier, results_dir):
        for key in keys:
            levels = [("overall", j.overall)]
            for s in j.settings:
                levels.append((s.setting_label, s))
                if comparisons and len(s.parts) > 1:
                    levels += [(f"  {p.comparison}", p) for p in s.parts]
            for level, v in levels:
                rows.append(
                    {
                        "statement": key,
                        "rule": j.rule,
                        "level": level,
                        "old": " ".join(old[key]) if level == "overall" else "",
                        "new": v.verdict,
                        "binding": f"{v.comparison} {_interval(v)}",
                        "leans": v.leans,
                        "excludes_paper": v.excludes_paper_value,
                        "paper": v.paper,
                        "paper_agrees": v.paper_agrees,
                    }
                )
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tier", default="subset")
    ap.add_argument("--results-dir", default=None)
    ap.add_argument("--comparisons", action="store_true", help="each comparison of a setting too")
    args = ap.parse_args(argv)
    table = compare(args.tier, args.results_dir, comparisons=args.comparisons)
    with pd.option_context("display.width", 250, "display.max_colwidth", 90, "display.max_rows", 500):
        for key, sub in table.groupby("statement", sort=False):
            print(f"\n{key} ({sub['rule'].iloc[0]})   old: {sub['old'].iloc[0]}   new: {sub['new'].iloc[0]}")
            for r in sub.itertuples():
                print(
                    f"  {r.level:<58} {r.new:<19} {r.binding:<52} leans {r.leans:<18} "
                    f"paper {r.paper if r.paper is None else f'{r.paper:+.2f}'} (excluded: {r.excludes_paper}, "
                    f"agrees: {r.paper_agrees})"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
