"""The scorecard: every statement of the paper (``statements.yaml``) judged by its rule at every tier it lists.

:func:`judge` gives one row per (statement, column): a training statement at each training tier it lists, from
that tier's stored runs (:mod:`repro.quantities`; "not run at this tier" where its run groups have
none), a verdict that changes when runs retrained on another machine (``results/machines/``) replace their
stored twins counted undecided; a label-only statement once, from the label-only studies at the paper's scale.
:func:`card` folds them into one row per statement: the columns label_only, quick, subset and paper and the
overall verdict (a training statement's from the largest tier that judged it or whose seed plan still runs, named;
a label-only statement's own).  :func:`counts` counts each column.  ``python -m repro.scorecard`` prints the card.
"""

from __future__ import annotations

import argparse
import functools
import html
import json
import math
from dataclasses import replace
from pathlib import Path

import pandas as pd

from fedlib._validate import ParameterError
from repro import machine_spread, quantities, rules, seed_plan, statements, tiers
from repro.quantities import book_parameters
from repro.results import RESULTS_DIR, run_key

__all__ = [
    "COLUMNS",
    "TRAINING_TIERS",
    "STATUSES",
    "tier_notes",
    "book_parameters",
    "page_of",
    "judge",
    "plan_record",
    "plan_promise",
    "pilot_and_fresh",
    "walk",
    "card",
    "counts",
    "ours_text",
    "to_text",
    "to_html",
    "table_html",
    "sections",
    "page_card",
    "page_verdicts",
    "page_rules",
    "main",
]

ROOT = Path(__file__).resolve().parents[1]
#: The scorecard's columns: label counts at the paper's scale, then the training tiers, smallest first.
COLUMNS = statements.TIERS
TRAINING_TIERS = COLUMNS[1:]
REPRODUCES, DOES_NOT, UNDECIDED = rules.VERDICTS
#: A miss that the paper's own table shares: the statement is false in the paper's numbers too.
PAPER_TOO = "does not reproduce, nor does the paper's table"
NOT_RUN = "not run at this tier"
#: A run group of the tier's seed plan still has planned runs to train: the plan fixes the seeds before the data,
#: so its statements are judged once, at the planned count, not while the runs come in.
PLAN_RUNNING = "seed plan still running"
#: A confirmatory plan's runs are all in, yet a comparison of the statement has fewer fresh seeds than the plan
#: asked for it (its file missed a cell it reads): judged on those seeds it would not be the test the plan fixed.
PLAN_SHORT = "seed plan short of the seeds it asked"
NEEDS_PAPER = "needs the paper tier"
NOT_YET_RUN = "not run at any tier yet"
NO_GROUP = "no run group yet"
NOT_COMPUTED = "not computed yet"
NOT_LISTED = ""  # the tier does not judge the statement (its data or scale cannot show it)
NOT_CHECKABLE = "not checkable"
#: Every entry of a card column, in the order :func:`counts` lists them.
STATUSES = (
    REPRODUCES,
    DOES_NOT,
    PAPER_TOO,
    UNDECIDED,
    PLAN_RUNNING,
    PLAN_SHORT,
    NOT_RUN,
    NEEDS_PAPER,
    NOT_YET_RUN,
    NO_GROUP,
    NOT_COMPUTED,
    NOT_LISTED,
)
#: What each column's data is, before the tier's own description (``tiers.TIERS[...].description``).
_DATA = {
    "quick": "MNIST digits standing in for CIFAR-10; directions only",
    "subset": "CIFAR-10's images at hand, a tenth of its training set, at the paper's settings",
    "paper": "python -m fedlib paper on a GPU",
}


def tier_notes() -> dict[str, str]:
    """Column -> one line on its data: the label-only column's, then each training tier's description
    (:mod:`repro.tiers`) with the groups it runs on one seed (no interval there)."""
    out = {
        "label_only": "no training: the label counts of the paper's data sets (fedlib.data.profiles) at the paper's "
        "K, M, rounds and seeds; what the paper reports from labels alone (selections, entropies, byte counts)"
    }
    for tier in TRAINING_TIERS:
        one = [g for g in tiers.tier_groups(tier) if _fewest_seeds(tier, g) == 1]
        note = f"{_DATA[tier]}: {tiers.get_tier(tier).description}"
        out[tier] = note + (f"; one seed for {', '.join(one)}" if one else "")
    return out


def _fewest_seeds(tier: str, group: str) -> int:
    per = {}
    for run in tiers.group_configs(tier, group):
        key = tuple(sorted((k, str(v)) for k, v in run.label.items() if k != "seed"))
        per.setdefault(key, set()).add(run.label.get("seed"))
    return min((len(v) for v in per.values()), default=0)


#: Run group -> the book page that shows it.
_GROUP_PAGES = {
    "table1": "table1",
    "table2": "table2",
    "participation": "participation",
    "availability": "availability",
    "buffer": "buffer_accuracy",
    "large_pools": "large_pools",
    "fedentropy": "fedentropy_entropy",
    "weight_decay": "tuning",
    "fedprox_mu": "tuning",
    "buffer_choice": "tuning",
    "medical": "medical",
    "low_participation": "low_participation",
}
#: Label-only source (its function's name) -> the book page that shows it.
_LABEL_PAGES = {
    "fig1_traces": "entropy_trace",
    "table6": "buffer_diversity",
    "coverage_table": "label_coverage",
    "table_v": "communication_cost",
    "paper_count_reconstruction": "communication_cost",
    "label_bytes": "communication_cost",
    "share_table": "lying_clients",
    "round_gaps": "greedy_gap",
    # the statements of the selection study and of the extras (repro.quantities.label_study): one page for them
    **dict.fromkeys(
        (
            "selector_traces",
            "run_selection",
            "get_profile",
            "federation_counts",
            "fedconcat_round_split",
            "cluster_clients",
            "laplace_counts",
            "buffer_study",
            "get_tier",
            "forward_flops",
        ),
        "label_checks",
    ),
}
_STATEMENT_PAGES = {"V-B1/faster": "accuracy_curves"}


@functools.lru_cache(maxsize=1)
def _book_pages() -> dict[str, str]:
    """runs.yaml name -> the tier the book runs that page at."""
    import yaml

    return {r["name"]: r["tier"] for r in yaml.safe_load((ROOT / "runs.yaml").read_text())["runs"]}


def page_of(statement, tier: str = "quick") -> str:
    """The book page that shows ``statement`` at ``tier`` (runs.yaml name; "" for none): ``<page>_<tier>`` where
    the book has it, else the page itself for the quick tier and the label-only column, and for a tier the book
    runs that page at (a page whose runs exist at the paper tier only)."""
    page = _STATEMENT_PAGES.get(statement.id)
    if page is None and statement.groups:
        page = _GROUP_PAGES.get(statement.groups[0])
    if page is None and statement.label_only:
        page = _LABEL_PAGES.get(statement.label_only.rsplit(".", 1)[-1])
    if not page:
        return ""
    names = _book_pages()
    if tier not in ("quick", "label_only"):
        if f"{page}_{tier}" in names:
            return f"{page}_{tier}"
        return page if names.get(page) == tier else ""
    return page if page in names else ""


# ----------------------------------------------------------------------------------------------- judging


def _leaf(v: rules.Verdict) -> rules.Verdict:
    """The comparison whose numbers a combined verdict carries (the binding one), with its setting."""
    while v.parts:
        nxt = next(
            (
                p
                for p in v.parts
                if p.comparison == v.comparison
                and _same(p.estimate, v.estimate)
                and _same(p.low, v.low)
                and _same(p.high, v.high)
            ),
            None,
        )
        if nxt is None:
            break
        v = nxt if nxt.setting else replace(nxt, setting=v.setting)
    return v


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _paper_too(statement, j: rules.Judgement) -> bool:
    """Whether every setting that misses is one where the paper's own numbers miss the statement too (False: a
    miss of ours); without the paper's numbers, whether the statement is marked as contradicting its table."""
    misses = [v for v in j.settings if v.verdict == DOES_NOT] or [j.overall]
    agrees = [m.paper_agrees for m in misses]
    if all(a is False for a in agrees):
        return True
    return all(a is None for a in agrees) and statement.contradicts_paper_table


def _row(statement, column: str, status: str, j=None, flips: str = "", interim: str = "") -> dict:
    row = {"id": statement.id, "column": column, "verdict": status, "judgement": j, "flips": flips, "interim": interim}
    row["plan_note"] = ""  # what the tier's seed plans say of the statement's seeds (_Stages.judge)
    if j is not None and status == DOES_NOT and _paper_too(statement, j):
        row["verdict"] = PAPER_TOO
    return row


def _planned_runs(tier: str) -> dict[str, list[tuple[str, int | None]]]:
    """{run group of ``tier``'s seed plans: (run key, seed) of each run the tier plans in it}."""
    groups = sorted({json.loads(k)["group"] for k in tiers.seed_plan_cells(tier)})
    return {g: [(run_key(r.config), r.label.get("seed")) for r in tiers.group_configs(tier, g)] for g in groups}


def _unfinished_plan(runs: quantities.Runs, planned: dict) -> dict[str, tuple[int, int]]:
    """{run group: (stored, planned)} for each group of ``planned`` (:func:`_planned_runs`) with runs of the seeds
    ``runs`` keeps not stored yet."""
    out = {}
    for group, keyed in planned.items():
        wanted = {key for key, seed in keyed if runs.keep is None or runs.keep(seed)}
        frame = runs.stored(group).frame
        missing = len(wanted - set(frame["key"] if "key" in frame else ()))
        if missing:
            out[group] = (len(wanted) - missing, len(wanted))
    return out


class _Stages:
    """The stored runs each statement of a tier is judged on: a statement a confirmatory plan judges on that plan's
    fresh seeds alone (:func:`repro.tiers.confirmatory`), every other one on the rest; with each view's machines
    and unfinished plan groups, built once per view."""

    def __init__(self, tier: str, results_dir=None, machines_dir=None):
        self.tier, self.results_dir, self.machines_dir = tier, results_dir, machines_dir
        self.plan, self._views = tiers.confirmatory(tier), {}
        self.notes = seed_plan.plan_notes(tier)
        self._planned = None  # _planned_runs, read on the first view

    def _view(self, plan: int | None):
        if plan not in self._views:
            keep = self.plan.keeps(plan) if self.plan.plans else None
            runs = quantities.Runs(self.tier, self.results_dir, keep=keep)
            machines = _machines(self.tier, self.results_dir, self.machines_dir, keep)
            if self._planned is None:
                self._planned = _planned_runs(self.tier)
            self._views[plan] = (runs, machines, _unfinished_plan(runs, self._planned))
        return self._views[plan]

    def of(self, statement_id: str):
        """(runs, machines, unfinished) for the statement."""
        return self._view(self.plan.plan_of(statement_id))

    def judge(self, statement, table) -> dict:
        runs, machines, unfinished = self.of(statement.id)
        running = [
            f"{g} {n}/{of} runs" for g, (n, of) in unfinished.items() if g in quantities.read_groups(statement.groups)
        ]
        if self.plan.judges(statement.id) and running:  # no verdict before its fresh seeds are in: the pilot's value
            pilot = _judge_training(statement, self.tier, self._view(None)[0], [], table)
            where = f"confirmatory plan at {', '.join(running)}; the value is its pilot's"
            return _row(statement, self.tier, PLAN_RUNNING, pilot["judgement"], interim=where)
        row = _judge_training(statement, self.tier, runs, machines, table, unfinished)
        short = self.short_of_plan(statement, table, row["judgement"]) if row["verdict"] != PLAN_RUNNING else []
        if short:
            number, more = self.plan.plan_of(statement.id) + 1, f" and {len(short) - 1} more" if len(short) > 1 else ""
            where = f"fewer fresh seeds than plan {number} asked: {short[0]}{more}"
            return _row(statement, self.tier, PLAN_SHORT, row["judgement"], interim=where)
        judged_by_plan = self.plan.judges(statement.id) and row["verdict"] != PLAN_RUNNING
        if judged_by_plan or (row["verdict"] == UNDECIDED and not row["flips"]):
            row["plan_note"] = self.notes.get(statement.id, "")
        return row

    def short_of_plan(self, statement, table, fresh) -> list[str]:
        """The comparisons of a statement a confirmatory plan judges that have fewer fresh seeds in ``fresh`` (its
        judgement on them) than the plan asked (:func:`repro.seed_plan.asked`), each "setting: comparison n/asked";
        the pilot's comparisons too, should the fresh seeds hold none of one.  Empty for any other statement."""
        index = self.plan.plan_of(statement.id)
        if index is None or not isinstance(fresh, rules.Judgement):
            return []
        listed = seed_plan.read_plan(self.tier, index + 1)["statements"]
        row = next((r for r in listed if r["statement"] == statement.id and r.get("seeds")), None)
        if row is None:  # the plan's file does not plan it (a plan made up by a test)
            return []
        pilot = quantities.TRAINING[statement.id](self._view(None)[0], statement, table)
        have = {seed_plan.comparison_key(v): int(v.n) for v in fresh.comparisons()}
        keys = dict.fromkeys([*have, *(seed_plan.comparison_key(v) for v in pilot.comparisons())])
        return [
            f"{k[0]}: {k[1]} {have.get(k, 0)}/{seed_plan.asked(row, k)}"
            for k in keys
            if have.get(k, 0) < seed_plan.asked(row, k)
        ]


def _judge_training(statement, tier: str, runs: quantities.Runs, machines: list, table, unfinished=None) -> dict:
    fn = quantities.TRAINING.get(statement.id)
    if fn is None:
        return _row(statement, tier, NO_GROUP if statement.group_missing else NOT_COMPUTED)
    if not all(runs.has(g) for g in statement.groups):
        planned = [
            f"{g} {n}/{of} runs"
            for g, (n, of) in (unfinished or {}).items()
            if g in quantities.read_groups(statement.groups)
        ]
        if planned:  # the tier's plan runs the group; none of its runs is in yet
            return _row(statement, tier, PLAN_RUNNING, interim="seed plan at " + ", ".join(planned))
        return _row(statement, tier, NO_GROUP if statement.group_missing else NOT_RUN)
    j = fn(runs, statement, table)
    running = [
        f"{g} {n}/{of} runs"
        for g, (n, of) in (unfinished or {}).items()
        if g in quantities.read_groups(statement.groups)
    ]
    if not j.settings and not running:  # the groups ran, but none of what the statement compares
        return _row(statement, tier, NO_GROUP if statement.group_missing else NOT_RUN, j)
    if running:  # the interim value is shown, marked so; no verdict before the planned seeds are in
        return _row(statement, tier, PLAN_RUNNING, j, interim="seed plan at " + ", ".join(running))
    flips = []
    for name, other in machines:
        if other.retrained(statement.groups):
            again = fn(other, statement, table)
            if again.verdict != j.verdict:
                flips.append(f"{name}: {again.verdict}")
    if flips:
        return _row(statement, tier, UNDECIDED, j, "; ".join(flips))
    return _row(statement, tier, j.verdict, j)


def undecided(tier: str, table=None) -> list:
    """(statement, judgement) of each training statement of ``tier`` whose rule, on the runs the tier's plans have
    stored in full, leaves it undecided (no machine flip): what a confirmatory seed plan starts from
    (:func:`repro.seed_plan.confirmatory_plan`)."""
    table = table or statements.load_table()
    stages, out = _Stages(tier), []
    for s in table.statements:
        if not (s.checkable and tier in s.tiers and s.id in quantities.TRAINING):
            continue
        row = stages.judge(s, table)
        if row["verdict"] == UNDECIDED and row["judgement"] is not None and not row["flips"]:
            out.append((s, row["judgement"]))
    return out


def plan_record(tier: str, results_dir=None, table=None) -> pd.DataFrame:
    """Did the confirmatory plans keep their promise?  One row per statement a live (not withdrawn) plan of ``tier``
    judges: the ``plan``, how its ``chances`` were computed, the chance it ``promised`` that the statement decides
    either way on its fresh seeds, and the ``verdict`` those seeds give now (``seed plan still running`` until its
    runs are in)."""
    table = table or statements.load_table()
    stages, gone = _Stages(tier, results_dir), tiers.withdrawn(tier)
    by_id, rows = {s.id: s for s in table.statements}, []
    for number in range(1, len(tiers.written_confirmatory_plans(tier)) + 1):
        if number in gone:
            continue
        plan = seed_plan.read_plan(tier, number)
        listed = {s["statement"]: s for s in plan["statements"]}
        how = f"averaged over {plan['draws']} draws" if "draws" in plan else "at the pilot's estimates"
        for sid in plan["judges"]:
            promised = round(float(sum(listed[sid]["chances"])), 3)
            verdict = stages.judge(by_id[sid], table)["verdict"]
            rows.append({"plan": number, "chances": how, "statement": sid, "promised": promised, "verdict": verdict})
    return pd.DataFrame(rows, columns=["plan", "chances", "statement", "promised", "verdict"])


def pilot_and_fresh(tier: str, results_dir=None, table=None, record=None) -> pd.DataFrame:
    """Each comparison of each statement a live plan of ``tier`` has judged (its planned runs all in): its estimate
    on the pilot (the runs before the plan) beside its estimate on the plan's fresh seeds, with the seeds of each and
    the fresh seeds the plan ``asked`` for it (a comparison with fewer was never given what its plan promised).
    Where a pilot that left its statement undecided meets a true gap nearer the boundary, the fresh estimate lies
    nearer zero than the pilot's.  ``record``: :func:`plan_record`'s, where already at hand."""
    table = table or statements.load_table()
    stages, by_id, rows = _Stages(tier, results_dir), {s.id: s for s in table.statements}, []
    record = plan_record(tier, results_dir, table) if record is None else record
    for _, r in record[record["verdict"].isin(rules.VERDICTS)].iterrows():
        s, fn = by_id[r["statement"]], quantities.TRAINING[r["statement"]]
        listed = next(x for x in seed_plan.read_plan(tier, r["plan"])["statements"] if x["statement"] == s.id)
        pilot = {seed_plan.comparison_key(v): v for v in fn(stages._view(None)[0], s, table).comparisons()}
        fresh = {seed_plan.comparison_key(v): v for v in fn(stages.of(s.id)[0], s, table).comparisons()}
        for key in [*fresh, *(k for k in pilot if k not in fresh)]:  # a pilot comparison without fresh runs too
            p, v = pilot.get(key), fresh.get(key)
            rows.append(
                {
                    "plan": r["plan"],
                    "statement": s.id,
                    "setting": key[0],
                    "comparison": key[1],
                    "pilot": float(p.estimate) if p is not None else math.nan,
                    "pilot_n": int(p.n) if p is not None else 0,
                    "fresh": float(v.estimate) if v is not None else math.nan,
                    "fresh_n": int(v.n) if v is not None else 0,
                    "asked": seed_plan.asked(listed, key),
                }
            )
    return pd.DataFrame(rows)


def plan_promise(record: pd.DataFrame) -> dict:
    """The record of :func:`plan_record` in sum, over the statements whose plan runs are all in (a verdict of the
    rules, undecided included): how many there are (``finished``), how many decided, how many the plans' promises
    lead one to expect, and the chance of deciding no more than that many were every promise kept (``p_at_most``,
    the Poisson-binomial tail, :func:`repro.seed_plan.at_most`)."""
    done = record[record["verdict"].isin(rules.VERDICTS)]
    decided = int(done["verdict"].isin([REPRODUCES, DOES_NOT]).sum())
    promised = [float(p) for p in done["promised"]]
    return {
        "finished": len(done),
        "decided": decided,
        "expected": round(sum(promised), 2),
        "p_at_most": float(seed_plan.at_most(promised, decided)),
    }


def _judge_label(statement, studies: dict, table) -> dict:
    fn = quantities.LABEL_ONLY.get(statement.id)
    if fn is None:
        return _row(statement, "label_only", NO_GROUP if statement.group_missing else NOT_COMPUTED)
    j = fn(studies, statement, table)
    return _row(statement, "label_only", j.verdict, j)


def _machines(tier: str, results_dir=None, machines_dir=None, keep=None) -> list[tuple[str, quantities.Runs]]:
    """(machine, its view of the tier's runs of the seeds ``keep`` keeps) for every machine with retrained runs of
    ``tier``."""
    root = Path(machines_dir if machines_dir is not None else RESULTS_DIR / "machines")
    return [
        (m.name, quantities.Runs(tier, results_dir, m, keep=keep))
        for m in sorted(root.glob("*"))
        if (m / tier).is_dir()
    ]


def judge(
    tiers=TRAINING_TIERS,
    *,
    smoke: bool = False,
    studies: dict | None = None,
    results_dir=None,
    machines_dir=None,
    table=None,
    label_only: bool = True,
) -> pd.DataFrame:
    """One row per (statement, column it lists): ``id``, ``column`` (label_only or a training tier of ``tiers``),
    ``verdict`` (a rule's verdict, :data:`PAPER_TOO`, or why there is none: :data:`PLAN_RUNNING`, :data:`PLAN_SHORT`,
    :data:`NOT_RUN`,
    :data:`NO_GROUP`, :data:`NOT_COMPUTED`), ``judgement`` (the rule's :class:`repro.rules.Judgement`) and ``flips``
    (the machines whose retrains change the verdict, which is then undecided), ``interim`` (for
    :data:`PLAN_RUNNING`: the plan's groups still running, with runs stored of planned; for :data:`PLAN_SHORT`: the
    comparisons short of their seeds).  ``studies``: the label-only
    studies (default :func:`repro.quantities.label_studies` at the book's parameters, ``smoke``: the
    pages' smoke ones); ``table``: the statements (default ``statements.yaml``); ``label_only=False`` leaves the
    label_only column out (its studies take minutes at full scale)."""
    table = table or statements.load_table()
    rows = []
    label = [s for s in table.statements if s.checkable and "label_only" in s.tiers and label_only]
    if label:
        studies = quantities.label_studies(smoke) if studies is None else studies
        rows += [_judge_label(s, studies, table) for s in label]
    for tier in tiers:
        stages = _Stages(tier, results_dir, machines_dir)
        rows += [stages.judge(s, table) for s in table.statements if s.checkable and tier in s.tiers]
    return pd.DataFrame(rows, columns=["id", "column", "verdict", "judgement", "flips", "interim", "plan_note"])


def walk(tier: str = "paper", seed: int = 0, table=None) -> tuple[int, list[tuple[str, str]]]:
    """Judge every statement that lists ``tier`` (and has a run group) on stand-in runs of everything the tier
    plans (:meth:`repro.quantities.Runs.stand_in`): (how many were judged, (id, why) of each that
    was not: no computation, a comparison the planned runs lack, an error).  Run by the paper tier's dry run, so
    that its stored runs fill the card with no further code."""
    table = table or statements.load_table()
    runs, judged, problems = quantities.Runs.stand_in(tier, seed), 0, []
    for s in table.statements:
        if not s.checkable or tier not in s.tiers or s.group_missing or not s.groups:
            continue
        try:
            row = _judge_training(s, tier, runs, [], table)
        except Exception as exc:  # noqa: BLE001 -- reported with the statement's id
            problems.append((s.id, f"{type(exc).__name__}: {exc}"))
            continue
        if row["verdict"] in rules.VERDICTS or row["verdict"] == PAPER_TOO:
            judged += 1
        else:
            problems.append((s.id, row["verdict"]))
    return judged, problems


# ------------------------------------------------------------------------------------------------- the card


def _num(x: float, unit: str = "") -> str:
    if not math.isfinite(x):
        return "-inf" if x < 0 else "+inf" if x > 0 else "–"
    return f"{x:+.3g}{unit}" if unit != "=" else f"{x:.4g}"


def ours_text(j: rules.Judgement | None, flips: str = "", interim: str = "", plan_note: str = "") -> str:
    """Our value as the card shows it: the binding comparison (its setting where several), its estimate and
    interval over n seeds; for an undecided verdict where it leans and whether it excludes the paper's value; for
    ``exact`` the value (or its range over rows); ``plan_note``: what the tier's seed plans say of its seeds
    (:func:`repro.seed_plan.plan_notes`)."""
    if not isinstance(j, rules.Judgement):  # None (NaN in a frame): no run to judge
        return f"not a verdict yet ({interim}): no run stored" if interim else ""
    v = _leaf(j.overall)
    varying = {k for k, _ in v.setting if len({dict(s.setting).get(k) for s in j.settings}) > 1}
    where = ", ".join(str(x) for k, x in v.setting if k in varying)  # what tells the binding setting apart
    if not math.isfinite(v.estimate):
        text = f"{where + ': ' if where else ''}{v.reason.rsplit(': ', 1)[0] if v.reason else 'no value'}"
        passed = sum(s.verdict == REPRODUCES for s in j.settings)
        if where and passed:
            text += f"; the other {passed} of {len(j.settings)} settings reproduce"
    elif v.comparison == "ours - paper":  # exact: a count or identity, no interval
        text = _num(v.estimate, "=") if v.low == v.high else f"{_num(v.low, '=')} to {_num(v.high, '=')}"
    else:
        text = f"{where + ': ' if where else ''}{v.comparison} {_num(v.estimate)}"
        text += f" [{_num(v.low)}, {_num(v.high)}], n = {v.n}" if math.isfinite(v.low) else f" (n = {v.n}, no interval)"
    o = j.overall
    if o.verdict == UNDECIDED and o.leans != rules.NEITHER:
        text += f"; leans {'towards a miss' if o.leans == DOES_NOT else 'towards a pass'}"
    if v.paper is not None and v.excludes_paper_value:
        text += f"; excludes the paper's {_num(v.paper)}"
    if interim:
        text = f"interim, not a verdict ({interim}): {text}"
    if flips:
        text += f"; flips with the machine ({flips})"
    if plan_note:
        text += f"; {plan_note}"
    return text


def _paper_value(statement) -> str:
    """The paper's value as shown: one number, one per cell where ``where`` names as many cells (";"-separated,
    after its last ":") as there are values, a range for two rising values (the paper's "1-3 %"), else the list."""
    pv = statement.paper_value
    if not pv:
        return "–"
    v, unit = pv["value"], pv["unit"]
    if not isinstance(v, list | tuple):
        return f"{v:g} {unit}"
    cells = [c.strip() for c in str(pv.get("where") or "").rsplit(":", 1)[-1].split(";")]
    if len(cells) == len(v) > 1:
        return "; ".join(f"{x:g} {unit} ({c})" for x, c in zip(v, cells))
    if len(v) == 2 and v[0] < v[1]:
        return f"{v[0]:g} to {v[1]:g} {unit}"
    return f"{', '.join(f'{x:g}' for x in v)} {unit}"


def _short(words: str, n: int = 160) -> str:
    """The paper's words as shown: TeX read as text (``statements.normalise``), cut at a word after ``n``."""
    words = statements.normalise(words).replace("\\", "")
    return words if len(words) <= n else words[: n - 1].rsplit(" ", 1)[0] + " …"


def card(judged: pd.DataFrame, table=None) -> pd.DataFrame:
    """One row per statement of the table, in its order: ``id``, ``section``, ``words``, ``paper_value``, per
    column of :data:`COLUMNS` its verdict (:data:`NOT_LISTED` where the statement does not list that column),
    ``overall`` and ``overall_from`` (the column it comes from), ``ours`` (our value there with its interval),
    ``contradicts`` (the paper's own table says otherwise than the sentence), ``page`` (the book page that shows
    it there), ``rule`` and ``note`` (the expected difference, or what would judge it).  A statement that is not
    checkable has ``overall`` "not checkable" and the reason as its note."""
    table = table or statements.load_table()
    by = {(r.id, r.column): r for r in judged.itertuples()}
    rows = []
    for s in table.statements:
        row = {
            "id": s.id,
            "section": s.section,
            "words": s.words,
            "paper_value": _paper_value(s),
            **dict.fromkeys(COLUMNS, NOT_LISTED),
            "rule": s.rule,
            "contradicts": s.contradicts_paper_table,
            "note": s.expected_difference or s.needed or "",
        }
        if not s.checkable:
            rows.append(
                {
                    **row,
                    "overall": NOT_CHECKABLE,
                    "overall_from": "",
                    "ours": "",
                    "page": "",
                    "note": s.params["reason"],
                }
            )
            continue
        for col in COLUMNS:
            if (s.id, col) in by:
                row[col] = by[(s.id, col)].verdict
        overall, source = _overall(s, row)
        hit = by.get((s.id, source))
        rows.append(
            {
                **row,
                "overall": overall,
                "overall_from": source,
                "ours": ours_text(hit.judgement, hit.flips, hit.interim, hit.plan_note) if hit is not None else "",
                "page": page_of(s, source) if source else page_of(s),
            }
        )
    return pd.DataFrame(rows)


def _overall(statement, row: dict) -> tuple[str, str]:
    """(verdict, column it comes from) of a statement: label-only its own; training the largest tier that judged
    it or whose seed plan is still running (its interim value: a plan at a larger tier supersedes a smaller tier's
    verdict); else why none did."""
    judged = (REPRODUCES, DOES_NOT, PAPER_TOO, UNDECIDED)
    if "label_only" in statement.tiers:
        return row["label_only"], "label_only" if row["label_only"] in judged else ""
    for tier in reversed(TRAINING_TIERS):
        if row[tier] in (*judged, PLAN_RUNNING, PLAN_SHORT):
            return row[tier], tier
    if statement.group_missing:
        return NO_GROUP, ""
    if any(row[t] == NOT_COMPUTED for t in statement.tiers):
        return NOT_COMPUTED, ""
    return (NEEDS_PAPER if statement.tiers == ("paper",) else NOT_YET_RUN), ""


def counts(c: pd.DataFrame) -> pd.DataFrame:
    """Checkable statements per entry (rows, :data:`STATUSES`; "–" for a column a statement does not list) and
    column (:data:`COLUMNS` and ``overall``)."""
    c = c[c["overall"] != NOT_CHECKABLE]
    out = pd.DataFrame({col: c[col].value_counts() for col in (*COLUMNS, "overall")})
    out = out.reindex(list(STATUSES)).fillna(0).astype(int)
    out = out[out.sum(axis=1) > 0]
    return out.rename(index={NOT_LISTED: "– (not listed for this column)"}).rename_axis("verdict")


_ABBREV = {
    REPRODUCES: "yes",
    DOES_NOT: "NO",
    PAPER_TOO: "no*",
    UNDECIDED: "?",
    PLAN_RUNNING: "plan runs",
    PLAN_SHORT: "plan short",
    NOT_RUN: "not run",
    NEEDS_PAPER: "paper",
    NOT_YET_RUN: "not run",
    NO_GROUP: "no group",
    NOT_COMPUTED: "not comp.",
    NOT_LISTED: "–",
}


def to_text(c: pd.DataFrame, width: int = 60) -> str:
    """The card as plain text: the counts, a line per column on its data, then a row per statement (id, the
    paper's words cut to ``width``, each column's verdict, the overall one and its column, our value with its
    interval, "C" where the paper's own table contradicts the sentence, the page) and the statements that are not
    checkable apart."""
    lines = ["Counts per column (checkable statements)", counts(c).to_string(), ""]
    lines += ["What each column's data is"] + [f"  {k:<10} {v}" for k, v in tier_notes().items()] + [""]
    lines.append(
        "Verdicts: yes reproduces, NO does not, no* does not but neither does the paper's own table, ? undecided, "
        "– the column does not judge it; C: the paper's own table contradicts the sentence."
    )
    rows = c[c["overall"] != NOT_CHECKABLE]
    head = f"{'statement':<38} {'the paper says':<{width}} {'label':<9} {'quick':<9} {'subset':<9} {'paper':<9} "
    lines += ["", head + "overall (from)                       C  ours                           page"]
    for r in rows.itertuples():
        cols = " ".join(f"{_ABBREV.get(getattr(r, col), getattr(r, col)):<9}" for col in COLUMNS)
        overall = f"{r.overall} ({r.overall_from})" if r.overall_from else r.overall
        lines.append(
            f"{r.id:<38} {_short(r.words, width):<{width}} {cols} {overall:<36} {'C' if r.contradicts else ' '}  "
            f"{r.ours}  {r.page}"
        )
    apart = c[c["overall"] == NOT_CHECKABLE]
    if len(apart):
        lines += ["", f"Not checkable ({len(apart)})"] + [f"  {r.id}: {r.note}" for r in apart.itertuples()]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------- HTML

_LEFT = "text-align:left;vertical-align:top"
_COLOURS = {
    REPRODUCES: "#d9f2d9",
    DOES_NOT: "#f8d7d7",
    PAPER_TOO: "#ece4f5",
    UNDECIDED: "#fff3c4",
}


#: What a tier's cell of the HTML card shows (its columns are narrow; the overall column spells the verdict out).
_SHORT = {
    REPRODUCES: "yes",
    DOES_NOT: "no",
    PAPER_TOO: "no*",
    UNDECIDED: "?",
    PLAN_RUNNING: "plan running",
    PLAN_SHORT: "plan short",
}


def _cell(verdict: str, small: str = "", page: str = "", short: bool = False) -> str:
    shown = _SHORT.get(verdict, verdict) if short else verdict
    text = f'<abbr title="{html.escape(verdict)}">{html.escape(shown)}</abbr>' if shown != verdict else None
    text = (text or html.escape(verdict or "–")) + (f"<br><small>{html.escape(small)}</small>" if small else "")
    if page:  # the page that shows the statement, also while it waits for a tier (its plan, its rules)
        text = f'<a href="{page}.html">{text}</a>'
    return f'<td style="background:{_COLOURS.get(verdict, "#ffffff")};{_LEFT}">{text}</td>'


def to_html(c: pd.DataFrame) -> str:
    """The card as an HTML table that fits a text column: the statement (id, section, the paper's words) with the
    paper's value, a cell per column (its verdict in short, :data:`_SHORT`, the full words on hover), and the
    overall verdict with its column, our value and its interval (linked to the page that shows it)."""
    head = "".join(f'<th style="{_LEFT}">{col.replace("_", "-")}</th>' for col in COLUMNS)
    body = []
    for r in c.itertuples():
        mark = " · <b>the paper's own table contradicts it</b>" if r.contradicts else ""
        words = (
            f"<small><code>{html.escape(r.id)}</code> · {html.escape(r.section)}{mark}</small><br>"
            f"“{html.escape(_short(r.words, 240))}”"
            + (f"<br><small>the paper's value: {html.escape(r.paper_value)}</small>" if r.paper_value != "–" else "")
        )
        cells = "".join(_cell(getattr(r, col), short=True) for col in COLUMNS)
        src = f" ({r.overall_from.replace('_', '-')})" if r.overall_from else ""
        body.append(f'<tr><td style="{_LEFT}">{words}</td>{cells}{_cell(r.overall + src, r.ours, r.page)}</tr>')
    return (
        '<table class="scorecard" style="font-size:80%;table-layout:fixed;width:100%;word-wrap:break-word">'
        '<colgroup><col style="width:40%">'
        + "".join('<col style="width:9%">' for _ in COLUMNS)
        + '<col style="width:24%"></colgroup>'
        f'<thead><tr><th style="{_LEFT}">the paper says</th>{head}<th style="{_LEFT}">overall: ours</th>'
        "</tr></thead><tbody>" + "".join(body) + "</tbody></table>"
    )


def table_html(frame: pd.DataFrame, widths: dict | None = None) -> str:
    """A DataFrame as an HTML table without its index, in the text column's width (``widths``: column -> CSS
    width; text wraps inside the cells)."""
    widths = widths or {}
    cols = "".join(f'<col style="width:{widths.get(c, "auto")}">' for c in frame.columns)
    head = "".join(f'<th style="{_LEFT}">{html.escape(str(c))}</th>' for c in frame.columns)
    rows = "".join(
        "<tr>" + "".join(f'<td style="{_LEFT}">{html.escape(_text(v))}</td>' for v in r) + "</tr>"
        for r in frame.itertuples(index=False)
    )
    return (
        f'<table style="font-size:80%;table-layout:fixed;width:100%;word-wrap:break-word"><colgroup>{cols}'
        f"</colgroup><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
    )


def _text(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def sections(c: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The card split into parts of the paper, in the table's order, so that each table stays short."""
    part = c["id"].str.split("/").str[0].map(lambda k: _PART.get(k, _PART.get(k.split("-")[0], "Other")))
    return [(name, c[part == name]) for name in dict.fromkeys(part)]


_PART = {
    "abstract": "Abstract",
    "II": "§II to §IV: related work, problem, method, Fig. 1",
    "III": "§II to §IV: related work, problem, method, Fig. 1",
    "IV": "§II to §IV: related work, problem, method, Fig. 1",
    "V": "§V-A and §V-B1: set-up and Table I",
    "V-A1": "§V-A and §V-B1: set-up and Table I",
    "V-A3": "§V-A and §V-B1: set-up and Table I",
    "V-A5": "§V-A and §V-B1: set-up and Table I",
    "V-B1": "§V-A and §V-B1: set-up and Table I",
    "V-B2": "§V-B2 and §V-B3: privacy, participation",
    "V-B3": "§V-B2 and §V-B3: privacy, participation",
    "V-B4": "§V-B4 and §V-B5: Tables II and III",
    "V-B5": "§V-B4 and §V-B5: Tables II and III",
    "V-C": "§V-C to §V-E: Tables IV, V and VI",
    "V-D": "§V-C to §V-E: Tables IV, V and VI",
    "V-E": "§V-C to §V-E: Tables IV, V and VI",
    "VI": "§VI and v1's large pools and Figs. 5, 6",
    "v1": "§VI and v1's large pools and Figs. 5, 6",
}


# --------------------------------------------------------------------------------------------------- one page


def page_card(page: str, tier: str, studies: dict | None = None, results_dir=None, machines_dir=None):
    """The statements book page ``page`` shows (its runs.yaml name without a ``_<tier>`` suffix), judged as the
    scorecard judges them at ``tier`` ("label_only" for a label-only page, which passes the studies it computed,
    ``studies``: a page of ``repro.quantities.LABEL_PAGES`` its own, the ``label_checks`` page those of
    ``repro.quantities.label_study`` by name): ``id``, ``section``, ``words``, ``paper``, ``ours`` and ``verdict``."""
    table = statements.load_table()
    mine = [s for s in table.statements if s.checkable and page_of(s) == page]
    if tier == "label_only":
        if studies is None:
            allowed = "the studies the page computed (for the label-only column)"
            raise ParameterError(f"page {page!r}", "studies", studies, allowed)
        mine = [s for s in mine if "label_only" in s.tiers]
        keyed = {page: studies} if page in quantities.LABEL_PAGES else studies
        rows = [_judge_label(s, keyed, table) for s in mine]
    else:
        mine = [s for s in mine if s.groups]
        stages = _Stages(tier, results_dir, machines_dir)
        rows = [stages.judge(s, table) if tier in s.tiers else _row(s, tier, NOT_LISTED) for s in mine]
    out = [
        {
            "id": s.id,
            "section": s.section,
            "words": s.words,
            "paper": _paper_value(s),
            "ours": ours_text(r["judgement"], r["flips"], r["interim"], r["plan_note"]),
            "verdict": r["verdict"] or "not judged at this tier",
            "contradicts": s.contradicts_paper_table,
        }
        for s, r in zip(mine, rows)
    ]
    return pd.DataFrame(out, columns=["id", "section", "words", "paper", "ours", "verdict", "contradicts"])


def page_verdicts(page: str, tier: str, studies: dict | None = None, results_dir=None, machines_dir=None) -> str:
    """The verdicts that open a book page (HTML): a sentence with the counts, then one row per statement of
    :func:`page_card` with the paper's words and value and our verdict with our value; the scorecard links
    every statement of the book."""
    c = page_card(page, tier, studies, results_dir, machines_dir)
    at = "at the paper's scale (label counts only)" if tier == "label_only" else f"at the {tier} tier"
    tally = c["verdict"].value_counts()
    parts = ", ".join(f"{n} {v}" for v, n in tally.items())
    head = (
        f"<p><strong>Verdicts on this page</strong> {html.escape(at)}: {len(c)} statement(s) of the paper, "
        f'{html.escape(parts) or "none"}. <a href="scorecard.html">The scorecard</a> lists every statement of '
        "the paper with its rule; the sections below show the numbers behind them.</p>"
    )
    body = "".join(
        f'<tr><td style="{_LEFT}"><small><code>{html.escape(r.id)}</code> · {html.escape(r.section)}'
        + (" · the paper's own table contradicts it" if r.contradicts else "")
        + f'</small><br>“{html.escape(_short(r.words, 240))}”</td><td style="{_LEFT}">{html.escape(r.paper)}</td>'
        + _cell(r.verdict, r.ours)
        + "</tr>"
        for r in c.itertuples()
    )
    return (
        head + '<table class="page-verdicts" style="font-size:80%;table-layout:fixed;width:100%;'
        'word-wrap:break-word"><colgroup><col style="width:52%"><col style="width:16%"><col style="width:32%">'
        f'</colgroup><thead><tr><th style="{_LEFT}">the paper says</th><th style="{_LEFT}">paper\'s value</th>'
        f'<th style="{_LEFT}">our verdict</th></tr></thead><tbody>{body}</tbody></table>'
        + ("" if tier == "label_only" else _seeds_note(page, tier, results_dir))
    )


def _seeds_note(page: str, tier: str, results_dir=None) -> str:
    """The runs behind a training page's verdicts: stored of planned, the seeds a cell runs, and the confirmatory
    plan's fresh ones, with the table per cell folded away."""
    from repro import seed_plan
    from repro.notebook import frame_html

    mine = [s for s in statements.load_table().statements if page_of(s) == page]
    groups = sorted({g for s in mine for g in s.groups})
    t = seed_plan.seeds_table(tier, groups, results_dir) if groups else None
    if t is None or t.empty:
        return ""
    text = (
        f"{t['stored'].sum()} of {t['planned'].sum()} planned runs stored ({', '.join(groups)}), "
        f"{t['planned'].min()} to {t['planned'].max()} seeds a cell"
    )
    confirm = tiers.confirmatory(tier)
    judged = [s.id for s in mine if confirm.judges(s.id)]
    if judged and t["fresh planned"].sum():
        text += (
            f"; the confirmatory plan's fresh seeds: {t['fresh stored'].sum()} of {t['fresh planned'].sum()} runs "
            f"stored ({', '.join(judged)} judged on them alone)"
        )
    else:
        t = t.drop(columns=["fresh planned", "fresh stored"])
    summary = f"<summary><small>Runs behind the verdicts: {html.escape(text)}.</small></summary>"
    return f"<details>{summary}{frame_html(t)}</details>"


def _values(relation, value) -> str:
    """A magnitude rule's relation and value as the rule reads them (h: half the unit of the paper's last digit)."""
    if relation == "range":
        return f"within {value[0]:g} - h to {value[1]:g} + h"
    return {
        "over": f"above {value:g}",
        "under": f"below {value:g}",
        "about": f"within {value:g} ± h",
        "up_to": f"within {value:g} - 2h to {value:g} + h",
    }[relation]


def _judged_by(statement, table) -> str:
    """What a statement's rule compares and what passes, in words, from its parameters (``statements.yaml``)."""
    p = statement.params
    if statement.rule == "best":
        text = f"{p['reference']} above each of {', '.join(p['rivals'])}: {p['quantity']}"
    elif statement.rule == "direction":
        text = f"{p['quantity']}: the interval {p['side']}, excluding {p.get('threshold', 0):g}"
    elif statement.rule == "magnitude":
        rel, val = p["relation"], p["value"]
        if isinstance(rel, str):
            shown = _values(rel, val)
        else:
            parts = p.get("parts") or [f"part {i + 1}" for i in range(len(rel))]
            shown = "; ".join(f"{part}: {_values(r, v)}" for part, r, v in zip(parts, rel, val))
        text = f"{p['quantity']}: the interval {shown} (h: half the unit of the paper's last printed digit)"
    elif statement.rule == "equal_within":
        m = p["margin"]
        margin = table.margins[m] if isinstance(m, str) else {"value": m, "unit": ""}
        width = f"{margin['value']:g} {margin['unit']}".strip() if margin["value"] is not None else "a per-cell margin"
        text = f"{p['quantity']}: the interval inside ± {width}" + (f" (margin {m})" if isinstance(m, str) else "")
        if p.get("one_sided"):
            text += f", {p['one_sided']} side only"
    else:
        text = p.get("quantity", "")
    settings = p.get("settings")
    return text + (f"; per {', '.join(settings)}" if settings else "")


def page_rules(page: str, table=None) -> pd.DataFrame:
    """How the statements book page ``page`` shows are judged, known before any run: ``id``, ``paper`` (the
    paper's value as the card shows it), ``rule``, ``judged by`` (what the rule compares and what passes, per
    which settings) and ``tiers`` (those that judge it)."""
    table = table or statements.load_table()
    rows = [
        {
            "id": s.id,
            "paper": _paper_value(s),
            "rule": s.rule,
            "judged by": _judged_by(s, table),
            "tiers": ", ".join(s.tiers),
        }
        for s in table.statements
        if s.checkable and page_of(s) == page
    ]
    return pd.DataFrame(rows, columns=["id", "paper", "rule", "judged by", "tiers"])


# ------------------------------------------------------------------------------------------------------ CLI


def near_boundary(judged: pd.DataFrame, tier: str, k: float = 2.0, results_dir=None, machines_dir=None, table=None):
    """The decided accuracy comparisons of ``tier`` that sit within ``k`` machine shifts of their boundary
    (:func:`repro.machine_spread.near_boundary`, with the tier's largest measured machine spread), each with
    ``retrained_by`` (the machines holding retrains of its statement's groups) and ``flips`` (the machines whose
    retrains change its statement's verdict, :func:`judge`; "none" where none does); and that spread (NaN where
    none is measured)."""
    table = table or statements.load_table()
    std = machine_spread.largest_machine_std(tier, results_dir, machines_dir)
    part = judged[judged["column"] == tier]
    near = machine_spread.near_boundary(part, std, k=k)
    near = near.loc[near["near"].astype(bool)].drop(columns="near").reset_index(drop=True)
    groups = {s.id: s.groups for s in table.statements}
    near["retrained_by"] = [
        ", ".join(sorted({m for g in groups[i] for m in machine_spread.machines(tier, g, machines_dir)}))
        for i in near["id"]
    ]
    flips = near["id"].map(part.set_index("id")["flips"]).fillna("")
    near["flips"] = flips.where(flips != "", "none")
    return near, std


def main(argv=None) -> int:
    """``python -m repro.scorecard [--tiers quick subset paper] [--smoke]``: print the card."""
    ap = argparse.ArgumentParser(prog="python -m repro scorecard", description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiers", nargs="*", default=list(TRAINING_TIERS), help="training tiers to judge")
    ap.add_argument("--smoke", action="store_true", help="label-only studies at the pages' smoke parameters")
    ap.add_argument("--results-dir", default=None, help="stored runs (default: the repository's results/)")
    ap.add_argument("--width", type=int, default=60, help="characters of the paper's words per row")
    ap.add_argument(
        "--near-boundary",
        type=float,
        default=None,
        metavar="K",
        help="instead of the card: each tier's decided accuracy comparisons whose interval lies within K machine "
        "shifts of the rule's boundary (near_boundary): the ones to retrain on another machine",
    )
    args = ap.parse_args(argv)
    judged = judge(
        tuple(args.tiers), smoke=args.smoke, results_dir=args.results_dir, label_only=args.near_boundary is None
    )
    if args.near_boundary is None:
        print(to_text(card(judged), args.width))
        return 0
    for tier in args.tiers:
        near, std = near_boundary(judged, tier, args.near_boundary, args.results_dir)
        print(
            f"{tier}: largest measured machine spread {std:.3f} pp per run; near: room < {args.near_boundary:g} shifts"
        )
        print(near.to_string(index=False, float_format=lambda x: f"{x:.3f}") if len(near) else "  none near")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
