"""What each statement's rule is applied to: its quantity, from a tier's stored runs or a label-only study.

:data:`TRAINING` maps the id of a statement judged from run groups to a function ``(runs, statement, table)``
that builds the statement's quantity from :class:`Runs` (one tier's tidy per-seed frames,
:func:`repro.rules.from_group`, optionally with a machine's retrains in place of their stored twins)
and applies the statement's rule with its parameters (``statements.yaml``).  The paper's own number for a
comparison is the same quantity computed on the paper's table (:func:`paper_frame`), so a statement its own
table contradicts is marked by the rule (``paper_agrees``).  :data:`LABEL_ONLY` maps a label-only statement to a
function ``(studies, statement, table)`` of the label-only studies at the paper's scale (:func:`label_studies`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from fedlib.data.profiles import get_profile
from repro import paper_values, reporting, rules, tiers
from repro.results import StoredGroup, load_group, run_key

__all__ = [
    "Runs",
    "read_groups",
    "stand_in_groups",
    "paper_frame",
    "paper_gap",
    "apply_rule",
    "lead_over_best",
    "TRAINING",
    "LABEL_ONLY",
    "LABEL_PAGES",
    "label_study",
    "label_studies",
    "fine_label_explanation",
    "book_parameters",
    "coverage_common",
    "coverage_extras",
    "lying_study",
    "lying_extras",
    "greedy_step_summary",
    "greedy_lowering",
]

REF, DP = "FedEntOpt", "FedEntOpt (DP)"
#: Table I's baselines: every method of the table but FedEntOpt and its DP variant.
BASELINES = tuple(m for m in tiers.TABLE1_METHODS if m not in (REF, DP))
PP = " pp"


# --------------------------------------------------------------------------------------------- the stored runs


def _substitute(stored: StoredGroup, again: StoredGroup) -> StoredGroup:
    """``stored`` with the runs of ``again`` (the same keys, retrained elsewhere) in place of their twins."""
    keys = set(again.meta["key"]) & set(stored.meta["key"]) if not again.empty else set()
    if not keys:
        return stored
    frame = pd.concat(
        [stored.frame[~stored.frame["key"].isin(keys)], again.frame[again.frame["key"].isin(keys)]],
        ignore_index=True,
    )
    return StoredGroup(stored.tier, stored.group, frame, stored.meta)


def read_groups(groups) -> list[str]:
    """The groups a quantity over ``groups`` reads: those, and Table I where they hold the participation group,
    whose 10 % point is Table I's run (:func:`repro.participation.full_rate_runs`)."""
    groups = list(groups)
    return [*groups, "table1"] if "participation" in groups and "table1" not in groups else groups


class Runs:
    """The stored runs of one tier, read once per group: ``stored(group)`` (a
    :class:`repro.results.StoredGroup`) and ``frame(group)`` (the tidy per-seed frame of the final
    accuracy, %).  ``machine_dir`` (``results/machines/<machine>``): its retrained runs replace their stored
    twins, the rest stay as stored; ``retrained(groups)`` says whether it holds any run of those groups.
    ``keep`` (a predicate on the seed): only the runs of the seeds it keeps (the seeds a seed plan judges a
    statement on, :meth:`repro.tiers.Confirmatory.keeps`)."""

    def __init__(self, tier: str, results_dir=None, machine_dir=None, groups: Mapping | None = None, keep=None):
        self.tier, self.results_dir, self.keep = tier, results_dir, keep
        self.machine_dir = None if machine_dir is None else Path(machine_dir)
        self._given = dict(groups or {})  # group -> StoredGroup given in place of the stored one
        self._stored: dict[str, StoredGroup] = {}
        self._frames: dict[str, pd.DataFrame] = {}

    @classmethod
    def stand_in(cls, tier: str, seed: int = 0) -> Runs:
        """The runs ``tier`` plans, each a made-up short curve (:func:`stand_in_groups`): what the tier would
        store, for walking every statement before anything is trained."""
        return cls(tier, groups=stand_in_groups(tier, seed))

    def stored(self, group: str) -> StoredGroup:
        if group not in self._stored:
            if self._given:
                empty = StoredGroup(self.tier, group, pd.DataFrame(columns=["key"]), pd.DataFrame(columns=["key"]))
                base = self._given.get(group, empty)
            else:
                base = load_group(self.tier, group, self.results_dir)
            if self.machine_dir is not None:
                base = _substitute(base, load_group(self.tier, group, self.machine_dir))
            if self.keep is not None and not base.empty:
                keys = set(base.meta.loc[base.meta["seed"].map(self.keep).astype(bool), "key"])
                base = StoredGroup(
                    base.tier, group, base.frame[base.frame["key"].isin(keys)], base.meta[base.meta["key"].isin(keys)]
                )
            if group == "participation":
                base = self._with_full_rate(base)
            self._stored[group] = base
        return self._stored[group]

    def _with_full_rate(self, part: StoredGroup) -> StoredGroup:
        """The participation runs plus the paper's 10 % point: Table I's run of the same configuration
        (:func:`repro.participation.full_rate_runs`), labelled as a participation run.  Rows of those Table I
        runs already in ``part`` (a group given that was read with them) are replaced, not counted twice."""
        from repro.participation import full_rate_runs

        if part.empty:
            return part
        t1 = self.stored("table1")
        labels = pd.DataFrame([{**label, "key": run_key(run.config)} for label, run in full_rate_runs(self.tier)])
        if labels.empty:
            return part
        own, cols = set(labels["key"]), [c for c in labels.columns if c != "key"]

        def relabelled(table: pd.DataFrame) -> pd.DataFrame:
            rows = table[table["key"].isin(own)]
            return rows.drop(columns=[c for c in cols if c in rows.columns]).merge(labels, on="key", how="left")

        frames = [part.frame[~part.frame["key"].isin(own)], relabelled(t1.frame)]
        metas = [part.meta[~part.meta["key"].isin(own)], relabelled(t1.meta)]
        return StoredGroup(part.tier, part.group, pd.concat(frames, ignore_index=True), pd.concat(metas))

    def frame(self, group: str) -> pd.DataFrame:
        if group not in self._frames:
            stored = self.stored(group)
            if group == "buffer" and not stored.empty:  # FedEntOpt alone, compared over Q
                stored = StoredGroup(stored.tier, group, stored.frame, stored.meta.assign(method=REF))
            self._frames[group] = rules.from_group(stored)
        return self._frames[group]

    def has(self, group: str) -> bool:
        return not self.stored(group).empty

    def retrained(self, groups) -> bool:
        if self.machine_dir is None:
            return False
        return any(self._has_retrains(g) for g in read_groups(groups))

    @functools.cache  # noqa: B019 -- one Runs per tier and machine, for the life of a scorecard
    def _has_retrains(self, group: str) -> bool:
        return not load_group(self.tier, group, self.machine_dir).empty


def stand_in_groups(tier: str, seed: int = 0, rounds: int = 12) -> dict[str, StoredGroup]:
    """group -> a StoredGroup of every run ``tier`` plans (:func:`repro.tiers.group_configs`, keyed
    by its run key), each a made-up curve of ``rounds`` rounds (accuracy rising to a level drawn per run, the
    re-selection entropy for FedEntropy's group).  No number of it is a result: it only has the shape of one."""
    rng = np.random.default_rng(seed)
    out = {}
    for group in tiers.tier_groups(tier):
        frames, metas = [], []
        for run in tiers.group_configs(tier, group):
            key = run_key(run.config)
            level = rng.uniform(0.2, 0.8)
            acc = level * (1 - np.exp(-np.arange(rounds + 1) / 3)) + rng.normal(0, 0.005, rounds + 1)
            frames.append(
                pd.DataFrame(
                    {
                        **run.label,
                        "key": key,
                        "round": np.arange(rounds + 1),
                        "test_accuracy": acc,
                        "entropy_bits_trained": rng.uniform(2.5, 3.3, rounds + 1),
                        "covers_all_classes": rng.random(rounds + 1) < 0.9,
                        "kept_covers_all_classes": rng.random(rounds + 1) < 0.8,
                    }
                )
            )
            metas.append({**run.label, "key": key, "dataset": run.config.dataset, "rounds": run.config.rounds})
        if frames:
            out[group] = StoredGroup(tier, group, pd.concat(frames, ignore_index=True), pd.DataFrame(metas))
    return out


# ------------------------------------------------------------------------------------------- the paper's tables


def _paper_value(column: str, value):
    if column == "model":
        return reporting.paper_model(value)
    if column == "dataset":
        return reporting.paper_dataset(value)
    return value


def _t1_rows(methods=None, **extra):
    return [
        {"model": mdl, "dataset": ds, "partition": part, **extra, "method": m, "seed": 0, "value": v[0]}
        for (mdl, ds, part), cells in paper_values.TABLE_I.items()
        for m, v in cells.items()
        if methods is None or m in methods
    ]


@functools.lru_cache(maxsize=None)
def paper_frame(group: str) -> pd.DataFrame | None:
    """The paper's own table of ``group`` as a tidy frame (one "seed", the paper's names of models and data
    sets): Table I, Table II (each baseline and FedEntOpt + it), Table III, Table VI's accuracy, Table IV, and
    Table I's 10 % point for the participation group; None for a group whose numbers the paper does not print."""
    if group == "table1":
        rows = _t1_rows()
    elif group == "table2":
        rows = []
        for (part, base, ds), changes in paper_values.TABLE_II.items():
            for mdl, change in zip(("LeNet-5", "VGG-11"), changes):
                v = paper_values.TABLE_I[(mdl, ds, part)][base][0]
                cell = {"model": mdl, "dataset": ds, "partition": part, "seed": 0}
                rows += [{**cell, "method": base, "value": v}, {**cell, "method": f"{REF}+{base}", "value": v + change}]
    elif group == "availability":
        rows = [
            {"scenario": sc, "model": mdl, "dataset": ds, "partition": part, "method": m, "seed": 0, "value": v[0]}
            for (sc, ds, part, mdl), cells in paper_values.TABLE_III.items()
            for m, v in cells.items()
        ]
    elif group == "buffer":
        rows = [
            {"dataset": ds, "partition": part, "buffer_pct": q, "method": REF, "seed": 0, "value": v[0]}
            for (ds, part, q), v in paper_values.TABLE_VI.items()
        ]
    elif group == "medical":
        rows = [
            {"model": mdl, "dataset": ds, "method": m, "seed": 0, "value": v[0]}
            for (mdl, ds), cells in paper_values.TABLE_IV.items()
            for m, v in cells.items()
        ]
    elif group == "participation":
        rows = _t1_rows(tiers.PARTICIPATION_METHODS, num_clients=100, clients_per_round=10)
    else:
        return None
    return pd.DataFrame(rows)


def _in_paper(frame: pd.DataFrame, setting: Mapping) -> pd.DataFrame:
    """The rows of a paper frame in ``setting`` (our names mapped to the paper's; columns it lacks ignored)."""
    for col, v in setting.items():
        if col in frame.columns:
            frame = frame[frame[col] == _paper_value(col, v)]
    return frame


def paper_gap(paper: pd.DataFrame | None, compare: str = "method") -> Callable | None:
    """``f(setting, a, b)``: the paper's ``a - b`` (``a`` alone for b None) in the setting, from ``paper`` (a
    frame shaped like ours, e.g. :func:`paper_frame` or the same quantity computed on it); None where it has no
    such cell."""
    if paper is None:
        return None

    def f(setting, a, b):
        sel = _in_paper(paper, setting)
        va = sel.loc[sel[compare] == a, "value"]
        vb = sel.loc[sel[compare] == b, "value"] if b is not None else pd.Series([0.0])
        return float(va.iloc[0] - vb.iloc[0]) if len(va) == 1 and len(vb) == 1 else None

    return f


def _where(frame: pd.DataFrame, **cells) -> pd.DataFrame:
    """Rows whose columns, in the paper's names, equal ``cells`` (a list: any of them; a column the frame lacks
    counts as the tier's only setting, kept)."""
    for col, want in cells.items():
        if col not in frame.columns:
            continue
        names = frame[col].map(lambda v, c=col: _paper_value(c, v))
        frame = frame[names.isin(want if isinstance(want, list | tuple) else [want])]
    return frame


# ------------------------------------------------------------------------------------------- the rules, applied


def _printed(x) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _magnitude(frame, pairs, relation, value, *, paper=None, combine="every", compare="method", unit=PP):
    """:func:`repro.rules.magnitude` for one relation of ``statements.yaml`` (h: half a unit of
    the paper's last printed digit)."""
    values = value if isinstance(value, list | tuple) else [value]
    h = min(rules.rounding(_printed(v)) for v in values)
    if relation == "range":
        kind, v = "about", tuple(values)
    elif relation == "up_to":  # a maximum the paper rounds up: [value - 2h, value + h]
        kind, v = "about", (value - h, value)
    else:
        kind, v = relation, value
    return rules.magnitude(
        frame, pairs, value=v, kind=kind, tolerance=h, paper=paper, combine=combine, compare=compare, unit=unit
    )


def _margin(statement, table) -> float:
    m = statement.params["margin"]
    return float(table.margins[m]["value"]) if isinstance(m, str) else float(m)


def _combine(statement) -> str | tuple[str, str]:
    where = statement.params.get("in")
    return "some" if where == "some setting" else ("some", "every") if where else "every"


def apply_rule(statement, table, frame, pairs, *, paper=None, compare="method", unit=PP) -> rules.Judgement:
    """The statement's rule with its parameters (side, threshold, margin, one_sided, relation, ``in``) on
    ``frame``'s ``pairs``; ``best`` takes its reference and rivals from ``pairs``."""
    p, combine = statement.params, _combine(statement)
    if statement.rule == "best":
        ref = pairs[0][0] if pairs else statement.params["reference"]
        return rules.best(frame, ref, rivals=[b for _, b in pairs], paper=paper, compare=compare, unit=unit)
    if statement.rule == "direction":
        side = 1 if p["side"] == "positive" else -1
        j = rules.direction(
            frame,
            pairs,
            side=side,
            threshold=p.get("threshold", 0.0),
            paper=paper,
            combine=combine,
            compare=compare,
            unit=unit,
        )
        return rules.at_least(j, int(p["at_least"])) if "at_least" in p else j
    if statement.rule == "equal_within":
        return rules.equal_within(
            frame,
            pairs,
            margin=_margin(statement, table),
            one_sided=p.get("one_sided"),
            paper=paper,
            combine=combine,
            compare=compare,
            unit=unit,
        )
    if statement.rule == "magnitude":
        return _magnitude(
            frame, pairs, p["relation"], p["value"], paper=paper, combine=combine, compare=compare, unit=unit
        )
    raise ValueError(f"{statement.id}: rule {statement.rule!r} takes no run frame.")


def _parts(statement, table, builds) -> rules.Judgement:
    """A statement of several parts (``relation`` and ``value`` lists, one per part): ``builds`` gives (frame,
    pairs, paper) per part; each judged by its own relation, then every part."""
    p = statement.params
    out = []
    for (frame, pairs, paper), rel, val in zip(builds, p["relation"], p["value"]):
        out.append(_magnitude(frame, pairs, rel, val, paper=paper))
    return rules.join(out, "every")


# ---------------------------------------------------------------------------------------- derived quantities


def _settings(frame, drop=()) -> list[str]:
    return [c for c in frame.columns if c not in ("method", "seed", "value", *drop)]


def _one(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """A per-seed series (index: setting columns and seed) as a tidy one-sample frame of ``name``."""
    return frame.rename("value").reset_index().assign(method=name).dropna(subset=["value"])


def _mean_over_methods_across(frame, column, a, b) -> pd.DataFrame:
    """Per (setting without ``column``, seed): the mean over methods of value at ``column`` = a minus at b (over
    the seeds that have every method)."""
    keys = _settings(frame, drop=(column,))
    wide = frame.pivot_table(index=[*keys, "method", "seed"], columns=column, values="value")
    if a not in wide.columns or b not in wide.columns:
        return pd.DataFrame(columns=[*keys, "method", "seed", "value"])
    d = (wide[a] - wide[b]).dropna()
    per = d.groupby([*keys, "seed"]).size()  # methods at each seed: a seed with fewer is a subset, left out
    full = per[per == per.groupby(level=keys).transform("max")].index if keys else per[per == per.max()].index
    d = d.groupby([*keys, "seed"]).mean()
    return _one(d[d.index.isin(full)], f"{a} - {b}")


def _minus_paper(frame: pd.DataFrame, paper: pd.DataFrame | None, compare: str = "method") -> pd.DataFrame:
    """Ours minus the paper's cell, row by row (rows without a cell dropped): "ours - the paper's"."""
    if paper is None:
        return frame.iloc[0:0]
    settings = _settings(frame, drop=(compare,))
    gap = paper_gap(paper, compare)
    theirs = [
        gap(dict(zip(settings, r[: len(settings)])), r[len(settings)], None)
        for r in frame[[*settings, compare]].itertuples(index=False)
    ]
    out = frame.assign(value=frame["value"] - pd.Series(theirs, index=frame.index, dtype=float))
    return out.dropna(subset=["value"])


def _cells(statement, table, frame, paper, compare="method"):
    """ours - the paper's cell per (setting, method), each judged on its own by the statement's rule."""
    d = _minus_paper(frame, paper, compare)
    return apply_rule(statement, table, d, [(m, None) for m in dict.fromkeys(d[compare])], compare=compare)


# ------------------------------------------------------------------------------------------------- Table I


def _t1(runs):
    return runs.frame("table1"), paper_frame("table1")


def _table1_best(runs, s, table):
    f, p = _t1(runs)
    return apply_rule(s, table, f, [(s.params["reference"], r) for r in s.params["rivals"]], paper=paper_gap(p))


def _table1_pairs(pairs, **where):
    def judge(runs, s, table):
        f, p = _t1(runs)
        return apply_rule(s, table, _where(f, **where), pairs, paper=paper_gap(p))

    return judge


def _papers_best_baseline(setting: Mapping) -> str | None:
    """The paper's best baseline of a Table I setting (its second best where FedEntOpt leads)."""
    cells = paper_values.TABLE_I.get(
        (
            _paper_value("model", setting.get("model", "lenet5")),
            _paper_value("dataset", setting.get("dataset", "")),
            setting.get("partition"),
        )
    )
    if not cells:
        return None
    return max((v[0], m) for m, v in cells.items() if m not in (REF, DP))[1]


def _against_papers_best(sub: pd.DataFrame):
    setting = {c: sub[c].iloc[0] for c in ("model", "dataset", "partition") if c in sub}
    rival = _papers_best_baseline(setting)
    return [(REF, rival)] if rival else []


def _lenet_1_3pp(runs, s, table):
    f, p = _t1(runs)
    f = _where(f, model="LeNet-5", dataset=["CINIC-10", "CIFAR-100"])
    return apply_rule(s, table, f, _against_papers_best, paper=paper_gap(p))


def _vgg_margins(runs, s, table):
    f, p = _t1(runs)
    f = _where(f, model="VGG-11")
    is_c100_dir = f["dataset"].map(lambda d: _paper_value("dataset", d)).eq("CIFAR-100") & f["partition"].eq("Dir(0.1)")
    gap = paper_gap(p)
    return _parts(s, table, [(f[is_c100_dir], _against_papers_best, gap), (f[~is_c100_dir], _against_papers_best, gap)])


def _dir_most_challenging(runs, s, table):
    f, p = _t1(runs)
    d = _mean_over_methods_across(f, "partition", "Dir(0.1)", "C=2")
    dp = _mean_over_methods_across(p, "partition", "Dir(0.1)", "C=2")
    name = "Dir(0.1) - C=2"
    return apply_rule(s, table, d, [(name, None)], paper=paper_gap(dp))


def _model_contrast(frame, pairs):
    """Per (dataset, partition, seed) and pair: (a - b) with VGG-11 minus with LeNet-5, named after a."""
    out = []
    for a, b in pairs:
        w = frame[frame["method"].isin([a, b])].pivot_table(
            index=[*_settings(frame, drop=("model",)), "seed"], columns=["model", "method"], values="value"
        )
        models = {_paper_value("model", m): m for m in w.columns.get_level_values(0)}
        if not {"VGG-11", "LeNet-5"} <= set(models):
            continue
        vgg, lenet = models["VGG-11"], models["LeNet-5"]
        if not {(vgg, a), (vgg, b), (lenet, a), (lenet, b)} <= set(w.columns):
            continue
        d = (w[(vgg, a)] - w[(vgg, b)]) - (w[(lenet, a)] - w[(lenet, b)])
        out.append(_one(d.dropna(), f"{a} - {b}"))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=["method", "seed", "value"])


def _vgg_contrast(pairs):
    def judge(runs, s, table):
        f, p = _t1(runs)
        d, dp = _model_contrast(f, pairs), _model_contrast(p, pairs)
        return apply_rule(s, table, d, [(f"{a} - {b}", None) for a, b in pairs], paper=paper_gap(dp))

    return judge


def _races(group: str, model: str | None = None):
    """The rounds each rival needs to reach its own final accuracy minus the rounds FedEntOpt needs to reach it, per
    seed (:func:`repro.significance.races`), above 0 against every rival (runs of ``model`` only, if given)."""

    def judge(runs, s, table):
        from repro import significance

        f = runs.stored(group).frame
        f = f if model is None or f.empty else f[f["model"] == model]
        by = [c for c in ("model", "dataset", "partition") if c in f.columns]
        races = significance.races(f, REF, window=10, by=by)
        d = races.rename(columns={"saved": "value"})[[*by, "method", "seed", "value"]]
        return rules.direction(d, [(r, None) for r in s.params["rivals"]], unit=" rounds")

    return judge


def _table1_cells(runs, s, table):
    f, p = _t1(runs)
    return _cells(s, table, f, p)


def _dp_above_baselines(runs, s, table):
    f, p = _t1(runs)
    return apply_rule(s, table, f, [(DP, b) for b in BASELINES], paper=paper_gap(p))


def _largest_deficits(frame: pd.DataFrame) -> pd.DataFrame:
    """Per seed and baseline X: X's largest deficit to the best baseline over the settings, minus that of the
    worse of FedAvg and FedProx (> 0: X is less consistent than both)."""
    f = frame[frame["method"].isin(BASELINES)]
    keys = _settings(f)
    wide = f.pivot_table(index=["seed", *keys], columns="method", values="value")
    deficit = (wide.max(axis=1).to_numpy()[:, None] - wide).groupby(level="seed").max()
    if not {"FedAvg", "FedProx"} <= set(deficit.columns):
        return pd.DataFrame(columns=["method", "seed", "value"])
    worse = deficit[["FedAvg", "FedProx"]].max(axis=1)
    others = deficit.drop(columns=["FedAvg", "FedProx"]).sub(worse, axis=0)
    out = others.stack().rename("value").reset_index().rename(columns={"level_1": "method"})
    return out.dropna(subset=["value"])


def _most_consistent(runs, s, table):
    f, p = _t1(runs)
    d, dp = _largest_deficits(f), _largest_deficits(p)
    return apply_rule(s, table, d, [(m, None) for m in dict.fromkeys(d["method"])], paper=paper_gap(dp))


# ------------------------------------------------------------------------------------------------- Table II


def _t2(runs, partition=None, **where):
    f = _where(runs.frame("table2"), **where)
    p = paper_frame("table2")
    if partition:
        f, p = f[f["partition"] == partition], p[p["partition"] == partition]
    return f, p


def _combined(partition, baselines=tiers.TABLE2_BASELINES, **where):
    def judge(runs, s, table):
        f, p = _t2(runs, partition, **where)
        return apply_rule(s, table, f, [(f"{REF}+{b}", b) for b in baselines], paper=paper_gap(p))

    return judge


def _over_40_and_13(runs, s, table):
    parts = []
    for mdl, ds, base in (("LeNet-5", "CIFAR-10", "FedNova"), ("VGG-11", "CIFAR-100", "SCAFFOLD")):
        f, p = _t2(runs, "Dir(0.1)", model=mdl, dataset=ds)
        parts.append((f, [(f"{REF}+{base}", base)], paper_gap(p)))
    return _parts(s, table, parts)


def _changes(frame: pd.DataFrame) -> pd.DataFrame:
    """(FedEntOpt+X) - X per setting, seed and baseline X (named X)."""
    keys = _settings(frame)
    wide = frame.pivot_table(index=[*keys, "seed"], columns="method", values="value")
    out = [
        _one((wide[f"{REF}+{b}"] - wide[b]).dropna(), b)
        for b in tiers.TABLE2_BASELINES
        if {b, f"{REF}+{b}"} <= set(wide.columns)
    ]
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=[*keys, "method", "seed", "value"])


def _c2_smaller_than_dir(runs, s, table):
    f, p = _t2(runs)
    d = _per_method_across(_changes(f), "partition", "Dir(0.1)", "C=2")
    dp = _per_method_across(_changes(p), "partition", "Dir(0.1)", "C=2")
    return apply_rule(s, table, d, [(b, None) for b in dict.fromkeys(d["method"])], paper=paper_gap(dp))


def _per_method_across(frame, column, a, b) -> pd.DataFrame:
    """Per (setting without ``column``, method, seed): value at ``column`` = a minus at b."""
    keys = _settings(frame, drop=(column,))
    wide = frame.pivot_table(index=[*keys, "method", "seed"], columns=column, values="value")
    if a not in wide.columns or b not in wide.columns:
        return pd.DataFrame(columns=[*keys, "method", "seed", "value"])
    return (wide[a] - wide[b]).dropna().rename("value").reset_index()


def _table2_cells(runs, s, table):
    f, p = _t2(runs)
    d, dp = _changes(f), _changes(p)
    return _cells(s, table, d, dp)


# ------------------------------------------------------------------------------------ Fig. 2: participation


def _participation(runs, **where):
    f = _where(runs.frame("participation"), **where)
    return f, _where(paper_frame("participation"), **where)


def _keeps(runs, s, table, **where):
    f, _ = _participation(runs, **where)
    f = f[f["method"] == REF]
    ms = sorted(set(f["clients_per_round"]))
    return apply_rule(s, table, f, [(m, ms[-1]) for m in ms[:-1]], compare="clients_per_round")


def _keeps_accuracy(runs, s, table):
    return _keeps(runs, s, table)


def _vgg_and_cifar100(runs, s, table):
    a = _keeps(runs, s, table, model="VGG-11")
    b = _keeps(runs, s, table, model="LeNet-5", dataset="CIFAR-100", partition="Dir(0.1)")
    return rules.join([a, b])


def _lowest_minus_top(frame: pd.DataFrame) -> pd.DataFrame:
    """Per setting, method and seed: final accuracy at the lowest rate minus at the highest (the paper's 10 %)."""
    keys = _settings(frame, drop=("clients_per_round",))
    wide = frame.pivot_table(index=[*keys, "method", "seed"], columns="clients_per_round", values="value")
    if wide.shape[1] < 2:
        return pd.DataFrame(columns=[*keys, "method", "seed", "value"])
    lo, hi = min(wide.columns), max(wide.columns)
    return (wide[lo] - wide[hi]).dropna().rename("value").reset_index()


def _others_degrade(runs, s, table):
    f, _ = _participation(runs)
    d = _lowest_minus_top(f)
    d = d[d["method"] != REF]
    return apply_rule(s, table, d, [(m, None) for m in dict.fromkeys(d["method"])])


def _fewer_clients(runs, s, table):
    """FedEntOpt at the lowest rate minus FedAvg at 10 % (Table I's run), seed by seed."""
    f, _ = _participation(runs)
    keys = _settings(f, drop=("clients_per_round",))
    wide = f.pivot_table(index=[*keys, "seed"], columns=["method", "clients_per_round"], values="value")
    ms = sorted({m for _, m in wide.columns})
    name = f"FedEntOpt at M={ms[0]} - FedAvg at M={ms[-1]}" if ms else "FedEntOpt - FedAvg"
    if len(ms) < 2 or (REF, ms[0]) not in wide or ("FedAvg", ms[-1]) not in wide:
        d = pd.DataFrame(columns=["method", "seed", "value"])
    else:
        d = _one((wide[(REF, ms[0])] - wide[("FedAvg", ms[-1])]).dropna(), name)
    return apply_rule(s, table, d, [(name, None)])


def _gap_to_others(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (setting, partition, seed): FedEntOpt's mean gap to the other methods over the rates, at the seeds that
    have every rate and method of their setting (a seed with part of the curve, Table I's run alone say, is left
    out: its mean would be over other rates)."""
    keys = _settings(frame, drop=("clients_per_round",))
    wide = frame.pivot_table(index=[*keys, "seed", "clients_per_round"], columns="method", values="value")
    if REF not in wide.columns:
        return pd.DataFrame(columns=[*keys, "seed", "value"])
    gaps = wide.drop(columns=REF).rsub(wide[REF], axis=0).stack().groupby(level=[*keys, "seed"])
    size = gaps.size()
    most = size.groupby(level=keys).transform("max") if keys else size.max()
    return gaps.mean()[size == most].rename("value").reset_index()


def _dir_pronounced(runs, s, table):
    f, _ = _participation(runs)
    g = _gap_to_others(f).assign(method="gap")
    d = _mean_over_methods_across(g, "partition", "Dir(0.1)", "C=2")
    return apply_rule(s, table, d, [("Dir(0.1) - C=2", None)])


def _default_choice(runs, s, table):
    f, p = _participation(runs)
    rivals = [m for m in tiers.PARTICIPATION_METHODS if m != REF]
    return apply_rule(s, table, f, [(REF, r) for r in rivals], paper=paper_gap(p))


def _cifar100_c2_identical(runs, s, table):
    f, p = _participation(runs, dataset="CIFAR-100", partition="C=2")
    rivals = [m for m in tiers.PARTICIPATION_METHODS if m != REF]
    return apply_rule(s, table, f, [(r, REF) for r in rivals], paper=paper_gap(p))


def _c2_simpler(runs, s, table):
    f, p = _participation(runs, dataset="CIFAR-100")
    d = _mean_over_methods_across(f, "partition", "C=2", "Dir(0.1)")
    dp = _mean_over_methods_across(p, "partition", "C=2", "Dir(0.1)")
    return apply_rule(s, table, d, [("C=2 - Dir(0.1)", None)], paper=paper_gap(dp))


# ------------------------------------------------------------------------------ Table III: availability


def _availability(runs, scenario=None, **where):
    f, p = runs.frame("availability"), paper_frame("availability")
    if scenario:
        f, p = f[f["scenario"] == scenario], p[p["scenario"] == scenario]
    return _where(f, **where), p


def _available_best(scenario):
    def judge(runs, s, table):
        f, p = _availability(runs, scenario)
        return apply_rule(s, table, f, [(REF, r) for r in s.params["rivals"]], paper=paper_gap(p))

    return judge


def _lead_over_better(frame: pd.DataFrame) -> pd.DataFrame:
    """Per setting and seed: FedEntOpt minus the better of FedAvg and FedProx at that seed."""
    keys = _settings(frame)
    wide = frame.pivot_table(index=[*keys, "seed"], columns="method", values="value")
    if not {REF, "FedAvg", "FedProx"} <= set(wide.columns):
        return pd.DataFrame(columns=[*keys, "method", "seed", "value"])
    return _one((wide[REF] - wide[["FedAvg", "FedProx"]].max(axis=1)).dropna(), "FedEntOpt - the better baseline")


def _over_30(runs, s, table):
    cell = {"model": "LeNet-5", "dataset": "CIFAR-10", "partition": "Dir(0.1)"}
    f, p = _availability(runs, "Dropout", **cell)
    d, dp = _lead_over_better(f), _lead_over_better(_where(p, **cell))
    return apply_rule(s, table, d, [("FedEntOpt - the better baseline", None)], paper=paper_gap(dp))


def _over_30_and_8(runs, s, table):
    cell = {"model": "LeNet-5", "dataset": "CIFAR-10", "partition": "Dir(0.1)"}
    parts = []
    for scenario in ("Dropout", "Straggling"):
        f, p = _availability(runs, scenario, **cell)
        d, dp = _lead_over_better(f), _lead_over_better(_where(p, **cell))
        parts.append((d, [("FedEntOpt - the better baseline", None)], paper_gap(dp)))
    return _parts(s, table, parts)


def _scenario_minus_table1(avail: pd.DataFrame, t1: pd.DataFrame) -> pd.DataFrame:
    """Per scenario and seed: FedEntOpt under it minus FedEntOpt in Table I's run of the same setting."""
    a, b = avail[avail["method"] == REF], t1[t1["method"] == REF]
    keys = [c for c in ("model", "dataset", "partition") if c in a.columns and c in b.columns]
    m = a.merge(b[[*keys, "seed", "value"]], on=[*keys, "seed"], suffixes=("", "_t1"))
    return m.assign(value=m["value"] - m["value_t1"], method="scenario - Table I").drop(columns="value_t1")


def _unaffected(runs, s, table):
    f, p = _availability(runs)
    d = _scenario_minus_table1(f, runs.frame("table1"))
    dp = _scenario_minus_table1(p, paper_frame("table1"))
    return apply_rule(s, table, d, [("scenario - Table I", None)], paper=paper_gap(dp))


def _table3_cells(runs, s, table):
    f, p = _availability(runs)
    return _cells(s, table, f, p)


# --------------------------------------------------------------------------------- Table VI: buffer size


def _buffer(runs, partition=None):
    f, p = runs.frame("buffer"), paper_frame("buffer")
    if partition:
        f, p = f[f["partition"] == partition], p[p["partition"] == partition]
    return f, p


def _buffer_steps(kind, partition=None):
    def judge(runs, s, table):
        f, p = _buffer(runs, partition)
        qs = sorted(set(f["buffer_pct"]))
        if kind == "rises":
            pairs = list(zip(qs[1:], qs[:-1]))
        elif kind == "largest":
            pairs = [(qs[-1], qs[-2])] if len(qs) > 1 else []
        else:
            pairs = [(q, qs[0]) for q in qs[1:]]
        return apply_rule(s, table, f, pairs, paper=paper_gap(p, "buffer_pct"), compare="buffer_pct")

    return judge


def _accuracy_cells(runs, s, table):
    f, p = _buffer(runs)
    return _cells(s, table, f, p, compare="buffer_pct")


# ------------------------------------------------------------------------------- §V-A5: the tuned values

#: The label of the paper's chosen value in a tuning group's comparison.
CHOSEN = "the paper's choice"


def _chosen_best(group: str):
    """The paper's chosen value (:func:`repro.tiers.paper_choice`, per model and partition) above every other value
    of the tuning group's grid, seed-paired, in every setting (the rule best)."""
    column = tiers.TUNING_COLUMNS[group]

    def judge(runs, s, table):
        f = runs.frame(group)
        if f.empty:
            return rules.best(f.assign(choice=[]), CHOSEN, compare="choice", unit=PP)
        pick = [tiers.paper_choice(group, m, p) for m, p in zip(f["model"], f["partition"])]
        values = f[column].to_numpy(dtype=float)
        names = np.where(np.isclose(values, pick), CHOSEN, f"{column} = " + f[column].astype(str))
        return rules.best(f.assign(choice=names).drop(columns=column), CHOSEN, compare="choice", unit=PP)

    return judge


# ------------------------------------------------------------------------------------- Fig. 1: FedEntropy


def _reselection_entropy(stored: StoredGroup) -> pd.DataFrame:
    """The FedEntropy runs' frame with ``reselection_entropy_bits`` (the entropy of the clients FedEntropy would
    pick again) in every row: runs stored before that column existed have the trained entropy instead."""
    f = stored.frame.copy()
    if "reselection_entropy_bits" not in f:
        f["reselection_entropy_bits"] = np.nan
    f["reselection_entropy_bits"] = f["reselection_entropy_bits"].fillna(f["entropy_bits_trained"])
    return f


def _fedentropy_entropy(a, b):
    def judge(runs, s, table):
        f = _reselection_entropy(runs.stored("fedentropy"))
        f = f[f["round"] >= 1]
        per = f.groupby(["partition", "method", "seed"])["reselection_entropy_bits"].mean().rename("value")
        return apply_rule(s, table, per.reset_index(), [(a, b)], unit=" bits")

    return judge


def _reselection_lacks_labels(runs, s, table):
    """Per (partition, seed): the share of rounds whose aggregated clients miss a class, FedEntropy's kept clients
    (``kept_covers_all_classes``; runs stored before that column have none) and FedAvg's picks (random selection
    keeps every pick: ``covers_all_classes``)."""
    f = runs.stored("fedentropy").frame
    f = f[f["round"] >= 1]
    kept = f["kept_covers_all_classes"] if "kept_covers_all_classes" in f else pd.Series(np.nan, index=f.index)
    covers = kept.where(f["method"] != "FedAvg", f["covers_all_classes"])
    miss = 1.0 - covers.astype(float)
    per = miss.groupby([f["partition"], f["method"], f["seed"]]).mean().rename("value").reset_index()
    return apply_rule(s, table, per.dropna(subset=["value"]), [("FedEntropy", "FedAvg")], unit="")


def _fedentropy_accuracy(runs, s, table):
    return apply_rule(s, table, runs.frame("fedentropy"), [("FedAvg", "FedEntropy")])


# ------------------------------------------------------------------------ large pools and medical data


def _large_pools(runs, s, table):
    return apply_rule(s, table, runs.frame("large_pools"), [(REF, "FedAvg")])


# ----------------------------------------------------------------- v1 Figs. 5 and 6: 5 % participation, VGG-11

LOW = "low_participation"
LEAD = "FedEntOpt - the best baseline"


def lead_over_best(frame: pd.DataFrame) -> pd.DataFrame:
    """Per setting and seed of a tidy frame (:meth:`Runs.frame`): FedEntOpt minus the best other method at that
    seed, as method :data:`LEAD` (a seed any method lacks: left out); v1's Fig. 5 gains are this quantity."""
    keys = _settings(frame)
    wide = frame.pivot_table(index=[*keys, "seed"], columns="method", values="value")
    others = [m for m in wide.columns if m != REF]
    if REF not in wide.columns or not others:
        return pd.DataFrame(columns=[*keys, "method", "seed", "value"])
    return _one((wide[REF] - wide[others].max(axis=1, skipna=False)).dropna(), LEAD)


def _low_vgg(runs) -> pd.DataFrame:
    return _where(runs.frame(LOW), model="VGG-11")


def _low_best(runs, s, table):
    return apply_rule(s, table, _low_vgg(runs), [(REF, r) for r in s.params["rivals"]])


def _low_gains(parts):
    """Magnitude parts: FedEntOpt's lead over the best baseline in each (data sets, partition) of ``parts``."""

    def judge(runs, s, table):
        f = _low_vgg(runs)
        builds = [(lead_over_best(_where(f, dataset=ds, partition=p)), [(LEAD, None)], None) for ds, p in parts]
        return _parts(s, table, builds)

    return judge


def _two_most_challenging(runs, s, table):
    """Per (model, data set) of the low-participation runs: accuracy under C = 3 minus under C = 2 and minus under
    Dir(0.1), each the mean over methods, seed-paired."""
    f = runs.frame(LOW)
    parts = [_mean_over_methods_across(f, "partition", "C=3", p) for p in ("C=2", "Dir(0.1)")]
    return apply_rule(s, table, pd.concat(parts, ignore_index=True), [("C=3 - C=2", None), ("C=3 - Dir(0.1)", None)])


def _vgg_minus_lenet_gap(runs, s, table):
    """Per (data set, partition, seed): (X - FedAvg) with VGG-11 minus (X - FedAvg) with LeNet-5, X = FedNova and
    SCAFFOLD."""
    f = runs.frame(LOW)
    keys = [c for c in _settings(f) if c != "model"]
    wide = f.pivot_table(index=[*keys, "seed"], columns=["model", "method"], values="value")
    frames = []
    for x in ("FedNova", "SCAFFOLD"):
        cols = [(m, y) for m in ("vgg11", "lenet5") for y in (x, "FedAvg")]
        if not set(cols) <= set(wide.columns):
            continue
        gap = (wide[("vgg11", x)] - wide[("vgg11", "FedAvg")]) - (wide[("lenet5", x)] - wide[("lenet5", "FedAvg")])
        frames.append(_one(gap.dropna(), f"{x}: VGG-11 - LeNet-5, gap to FedAvg"))
    d = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*keys, "method", "seed", "value"])
    return apply_rule(s, table, d, [(m, None) for m in dict.fromkeys(d["method"])])


def _curves(runs, model="vgg11") -> pd.DataFrame:
    """The per-round test accuracy (%) of the group's runs of ``model``: dataset, partition, method, seed, round."""
    f = runs.stored(LOW).frame
    f = f[(f["model"] == model) & (f["round"] >= 1) & f["test_accuracy"].notna()]
    return f.assign(acc=100 * f["test_accuracy"])[["dataset", "partition", "method", "seed", "round", "acc"]]


def _fluctuates(runs, s, table):
    """Per (data set, partition, seed): the std of FedNova's round-to-round accuracy change minus the largest such std
    among the other methods (pp)."""
    c = _curves(runs).sort_values("round")
    jumps = c.groupby(["dataset", "partition", "method", "seed"])["acc"].apply(lambda a: a.diff().std())
    wide = jumps.unstack("method")
    if "FedNova" not in wide.columns or wide.shape[1] < 2:
        d = pd.DataFrame(columns=["dataset", "partition", "method", "seed", "value"])
    else:
        d = _one((wide["FedNova"] - wide.drop(columns="FedNova").max(axis=1, skipna=False)).dropna(), "FedNova - most")
    return apply_rule(s, table, d, [("FedNova - most", None)])


#: Phases of training for "throughout the entire course of training": equal blocks of the evaluated rounds.
PHASES = 10


def _dominates(runs, s, table):
    """FedEntOpt above every rival in every phase (tenth of the evaluated rounds) of every setting: per run, its mean
    accuracy in each phase."""
    c = _curves(runs)
    if c.empty:
        return apply_rule(s, table, c.assign(value=[], phase=[]), [(REF, r) for r in s.params["rivals"]])
    rank = c.groupby(["dataset", "partition", "method", "seed"])["round"].rank(method="first", pct=True)
    c = c.assign(phase=np.minimum((rank * PHASES).apply(math.ceil), PHASES))
    per = c.groupby(["dataset", "partition", "phase", "method", "seed"])["acc"].mean().rename("value").reset_index()
    return apply_rule(s, table, per, [(REF, r) for r in s.params["rivals"]])


#: The pseudo-method an untrained classifier is: 100 / C % in every setting and seed.
CHANCE = "chance (100 / C)"


def _with_chance(f: pd.DataFrame) -> pd.DataFrame:
    """``f`` plus :data:`CHANCE`'s rows: 100 / C % (C: the data set's classes) per setting and seed."""
    if f.empty:
        return f
    keys = [c for c in f.columns if c not in ("method", "value")]
    base = f.drop_duplicates(keys)[keys]
    chance = [100.0 / get_profile(d.removesuffix("-subset")).num_classes for d in base["dataset"]]
    return pd.concat([f, base.assign(method=CHANCE, value=chance)], ignore_index=True)


def _fedconcat_fails(runs, s, table):
    return apply_rule(s, table, _with_chance(runs.frame("large_pools")), [("FedConcat", CHANCE)])


def _baselines_fail(runs, s, table):
    """More than half of the baselines within the chance margin above chance, in some (K, M)."""
    f = runs.frame("large_pools")
    baselines = [m for m in dict.fromkeys(f["method"]) if m != REF] if not f.empty else []
    j = apply_rule(s, table, _with_chance(f), [(b, CHANCE) for b in baselines])
    return rules.at_least(j, len(baselines) // 2 + 1, across="some") if baselines else j


def _medical_best(runs, s, table):
    f, p = runs.frame("medical"), paper_frame("medical")
    return apply_rule(s, table, f, [(REF, r) for r in s.params["rivals"]], paper=paper_gap(p))


def _scaffold_second(runs, s, table):
    f, p = runs.frame("medical"), paper_frame("medical")
    return apply_rule(s, table, f, [(REF, "SCAFFOLD")], paper=paper_gap(p))


def _table4_cells(runs, s, table):
    return _cells(s, table, runs.frame("medical"), paper_frame("medical"))


_LENET_C10_DIR = {"model": "LeNet-5", "dataset": "CIFAR-10", "partition": "Dir(0.1)"}

#: statement id -> ``f(runs, statement, table)``: its judgement from one tier's runs (the groups it names).
TRAINING: dict[str, Callable] = {
    "abstract/outperforms": _table1_best,
    "V/consistently_outperforms": _table1_best,
    "V-B1/best_every_setting": _table1_best,
    "abstract/up_to_6pct": _table1_pairs([(REF, "FedAvg")], **_LENET_C10_DIR),
    "V-B1/lenet_cifar10_dir_6pct": _table1_pairs([(REF, "FedAvg")], **_LENET_C10_DIR),
    "abstract/dp_unaffected": _table1_pairs([(REF, DP)]),
    "V-B2/dp_matches": _table1_pairs([(REF, DP)]),
    "VI/dp_robust": _table1_pairs([(REF, DP)]),
    "V-B2/dp_sometimes_higher": _table1_pairs([(DP, REF)]),
    "V-B2/dp_above_baselines": _dp_above_baselines,
    "V-A5/dir_most_challenging": _dir_most_challenging,
    "V-B1/lenet_1_3pp": _lenet_1_3pp,
    "V-B1/fedconcat_under": _table1_pairs([("FedAvg", "FedConcat")]),
    "V-B1/kl_low": _table1_pairs([("FedAvg", "KL")]),
    "V-B1/fednova_scaffold_dir": _table1_pairs(
        [("FedAvg", "FedNova"), ("FedAvg", "SCAFFOLD")], model="LeNet-5", partition="Dir(0.1)"
    ),
    "V-B1/vgg_margins": _vgg_margins,
    "V-B1/vgg_fedconcat": _vgg_contrast([("FedAvg", "FedConcat")]),
    "V-B1/vgg_fednova_scaffold": _vgg_contrast([("FedNova", "FedAvg"), ("SCAFFOLD", "FedAvg")]),
    "V-B1/faster": _races("table1"),
    "V-B1/table1_cells": _table1_cells,
    "V-B5/fedavg_fedprox_most_consistent": _most_consistent,
    "abstract/combined_40pct": _combined("Dir(0.1)", ("FedNova",), model="LeNet-5", dataset="CIFAR-10"),
    "V-B4/dir_increases": _combined("Dir(0.1)"),
    "V-B4/c2_modest": _combined("C=2"),
    "V-B4/over_40_and_13": _over_40_and_13,
    "V-B4/c2_smaller_than_dir": _c2_smaller_than_dir,
    "V-B4/other_cells": _table2_cells,
    "V-B3/keeps_accuracy": _keeps_accuracy,
    "V-B3/vgg_and_cifar100": _vgg_and_cifar100,
    "V-B3/others_degrade": _others_degrade,
    "V-B3/fewer_clients_less_communication": _fewer_clients,
    "V-B3/dir_pronounced": _dir_pronounced,
    "V-B3/default_choice": _default_choice,
    "V-B3/cifar100_c2_identical": _cifar100_c2_identical,
    "V-B3/c2_simpler": _c2_simpler,
    "abstract/over_30pct": _over_30,
    "V-B5/dropout_best": _available_best("Dropout"),
    "V-B5/straggling_best": _available_best("Straggling"),
    "V-B5/over_30_and_8": _over_30_and_8,
    "V-B5/unaffected": _unaffected,
    "V-B5/table3_cells": _table3_cells,
    "V-E/c2_accuracy_rises": _buffer_steps("rises", "C=2"),
    "V-E/dir_accuracy_degrades": _buffer_steps("largest", "Dir(0.1)"),
    "V-E/q0_worst": _buffer_steps("above_q0"),
    "V-E/accuracy_cells": _accuracy_cells,
    "IV/fig1_above_reselection": _fedentropy_entropy(REF, "FedEntropy"),
    "IV/random_above_reselection": _fedentropy_entropy("FedAvg", "FedEntropy"),
    "IV/reselection_below_fedavg": _fedentropy_accuracy,
    "v1/large_pools_robust": _large_pools,
    "v1/fedconcat_fails": _fedconcat_fails,
    "v1/fig5_best": _low_best,
    "v1/fig5_dir_15_and_5pct": _low_gains([("CIFAR-10", "Dir(0.1)"), (["CINIC-10", "CIFAR-100"], "Dir(0.1)")]),
    "v1/fig5_c2_gains": _low_gains([("CIFAR-100", "C=2"), ("CIFAR-10", "C=2")]),
    "v1/fig5_c3_gains": _low_gains([("CIFAR-100", "C=3"), ("CIFAR-10", "C=3"), ("CINIC-10", "C=3")]),
    "v1/fig6_fednova_scaffold_better": _vgg_minus_lenet_gap,
    "v1/fig6_fednova_fluctuates": _fluctuates,
    "v1/fig6_dominates": _dominates,
    "v1/fig6_faster": _races(LOW, "vgg11"),
    "v1/baselines_fail_large_pools": _baselines_fail,
    "V-A5/weight_decay": _chosen_best("weight_decay"),
    "V-A5/fedprox_mu": _chosen_best("fedprox_mu"),
    "V-A5/buffer_choice": _chosen_best("buffer_choice"),
    "V-C/best_medical": _medical_best,
    "V-C/scaffold_second": _scaffold_second,
    "V-C/table4_cells": _table4_cells,
    "V-A5/two_most_challenging": _two_most_challenging,
    "IV/reselection_lacks_labels": _reselection_lacks_labels,
}


# ------------------------------------------------------------------------------ label-only: the studies

ROOT = Path(__file__).resolve().parents[1]
#: Rounds over which the paper (v1) estimated its coverage probabilities ("over 500 rounds").
PAPER_COVERAGE_DRAWS = 500
#: Partition seeds of the coverage margin's between-partition spread, disjoint from the judged seeds.
COVERAGE_SPREAD_SEEDS = tuple(range(100, 110))


def book_parameters(name: str, smoke: bool = False) -> dict:
    """The parameters of page ``name`` as the book runs it: the notebook's defaults updated by its runs.yaml entry
    (and by its ``smoke`` overrides when ``smoke``)."""
    import ast
    import json

    import yaml

    entry = next(r for r in yaml.safe_load((ROOT / "runs.yaml").read_text())["runs"] if r["name"] == name)
    nb = json.loads((ROOT / entry["notebook"]).read_text())
    cell = next(c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", []))
    values = {}
    for node in ast.parse("".join(cell["source"])).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        values[target.id] = ast.literal_eval(node.value)
    values.update(entry.get("parameters", {}))
    if smoke:
        values.update(entry.get("smoke", {}))
    return values


def _fig1_study(p) -> dict:
    from fedlib.data.profiles import get_profile
    from repro import label_tables

    keys = ("num_clients", "clients_per_round", "num_rounds", "seeds", "buffer_fraction", "dc_num_random", "dc_target")
    traces = label_tables.fig1_traces(p["profile"], p["partition"], **{k: p[k] for k in keys})
    return {"traces": traces, "num_classes": get_profile(p["profile"]).num_classes}


def _table6_study(p) -> dict:
    from fedlib.data.partition import parse_partition
    from repro import label_tables
    from repro.label_studies import federation_counts

    keys = ("buffer_fractions", "num_clients", "clients_per_round", "num_rounds", "seeds")
    table, per_seed, picks = label_tables.table6(
        p["profiles"], p["dataset_names"], p["partitions"], **{k: p[k] for k in keys}
    )
    federations = {}
    for profile, name in zip(p["profiles"], p["dataset_names"]):
        for part in p["partitions"]:
            spec = parse_partition(part)
            for seed in p["seeds"]:
                federations[(name, part, seed)] = federation_counts(
                    profile,
                    spec["scheme"],
                    p["num_clients"],
                    seed,
                    beta=spec["beta"],
                    classes_per_client=spec["classes_per_client"],
                )
    return {"table": table, "per_seed": per_seed, "picks": picks, "federations": federations}


def coverage_common(p) -> dict:
    """The keyword arguments of the coverage page's studies."""
    keys = ("pool_sizes", "subset_sizes", "num_rounds", "seeds", "beta", "buffer_fraction", "max_redraws")
    return {k: p[k] for k in keys}


def coverage_extras(profiles, dataset_names, common: Mapping) -> dict:
    """What the coverage statements need beside the page's per-seed rows: ``spread`` (CIFAR-10 at the cells
    the paper states, on :data:`COVERAGE_SPREAD_SEEDS`: the margin's between-partition spread) and ``standard``
    (every data set at K = 100, M = 10, the paper's standard pool); ``common``: the page's study arguments."""
    from repro.label_studies import coverage_study

    stated = sorted({m for (ds, _, m), v in paper_values.COVERAGE_V1.items() if v > 0})
    spread = coverage_study(
        profiles[list(dataset_names).index("CIFAR-10")],
        **{
            **common,
            "subset_sizes": stated,
            "seeds": COVERAGE_SPREAD_SEEDS,
            "max_redraws": 20 * common["max_redraws"],  # accepts the first feasible draw: only the cost changes
        },
    ).assign(dataset="CIFAR-10")
    standard = pd.concat(
        [
            coverage_study(prof, **{**common, "pool_sizes": [100], "subset_sizes": [10]}).assign(dataset=name)
            for prof, name in zip(profiles, dataset_names)
        ],
        ignore_index=True,
    )
    return {"spread": spread, "standard": standard}


def _coverage_study(p) -> dict:
    from repro import label_tables

    common = coverage_common(p)
    table, rows = label_tables.coverage_table(p["profiles"], p["dataset_names"], per_seed=True, **common)
    fine, fine_rows = label_tables.fine_coverage(p["fine_classes"], p["fine_per_class"], per_seed=True, **common)
    return {
        "table": table,
        "per_seed": rows,
        "fine": fine,
        "fine_rows": fine_rows,
        **coverage_extras(p["profiles"], p["dataset_names"], common),
    }


def _table5_study(p) -> dict:
    from repro.communication import paper_count_reconstruction, table_v

    table = table_v()
    rebuilt = [paper_count_reconstruction(m, c) for m, c in zip(table["model"], table["C"])]
    return {"table": table, "rebuilt": rebuilt, "decimals": p["decimals"]}


def lying_study(p, *, clients_per_round=None, buffer_sizes=None) -> pd.DataFrame:
    """The lying-clients page's label-only runs of one uniform liar without a defence (the rows the §VI
    statements read), at the page's parameters (``clients_per_round``, ``buffer_sizes``: others)."""
    from repro.adversarial import LiarSpec, share_table

    return share_table(
        p["profile"],
        p["partitions"],
        threats={"uniform": LiarSpec(1, "uniform", p["inflation"], "honest")},
        defences={"none": {}},
        num_clients=p["num_clients"],
        clients_per_round=p["clients_per_round"] if clients_per_round is None else clients_per_round,
        num_rounds=p["num_rounds"],
        buffer_sizes=p["buffer_sizes"] if buffer_sizes is None else buffer_sizes,
        seeds=p["seeds"],
    )


def _paper_buffer(partition: str, num_clients: int) -> int:
    """The paper's buffer size Q (§V-A5) in clients: 50 % of K for Dir(0.1), 70 % for C = 2."""
    return int(round(tiers.buffer_fraction(partition) * num_clients))


def lying_extras(p: Mapping) -> dict:
    """What the §VI statements need beside the page's study: one uniform liar at the paper's buffer size, at the
    page's M and at M = 4 (``paper_q``); ``p``: the page's parameters."""
    paper_q = sorted({_paper_buffer(part, p["num_clients"]) for part in p["partitions"]})
    by_m = {m: lying_study(p, clients_per_round=m, buffer_sizes=paper_q) for m in (p["clients_per_round"], 4)}
    return {"paper_q": by_m, "num_clients": p["num_clients"]}


def _lying_study(p) -> dict:
    return {"study": lying_study(p), **lying_extras(p)}


def _greedy_gap_study(p) -> dict:
    """The greedy-gap page's stored per-round table of the paper's settings (``scripts/greedy_gap.py``)."""
    from repro import greedy_gap

    return {"paper": pd.read_csv(greedy_gap.table_path("paper", p["results_dir"]))}


#: label-only page -> its studies from the page's parameters (:func:`book_parameters`).
LABEL_PAGES = {
    "entropy_trace": _fig1_study,
    "buffer_diversity": _table6_study,
    "label_coverage": _coverage_study,
    "communication_cost": _table5_study,
    "lying_clients": _lying_study,
    "greedy_gap": _greedy_gap_study,
}


#: The paper's CIFAR-style federations (§V-A5): profile, the paper's name, K and M.
PAPER_FEDERATIONS = (("cifar10", 100, 10), ("cifar100-20", 100, 10), ("cinic10", 200, 20))
#: FedEntOpt with no buffer (Q = 0) in the selection study.
NO_BUFFER = "FedEntOpt (Q = 0)"
#: The selection study (no page of its own): the paper's rounds and seeds; its smoke run is seconds long.
SELECTION = {"num_rounds": 500, "seeds": (0, 1, 2)}
SELECTION_SMOKE = {"num_rounds": 20, "seeds": (0,)}


#: The studies of statements no page shows (§IV's buffer bound, §V-B2's one draw, §VI's sparse clients, v1's pool
#: limit): the paper's rounds and seeds; ``empty_draws`` single Dir(0.1) draws per seed and pool size.
EXTRAS = {"num_rounds": 500, "seeds": (0, 1, 2), "pool_seeds": (0, 1, 2, 3, 4), "empty_draws": 40}
EXTRAS_SMOKE = {"num_rounds": 20, "seeds": (0, 1), "pool_seeds": (0, 1), "empty_draws": 3}
#: §VI's sparse setting: near single-class clients (C = 1) at M = C, the data sets of §V-E's buffer study, Q as a share
#: of K: 70 % (§V-A5's for quantity skew) and Table VI's 25 % and 75 %.
SPARSE = {"profiles": ("cifar10", "cifar100-20"), "num_clients": 100, "buffer_fractions": (0.25, 0.7, 0.75)}
#: v1 §V-B5's pool sizes: its largest K and the next step beyond it, on CIFAR-10 and CIFAR-100 training labels.
POOL_LIMIT = {"profiles": ("cifar10", "cifar100-20"), "pool_sizes": (200, 250), "beta": 0.1}


def _sparse_study(p) -> pd.DataFrame:
    """FedEntOpt on C = 1 federations at M = C (:data:`SPARSE`): one row per (dataset, buffer_pct, seed) of
    :func:`repro.label_studies.buffer_study` (h_norm, coverage, ...)."""
    from fedlib.data.profiles import get_profile
    from repro.label_studies import buffer_study

    frames = []
    for profile in SPARSE["profiles"]:
        summary, _ = buffer_study(
            profile,
            "quantity",
            buffer_fractions=SPARSE["buffer_fractions"],
            num_clients=SPARSE["num_clients"],
            clients_per_round=get_profile(profile).num_classes,
            num_rounds=p["num_rounds"],
            seeds=p["seeds"],
            classes_per_client=1,
        )
        frames.append(summary.assign(dataset=reporting.paper_dataset(profile)))
    return pd.concat(frames, ignore_index=True)


def _empty_client_study(p) -> pd.DataFrame:
    """One row per (dataset, K, seed) of :data:`POOL_LIMIT`: the share of single Dir(0.1) draws with an empty
    client (:func:`repro.label_studies.empty_client_draws`)."""
    from repro.label_studies import empty_client_draws

    rows = [
        {
            "dataset": reporting.paper_dataset(profile),
            "num_clients": k,
            "seed": seed,
            "value": empty_client_draws(profile, k, seed, beta=POOL_LIMIT["beta"], draws=p["empty_draws"]),
        }
        for profile in POOL_LIMIT["profiles"]
        for k in POOL_LIMIT["pool_sizes"]
        for seed in p["pool_seeds"]
    ]
    return pd.DataFrame(rows)


def _extras_study(p) -> dict:
    """The studies of :data:`EXTRAS`: ``sparse`` (:func:`_sparse_study`) and ``empty_clients``
    (:func:`_empty_client_study`)."""
    return {"sparse": _sparse_study(p), "empty_clients": _empty_client_study(p), "num_rounds": p["num_rounds"]}


def _selection_study(p) -> dict:
    """KL's, FedEntOpt's (buffer Q of §V-A5, and Q = 0: :data:`NO_BUFFER`) and random selection's picks in each of
    the paper's CIFAR-style federations, both partitions, ``p["seeds"]``: ``traces`` (dataset, partition, seed ->
    {method: SelectionTrace}) and ``counts`` (dataset, partition, seed -> the federation's (K, C) label counts)."""
    from fedlib.data.partition import parse_partition
    from fedlib.label_only.simulate import run_selection
    from fedlib.selection.selectors import make_selector
    from repro.label_studies import federation_counts

    traces, counts = {}, {}
    for profile, k, m in PAPER_FEDERATIONS:
        for part in tiers.PARTITIONS:
            spec = parse_partition(part)
            for seed in p["seeds"]:
                c = federation_counts(
                    profile, spec["scheme"], k, seed, beta=spec["beta"], classes_per_client=spec["classes_per_client"]
                )
                key = (reporting.paper_dataset(profile), part, seed)
                counts[key] = c
                fedentopt = make_selector("fedentopt", buffer_fraction=tiers.buffer_fraction(part))
                no_buffer = make_selector("fedentopt", buffer_size=0)
                traces[key] = {
                    name: run_selection(c, sel, m, p["num_rounds"], seed=seed)
                    for name, sel in (("KL", "kl"), (REF, fedentopt), (NO_BUFFER, no_buffer), ("Random", "random"))
                }
    return {"traces": traces, "counts": counts}


@functools.lru_cache(maxsize=None)
def label_study(page: str, smoke: bool = False) -> dict:
    """The studies of one label-only page (:data:`LABEL_PAGES`) at the book's parameters (``smoke``: the page's
    smoke ones), of the selection study (``"selection"``, :data:`SELECTION`) or of the statements no page shows
    (``"extras"``, :data:`EXTRAS`), computed once per process."""
    if page == "selection":
        return _selection_study(SELECTION_SMOKE if smoke else SELECTION)
    if page == "extras":
        return _extras_study(EXTRAS_SMOKE if smoke else EXTRAS)
    return LABEL_PAGES[page](book_parameters(page, smoke))


def label_studies(smoke: bool = False) -> dict:
    """page -> its studies (:func:`label_study`) for every label-only page, the selection study and the studies of
    statements no page shows (``"extras"``, :data:`EXTRAS`)."""
    return {page: label_study(page, smoke) for page in (*LABEL_PAGES, "selection", "extras")}


# ---------------------------------------------------------------------------- label-only: the statements


def _seed_frame(series: pd.Series, **cells) -> pd.DataFrame:
    """A per-seed series as a frame of ``value`` with the seed and the given setting columns."""
    return series.rename("value").reset_index().assign(**cells)


def _fig1(study):
    t, c = study["traces"], study["num_classes"]
    return t, c, math.log2(c - 1)


def _fig1_above_threshold(studies, s, table):
    t, _, bits = _fig1(studies["entropy_trace"])
    ours = t[t["method"] == REF]
    return rules.exact(_seed_frame((ours["entropy"] > bits).groupby(ours["seed"]).mean()), 1.0)


def _fig1_covers(studies, s, table):
    t, _, _ = _fig1(studies["entropy_trace"])
    ours = t[t["method"] == REF]
    return rules.exact(_seed_frame(ours["covers"].astype(float).groupby(ours["seed"]).mean()), 1.0)


def _entropy_implies_coverage(studies, s, table):
    t, _, bits = _fig1(studies["entropy_trace"])
    miss = (t["entropy"] > bits) & ~t["covers"].astype(bool)
    return rules.exact(_seed_frame(miss.astype(float).groupby(t["seed"]).sum()), 0.0)


def _fig1_per_seed(traces, stat: str) -> pd.DataFrame:
    per = traces.groupby(["method", "seed"])["entropy"].agg(stat).rename("value").reset_index()
    return per[per["method"].isin([REF, "Random"])]


def _fig1_above_random(studies, s, table):
    t, _, _ = _fig1(studies["entropy_trace"])
    mean = apply_rule(s, table, _fig1_per_seed(t, "mean"), [(REF, "Random")], unit=" bits")
    pairs = t[t["method"].isin([REF, "Random"])].pivot_table(
        index=["seed", "round"], columns="method", values="entropy"
    )
    every = (pairs[REF] >= pairs["Random"]).astype(float).groupby(level="seed").mean()
    return rules.join([mean, rules.exact(_seed_frame(every), 1.0)])


def _fig1_low_variance(studies, s, table):
    t, _, _ = _fig1(studies["entropy_trace"])
    return apply_rule(s, table, _fig1_per_seed(t, "std"), [(REF, "Random")], unit=" bits")


def _hnorm(studies):
    return studies["buffer_diversity"]["per_seed"]


def _hnorm_cells(studies, s, table):
    f = _hnorm(studies)
    paper = paper_values.table_frame("VI").set_index(["dataset", "partition", "buffer_pct"])["paper_hnorm_mean"]
    key = pd.MultiIndex.from_frame(f[["dataset", "partition", "buffer_pct"]])
    d = f.assign(method="ours - the paper's", value=f["h_norm"].to_numpy() - paper.reindex(key).to_numpy())
    d = d[["dataset", "partition", "buffer_pct", "method", "seed", "value"]].dropna(subset=["value"])
    return apply_rule(s, table, d, [("ours - the paper's", None)], unit="")


def _hnorm_rises(studies, s, table):
    f = _hnorm(studies)[["dataset", "partition", "buffer_pct", "seed", "h_norm"]].rename(columns={"h_norm": "value"})
    qs = sorted(set(f["buffer_pct"]))
    paper = paper_values.table_frame("VI").rename(columns={"paper_hnorm_mean": "value"}).assign(seed=0)
    return apply_rule(
        s, table, f, list(zip(qs[1:], qs[:-1])), paper=paper_gap(paper, "buffer_pct"), compare="buffer_pct", unit=""
    )


def _every_client(studies, s, table):
    f = _hnorm(studies)[["dataset", "partition", "buffer_pct", "seed", "never_picked"]]
    return rules.exact(f.rename(columns={"never_picked": "value"}), 0.0)


def _coverage_cifar10(studies, s, table):
    from statistics import NormalDist

    cov = studies["label_coverage"]
    z = NormalDist().inv_cdf(1 - table.alpha / 2)
    spread = cov["spread"].groupby(["num_clients", "clients_per_round"])["random_coverage"].std(ddof=1)
    rows = cov["per_seed"][cov["per_seed"]["dataset"] == "CIFAR-10"]
    out = []
    for (ds, k, m), p in paper_values.COVERAGE_V1.items():
        if ds != "CIFAR-10" or (k, m) not in spread.index:
            continue
        cell = rows[(rows["num_clients"] == k) & (rows["clients_per_round"] == m)]
        se_paper = math.sqrt(p * (1 - p) / PAPER_COVERAGE_DRAWS)
        margin = z * math.hypot(se_paper, float(spread.loc[(k, m)]))
        d = pd.DataFrame(
            {
                "num_clients": k,
                "clients_per_round": m,
                "method": "ours - the paper's",
                "seed": cell["seed"],
                "value": cell["random_coverage"] - p,
            }
        )
        out.append(rules.equal_within(d, ("ours - the paper's", None), margin=margin))
    return rules.join(out)


def _coverage_cifar100(studies, s, table):
    rows = studies["label_coverage"]["per_seed"]
    return _zero_coverage(rows[rows["dataset"] == "CIFAR-100"], s, table)


def fine_label_explanation(studies, table) -> rules.Judgement:
    """Our explanation of the paper's 0 % for CIFAR-100 (that it counted the 100 fine labels) held to the
    statement's own rule: v1/coverage_cifar100's one-sided margin on the fine-label coverage of every (K, M)."""
    return _zero_coverage(studies["label_coverage"]["fine_rows"], table.by_id("v1/coverage_cifar100"), table)


def _zero_coverage(rows, s, table):
    """P(a random subset holds every class) per (K, M) and seed, judged by ``s``'s rule ("0 %": at most the
    paper's rounding)."""
    d = pd.DataFrame(
        {
            "num_clients": rows["num_clients"],
            "clients_per_round": rows["clients_per_round"],
            "method": "ours",
            "seed": rows["seed"],
            "value": rows["random_coverage"],
        }
    )
    return apply_rule(s, table, d, [("ours", None)], unit="")


def _large_pools_lower_coverage(studies, s, table):
    cov = studies["label_coverage"]
    rows = pd.concat([cov["per_seed"], cov["standard"]], ignore_index=True)
    rows = rows.assign(method=[f"K{k}/M{m}" for k, m in zip(rows["num_clients"], rows["clients_per_round"])])
    d = rows[["dataset", "method", "seed", "random_coverage"]].rename(columns={"random_coverage": "value"})
    std = [x for x in dict.fromkeys(d["method"]) if x == "K100/M10"]
    pairs = [(m, std[0]) for m in dict.fromkeys(d["method"]) if std and m != std[0]]
    return apply_rule(s, table, d, pairs, unit="")


def _table5(studies):
    return studies["communication_cost"]["table"]


def _t5_frame(t, value, *cells) -> pd.DataFrame:
    return pd.DataFrame({**{c: t[c] for c in cells}, "value": value})


def _labels_4ck(studies, s, table):
    t = _table5(studies)
    f = _t5_frame(t, t["labels_mb"], "dataset", "model").assign(paper=t["paper_labels_mb"])
    return rules.exact(f, "paper", tolerance=5e-5)


def _model_sizes(studies, s, table):
    t, dec = _table5(studies), studies["communication_cost"]["decimals"]
    f = _t5_frame(t, t["model_mb"].round(dec), "dataset", "model").assign(paper=t["paper_model_mb"].round(dec))
    return rules.exact(f, "paper")


def _orders_of_magnitude(studies, s, table):
    t = _table5(studies)
    return rules.exact(_t5_frame(t, t["ratio"]), 100.0, relation="at_least")


def _labels_once_minimal(studies, s, table):
    t = _table5(studies)
    return rules.exact(_t5_frame(t, t["ratio"], "dataset", "model"), 1.0, relation="above")


def _negligible_one_time(studies, s, table):
    """4CK over R x M x 4p at the paper tier's R and M of each data set (medical: Table IV's set-up)."""
    t = _table5(studies)
    ours = {
        reporting.paper_dataset(d): d
        for d in ("cifar10", "cinic10", "cifar100-20", "pathmnist", "tissuemnist", "brain-tumor-mri")
    }
    paper = tiers.get_tier("paper")
    total = []
    for ds, k in zip(t["dataset"], t["K"]):
        name = ours.get(ds, ds)
        over = paper.dataset_overrides.get(name, {})
        medical = paper.medical and name in paper.medical["datasets"]
        rounds = paper.medical["rounds"] if medical else paper.base["rounds"]
        m = over.get("clients_per_round", paper.base["clients_per_round"])
        total.append(rounds * m)
    value = t["labels_bytes"] / (pd.Series(total, index=t.index) * t["model_bytes"])
    return rules.exact(_t5_frame(t, value, "dataset", "model"), 0.01, relation="below")


def _ratio_column(studies, s, table):
    from repro.communication import label_bytes, model_bytes

    t, rebuilt = _table5(studies), studies["communication_cost"]["rebuilt"]
    ratio = [model_bytes(p) / label_bytes(c, k) for p, c, k in zip(rebuilt, t["C"], t["K"])]
    sig4 = [float(f"{r:.4g}") for r in ratio]
    f = _t5_frame(t, sig4, "dataset", "model").assign(paper=t["paper_ratio"])
    return rules.exact(f, "paper")


def _share(frame: pd.DataFrame) -> pd.Series:
    return frame["liar_max"] / frame["num_rounds"]


def _buffer_mitigates_adversaries(studies, s, table):
    st = studies["lying_clients"]["study"]
    st = st[(st["threat"] == "uniform") & (st["defence"] == "none") & (st["num_liars"] == 1)]
    f = st.assign(value=_share(st))[["partition", "Q", "seed", "value"]]
    qs = sorted(set(f["Q"]))
    return apply_rule(s, table, f, [(qs[0], qs[-1])], compare="Q", unit="")


def _liars_misguide(studies, s, table):
    lying = studies["lying_clients"]
    m = max(lying["paper_q"])
    st = _at_paper_q(lying["paper_q"][m], lying["num_clients"])
    name = "liar share - M / K"
    f = st.assign(method=name, value=_share(st) - st["fair"] / st["num_rounds"])[
        ["partition", "method", "seed", "value"]
    ]
    return apply_rule(s, table, f, [(name, None)], unit="")


def _participation_limits_adversaries(studies, s, table):
    lying = studies["lying_clients"]
    by_m = lying["paper_q"]
    rows = [_at_paper_q(st, lying["num_clients"]).assign(M=m) for m, st in by_m.items()]
    f = pd.concat(rows, ignore_index=True)
    f = f.assign(value=_share(f))[["partition", "M", "seed", "value"]]
    hi, lo = max(by_m), min(by_m)
    return apply_rule(s, table, f, [(hi, lo)], compare="M", unit="")


def _at_paper_q(st: pd.DataFrame, num_clients: int) -> pd.DataFrame:
    """The rows of a share table at the paper's buffer size of their partition."""
    return st[[q == _paper_buffer(part, num_clients) for part, q in zip(st["partition"], st["Q"])]]


def _profiles(statement) -> dict:
    """Data set (the paper's name) -> fedlib's label profile, for every data set the paper uses (None where
    fedlib has no verified profile)."""
    from fedlib.data.profiles import UNAVAILABLE_PROFILES, get_profile

    names = ("cifar10", "cifar100-20", "cinic10", "pathmnist", "tissuemnist", "brain-tumor-mri")
    return {reporting.paper_dataset(n): None if n in UNAVAILABLE_PROFILES else get_profile(n) for n in names}


def _per_dataset(values: Mapping, expected) -> pd.DataFrame:
    rows = [{"dataset": ds, "value": np.nan if v is None else float(v)} for ds, v in values.items()]
    f = pd.DataFrame(rows)
    return f.assign(paper=[expected[ds] for ds in f["dataset"]]) if isinstance(expected, Mapping) else f


def _uniform(split: str):
    def judge(studies, s, table):
        counts = {
            ds: None if p is None or getattr(p, split) is None else max(getattr(p, split)) / min(getattr(p, split))
            for ds, p in _profiles(s).items()
        }
        return rules.exact(_per_dataset(counts, None), 1.0)

    return judge


#: The number of classes of each data set, as the paper states them (§V-A1, Table V's C column).
_PAPER_CLASSES = {
    "CIFAR-10": 10,
    "CIFAR-100": 20,
    "CINIC-10": 10,
    "PathMNIST": 9,
    "TissueMNIST": 8,
    "Brain-Tumor MRI": 4,
}


def _class_counts(studies, s, table):
    from fedlib.data.profiles import UNAVAILABLE_PROFILES

    counts = {ds: None if p is None else p.num_classes for ds, p in _profiles(s).items()}
    if counts.get("TissueMNIST") is None and "tissuemnist" in UNAVAILABLE_PROFILES:
        counts["TissueMNIST"] = None
    return rules.exact(_per_dataset(counts, _PAPER_CLASSES), "paper")


def _participation_2_5pct(studies, s, table):
    """M / K over the paper tier's large-pool grid, rounded half up to whole percent: lowest 2, highest 5."""
    pools = tiers.get_tier("paper").large_pools
    rates = [math.floor(100 * m / k + 0.5) for k in pools["num_clients"] for m in pools["clients_per_round"]]
    f = pd.DataFrame({"end": ["lowest", "highest"], "value": [min(rates), max(rates)], "paper": [2, 5]})
    return rules.exact(f, "paper")


def _dp_same_cost(studies, s, table):
    """Bytes of one client's noisy upload (its C float32 values from the Laplace mechanism) against 4C."""
    from fedlib.selection.privacy import laplace_counts
    from repro.communication import label_bytes

    rows = []
    for ds, p in _profiles(s).items():
        if p is None:
            continue
        noisy = laplace_counts(np.asarray([p.train_counts]), 0.5, rng=np.random.default_rng(0)).astype(np.float32)
        rows.append({"dataset": ds, "value": noisy[0].nbytes, "paper": label_bytes(p.num_classes, 1)})
    return rules.exact(pd.DataFrame(rows), "paper")


def _selection(studies):
    return studies["selection"]


def _per_federation(studies, value, methods=None) -> pd.DataFrame:
    """One row per (dataset, partition, seed) of the selection study: ``value(traces, counts, partition)``
    (``traces``: method -> SelectionTrace); with ``methods``, one row per method of them (column ``method``):
    ``value(trace, counts, partition)`` of that method's trace."""
    st = _selection(studies)
    rows = []
    for (ds, part, seed), by in st["traces"].items():
        cell = {"dataset": ds, "partition": part, "seed": seed}
        counts = st["counts"][(ds, part, seed)]
        if methods is None:
            rows.append({**cell, "value": float(value(by, counts, part))})
        else:
            rows += [{**cell, "method": m, "value": float(value(by[m], counts, part))} for m in methods]
    return pd.DataFrame(rows)


def _all_classes_exposed(studies, s, table):
    return rules.exact(_per_federation(studies, lambda tr, c, _: tr[REF].covers.mean()), 1.0)


def _kl_same_subset(studies, s, table):
    distinct = lambda tr, c, _: len({tuple(sorted(r)) for r in tr["KL"].picked})  # noqa: E731
    return rules.exact(_per_federation(studies, distinct), 1.0)


def _never_picked_share(trace, counts) -> float:
    """The share of the federation's training samples held by clients the selector never picked."""
    sizes = np.asarray(counts.sum(axis=1)).ravel()
    picked = np.zeros(sizes.size, dtype=bool)
    picked[trace.picked[trace.picked >= 0]] = True
    return float(sizes[~picked].sum() / sizes.sum())


def _kl_excludes_data(studies, s, table):
    f = _per_federation(studies, lambda tr, c, _: _never_picked_share(tr, c), methods=("KL", REF))
    return apply_rule(s, table, f, [("KL", REF)], unit="")


def _greedy_raises_entropy(studies, s, table):
    """Per federation: the share of FedEntOpt's greedy steps that do not lower the pooled entropy."""
    from repro.greedy_steps import entropy_rise_share

    f = _per_federation(studies, lambda tr, c, _: entropy_rise_share(c, tr), methods=(REF,))
    return rules.exact(f.drop(columns="method"), 1.0)


def _complements_missing_labels(studies, s, table):
    """Per federation, over the greedy steps where a selectable client holds a class the picks so far miss:
    the share of FedEntOpt's picks that add one minus a uniform pick's chance of adding one."""
    from repro.greedy_steps import missing_label_steps

    def lead(trace, counts, partition):
        share, chance, _ = missing_label_steps(counts, trace, _paper_buffer(partition, counts.shape[0]))
        return share - chance

    name = "FedEntOpt's pick - a uniform pick"
    f = _per_federation(studies, lead, methods=(REF,)).assign(method=name)
    return apply_rule(s, table, f, [(name, None)], unit="")


def _deterministic_after_first(studies, s, table):
    """Per federation: the share of FedEntOpt's rounds picked again exactly from their first pick and buffer."""
    from fedlib.selection.selectors import make_selector
    from repro.greedy_steps import replay_share

    def again(trace, counts, partition):
        return replay_share(counts, trace, make_selector("fedentopt", buffer_fraction=tiers.buffer_fraction(partition)))

    return rules.exact(_per_federation(studies, again, methods=(REF,)).drop(columns="method"), 1.0)


def _buffer_prevents_repeats(studies, s, table):
    """Per federation, the share of rounds whose subset repeats an earlier round's: none at the paper's Q (exact),
    and fewer than with no buffer (the direction of Q = 0 minus the paper's Q)."""
    from repro.greedy_steps import repeated_subset_share

    f = _per_federation(studies, lambda tr, c, _: repeated_subset_share(tr), methods=(REF, NO_BUFFER))
    none = rules.exact(f[f["method"] == REF].drop(columns="method"), 0.0)
    return rules.join([none, apply_rule(s, table, f, [(NO_BUFFER, REF)], unit="")])


def divergence_from_global(counts, trace) -> float:
    """The KL divergence in bits of each round's pooled label distribution from the federation's, mean over rounds."""
    c = np.asarray(counts.todense() if hasattr(counts, "todense") else counts, dtype=float)
    g = c.sum(axis=0) / c.sum()
    out = []
    for row in trace.picked:
        pooled = c[row[row >= 0]].sum(axis=0)
        p = pooled / pooled.sum()
        out.append(float(np.sum(p[p > 0] * np.log2(p[p > 0] / g[p > 0]))))
    return float(np.mean(out))


def _closer_to_global(studies, s, table):
    """Per federation: :func:`divergence_from_global` of FedEntOpt's picks and of random selection's, per seed."""
    f = _per_federation(studies, lambda tr, c, _: divergence_from_global(c, tr), methods=(REF, "Random"))
    return apply_rule(s, table, f, [(REF, "Random")], unit=" bits")


def greedy_step_summary(studies) -> pd.DataFrame:
    """Per (data set, partition, seed) of the selection study, what FedEntOpt's steps did (:mod:`repro.greedy_steps`):
    the share of greedy steps that did not lower the pooled entropy, of rounds repeating an earlier subset at the
    paper's Q and at Q = 0, and of greedy picks adding a missing class beside a uniform pick's chance."""
    from repro.greedy_steps import entropy_rise_share, missing_label_steps, repeated_subset_share

    steps = {}  # one replay of the missing labels per federation, for both of its columns

    def missing(part):
        def value(tr, c, p):
            if id(tr[REF]) not in steps:
                steps[id(tr[REF])] = missing_label_steps(c, tr[REF], _paper_buffer(p, c.shape[0]))
            return steps[id(tr[REF])][part]

        return value

    columns = {
        "greedy steps not lowering H": lambda tr, c, _: entropy_rise_share(c, tr[REF]),
        "repeated subsets (paper's Q)": lambda tr, c, _: repeated_subset_share(tr[REF]),
        "repeated subsets (Q = 0)": lambda tr, c, _: repeated_subset_share(tr[NO_BUFFER]),
        "picks adding a missing class": missing(0),
        "a uniform pick's chance": missing(1),
    }
    keys = ["dataset", "partition", "seed"]
    frames = [_per_federation(studies, f).set_index(keys)["value"].rename(name) for name, f in columns.items()]
    return pd.concat(frames, axis=1).reset_index()


def greedy_lowering(studies) -> pd.DataFrame:
    """Per (data set, partition, seed) and greedy step (2 = a round's second pick): the share of rounds in which
    FedEntOpt's pick at that step lowered the pooled entropy (:func:`repro.greedy_steps.lowering_by_step`)."""
    from repro.greedy_steps import lowering_by_step

    st = _selection(studies)
    rows = [
        {"dataset": ds, "partition": part, "seed": seed, "step": i + 2, "share": share}
        for (ds, part, seed), by in st["traces"].items()
        for i, share in enumerate(lowering_by_step(st["counts"][(ds, part, seed)], by[REF]))
    ]
    return pd.DataFrame(rows)


#: FLOPs of one candidate's score in line 9 of Algorithm 1, per class: add, normalise, log and multiply-add.
SCORE_FLOPS_PER_CLASS = 4


def selection_flops(num_clients: int, clients_per_round: int, num_classes: int) -> int:
    """An upper bound on the FLOPs of one FedEntOpt round scored plainly: every greedy step scores every client."""
    return (clients_per_round - 1) * num_clients * num_classes * SCORE_FLOPS_PER_CLASS


def _lightweight(studies, s, table):
    """Per (data set, model) of Table I: one round's selection FLOPs (:func:`selection_flops`) over the same round's
    local training FLOPs (3 forward passes a sample, E epochs of M clients of mean size N / K)."""
    from repro.cost_model import forward_flops

    rows = []
    for profile, k, m in PAPER_FEDERATIONS:
        prof = get_profile(profile)
        c, n = prof.num_classes, int(np.sum(prof.train_counts))
        for model in ("lenet5", "vgg11"):
            train = 3 * forward_flops(model, c) * 5 * m * n / k
            rows.append(
                {
                    "dataset": reporting.paper_dataset(profile),
                    "model": model,
                    "value": selection_flops(k, m, c) / train,
                }
            )
    return rules.exact(pd.DataFrame(rows), 0.01, relation="below")


def _weighted_mixture(studies, s, table):
    """Largest |L_c / ||L||_1 - sum_k (n_k / sum_j n_j) P_k(c)| over classes and 20 random subsets of M clients."""

    def gap(traces, counts, _):
        c = np.asarray(counts.todense() if hasattr(counts, "todense") else counts, dtype=float)
        rng = np.random.default_rng(0)
        worst = 0.0
        for _ in range(20):
            pick = rng.choice(c.shape[0], size=10, replace=False)
            pooled = c[pick].sum(axis=0)
            n = c[pick].sum(axis=1)
            mixture = (n[:, None] / n.sum() * (c[pick] / np.maximum(n, 1)[:, None])).sum(axis=0)
            worst = max(worst, float(np.abs(pooled / pooled.sum() - mixture).max()))
        return worst

    return rules.exact(_per_federation(studies, gap), 0.0, tolerance=1e-12, relation="at_most")


def _fewest_holding(counts, share: float = 0.9) -> float:
    """The fewest clients that hold ``share`` of a class's samples, mean over classes."""
    c = np.asarray(counts.todense() if hasattr(counts, "todense") else counts, dtype=float)
    out = []
    for col in c.T:
        ranked = np.sort(col)[::-1].cumsum()
        out.append(int(np.searchsorted(ranked, share * ranked[-1]) + 1))
    return float(np.mean(out))


def _dir_concentrated(studies, s, table):
    f = _per_federation(studies, lambda tr, c, _: _fewest_holding(c))
    f = f.rename(columns={"partition": "method"})
    return apply_rule(s, table, f, [("Dir(0.1)", "C=2")], unit=" clients")


def _laplace_scale(studies, s, table):
    """The scale fedlib's mechanism draws each component's noise with, read off its draws beside standard Laplace
    draws of the same generator (numpy scales one standard draw), at epsilon 0.5, 1 and 2; and the sensitivity."""
    from fedlib.selection.privacy import SENSITIVITY, laplace_counts

    rows = []
    for eps in (0.5, 1.0, 2.0):
        noise = laplace_counts(np.zeros((4, 10), dtype=np.int64), eps, rng=np.random.default_rng(0))
        unit = np.random.default_rng(0).laplace(0.0, 1.0, size=noise.shape)
        rows.append({"what": f"scale at epsilon {eps:g}", "value": float(np.median(noise / unit)), "paper": 1 / eps})
    rows.append({"what": "L1 sensitivity", "value": float(SENSITIVITY), "paper": 1.0})
    return rules.exact(pd.DataFrame(rows), "paper", tolerance=1e-9)


def greedy_attains_best(rounds: pd.DataFrame) -> pd.Series:
    """Per round of a :func:`repro.greedy_gap.round_gaps` table: whether the greedy pick's entropy is, within
    :data:`repro.best_subset.GAP_TOL`, that of the best subset known of the round's candidates (the swap
    search on every round, the branch and bound where it ran).  A round where neither finds better counts as
    attained: the share is an upper bound."""
    from repro.best_subset import GAP_TOL

    best = np.fmax(rounds["swap_entropy"].to_numpy(dtype=float), rounds["exact_entropy"].to_numpy(dtype=float))
    return pd.Series(best - rounds["greedy_entropy"].to_numpy(dtype=float) <= GAP_TOL, index=rounds.index)


def _attains_maximum_entropy(studies, s, table):
    """Per (data set, partition, seed) at the paper's buffer Q: the share of rounds whose greedy pick attains the
    best subset known of its candidates (:func:`greedy_attains_best`)."""
    t = studies["greedy_gap"]["paper"]
    k = int(t["candidates"].max())  # every client is a candidate in round 1: K
    t = t[[q == _paper_buffer(part, k) for part, q in zip(t["partition"], t["buffer_size"])]]
    share = greedy_attains_best(t).astype(float).groupby([t["dataset"], t["partition"], t["seed"]]).mean()
    return rules.exact(_seed_frame(share), 1.0)


def buffer_bound_rows(counts, clients_per_round: int, num_rounds: int, seed: int) -> list[dict]:
    """§IV's bound 0 < Q <= K - M on one federation: fedlib's FedEntOpt at Q = K - M (the share of rounds with M
    picks, paper: all) and Algorithm 1 as printed (:func:`repro.label_studies.algorithm1_round_sizes`) at
    Q = K - M + 1 (1 if some round falls short of M picks, the paper's "must": 1); both from the ``selection``
    stream of ``seed``."""
    from fedlib.label_only.simulate import run_selection
    from fedlib.seeds import stream_rng
    from fedlib.selection.selectors import make_selector
    from repro.label_studies import algorithm1_round_sizes

    k = np.asarray(counts).shape[0]
    q = k - clients_per_round
    trace = run_selection(
        counts,
        make_selector("fedentopt", buffer_size=q),
        clients_per_round,
        num_rounds,
        seed=stream_rng(seed, "selection"),
    )
    full = float(((trace.picked >= 0).sum(axis=1) == clients_per_round).mean())
    sizes = algorithm1_round_sizes(counts, clients_per_round, q + 1, num_rounds, rng=stream_rng(seed, "selection"))
    return [
        {"what": "rounds with M picks at Q = K - M (share)", "value": full, "paper": 1.0},
        {
            "what": "some round short of M at Q = K - M + 1 (Algorithm 1)",
            "value": float((sizes < clients_per_round).any()),
            "paper": 1.0,
        },
    ]


def _buffer_bound(studies, s, table):
    """:func:`buffer_bound_rows` on each of the paper's CIFAR-style pools (K, M) (:data:`PAPER_FEDERATIONS`,
    Dir(0.1), seed 0: nothing is sampled that an interval would need)."""
    from repro.label_studies import federation_counts

    rounds = studies["extras"]["num_rounds"]
    rows = []
    for k, m in dict.fromkeys((k, m) for _, k, m in PAPER_FEDERATIONS):
        profile = next(p for p, kk, mm in PAPER_FEDERATIONS if (kk, mm) == (k, m))
        counts = federation_counts(profile, "dirichlet", k, 0, beta=0.1)
        rows += [{"num_clients": k, "clients_per_round": m, **r} for r in buffer_bound_rows(counts, m, rounds, 0)]
    return rules.exact(pd.DataFrame(rows), "paper")


def fedconcat_budget_gap(
    total_rounds: int,
    encoder_rounds: int,
    classifier_rounds: int,
    *,
    num_clusters: int,
    model_params: int,
    classifier_params: int,
    participation: float,
) -> float:
    """FedConcat's communication minus FedAvg's over ``total_rounds``, in rounds of FedAvg, in FedConcat's cost model
    (:func:`fedlib.algorithms.fedconcat.fedconcat_round_split`: a model up and down per encoder round, the
    concatenated classifier per classifier round, the K encoders broadcast once to all N clients):
    ``T_e + (K / 2) (N / M) + (s / w) T_c - T``."""
    broadcast = num_clusters / (2.0 * participation)
    return encoder_rounds + broadcast + classifier_params / model_params * classifier_rounds - total_rounds


def _fedconcat_budget(studies, s, table):
    """The paper tier's FedConcat run of each (model, data set) of Table I: its round split as fedlib plans it
    (the algorithm's ``round_split`` on the model), by :func:`fedconcat_budget_gap`; paper: under one round."""
    import torch

    from fedlib.algorithms import make_algorithm
    from fedlib.algorithms.fedconcat import last_linear_name
    from fedlib.data.profiles import get_profile
    from fedlib.training.models import count_parameters, make_model

    paper = tiers.get_tier("paper")
    rows = []
    for model in paper.models:
        for ds in paper.table_datasets:
            cfg = tiers.tier_config("paper", method="FedConcat", dataset=ds, model=model, partition_name="Dir(0.1)")
            algo = make_algorithm("fedconcat", **(cfg.algorithm_params or {}))
            c = get_profile(ds).num_classes
            with torch.device("meta"):
                net = make_model(model, c, in_channels=3, image_size=32)
            t_e, t_c = algo.round_split(
                cfg.rounds, net, num_clients=cfg.num_clients, clients_per_round=cfg.clients_per_round
            )
            k = min(algo.hparams.num_clusters, cfg.num_clients)
            head = net.get_submodule(last_linear_name(net))
            gap = fedconcat_budget_gap(
                cfg.rounds,
                t_e,
                t_c,
                num_clusters=k,
                model_params=count_parameters(net),
                classifier_params=k * head.in_features * head.out_features + head.out_features,
                participation=cfg.clients_per_round / cfg.num_clients,
            )
            rows.append(
                {"model": reporting.paper_model(model), "dataset": reporting.paper_dataset(ds), "value": abs(gap)}
            )
    return rules.exact(pd.DataFrame(rows), 1.0, relation="below")


def cluster_round_spread(clusters, picked) -> float:
    """Largest minus smallest share of rounds in which a cluster has a picked client (``clusters``: (K,) cluster of
    each client; ``picked``: (R, M) clients per round, -1 padding)."""
    clusters = np.asarray(clusters)
    rows = np.asarray(picked)
    hit = np.zeros((rows.shape[0], int(clusters.max()) + 1), dtype=bool)
    for r, row in enumerate(rows):
        hit[r, clusters[row[row >= 0]]] = True
    share = hit.mean(axis=0)
    return float(share.max() - share.min())


def _fedconcat_clusters_uneven(studies, s, table):
    """FedConcat's 5 clusters of each federation of the selection study (k-means on the label distributions,
    ``clustering`` stream) under M uniformly random picks per round (``selection`` stream), per seed."""
    from fedlib.algorithms.fedconcat import DEFAULT_NUM_CLUSTERS, cluster_clients
    from fedlib.label_only.simulate import run_selection
    from fedlib.seeds import stream_rng

    st = _selection(studies)
    m_of = {reporting.paper_dataset(p): m for p, _, m in PAPER_FEDERATIONS}
    rows = []
    for (ds, part, seed), counts in st["counts"].items():
        clusters = cluster_clients(counts, DEFAULT_NUM_CLUSTERS, stream_rng(seed, "clustering"))
        rounds = len(next(iter(st["traces"][(ds, part, seed)].values())).entropy)
        trace = run_selection(counts, "random", m_of[ds], rounds, seed=stream_rng(seed, "selection"))
        rows.append(
            {
                "dataset": ds,
                "partition": part,
                "method": "largest - smallest",
                "seed": seed,
                "value": cluster_round_spread(clusters, trace.picked),
            }
        )
    return apply_rule(s, table, pd.DataFrame(rows), [("largest - smallest", None)], unit="")


def dp_upload_rows(
    counts, epsilon: float, clients_per_round: int, num_rounds: int, seed: int, *, negative: str
) -> list:
    """What FedEntOpt is shown over a DP run (§V-B2): the counts noised as the trainer does
    (:func:`fedlib.selection.privacy.laplace_counts`, ``label_dp`` stream of ``seed``, ``negative``), handed to
    :func:`fedlib.label_only.simulate.run_selection`; rows: the distinct count matrices the selector sees over the
    rounds (paper: 1, drawn once before round 1) and the largest difference between what it sees and the true
    counts plus one raw Laplace draw of scale 1 / epsilon from the same stream (paper: 0, no further preprocessing)."""
    from fedlib.label_only.simulate import run_selection
    from fedlib.seeds import stream_rng
    from fedlib.selection.privacy import SENSITIVITY, laplace_counts
    from fedlib.selection.selectors import FedEntOptSelector

    shown = []

    class Shown(FedEntOptSelector):
        def select(self, counts, clients_per_round, state, rng):
            shown.append(np.array(counts, dtype=float))
            return super().select(counts, clients_per_round, state, rng)

    arr = np.asarray(counts, dtype=float)
    noisy = laplace_counts(arr, epsilon, rng=stream_rng(seed, "label_dp"), negative=negative)
    run_selection(
        arr,
        Shown(buffer_fraction=0.5),
        clients_per_round,
        num_rounds,
        seed=stream_rng(seed, "selection"),
        server_counts=noisy,
    )
    raw = arr + stream_rng(seed, "label_dp").laplace(0.0, SENSITIVITY / epsilon, size=arr.shape)
    return [
        {"what": "count matrices shown over the run", "value": float(len({x.tobytes() for x in shown})), "paper": 1.0},
        {
            "what": "largest |shown - (counts + one raw draw)|",
            "value": float(max(np.abs(x - raw).max() for x in shown)),
            "paper": 0.0,
        },
    ]


def _dp_once(studies, s, table):
    """:func:`dp_upload_rows` at the paper tier's FedEntOpt (DP) settings (epsilon, its ``dp_negative``) on the
    CIFAR-10 Dir(0.1) federation of each seed, K = 100, M = 10."""
    from repro.label_studies import federation_counts

    cfg = tiers.tier_config("paper", method="FedEntOpt (DP)", dataset="cifar10", partition_name="Dir(0.1)")
    rounds, rows = studies["extras"]["num_rounds"], []
    for seed in studies["extras"]["sparse"]["seed"].unique():
        counts = federation_counts("cifar10", "dirichlet", cfg.num_clients, int(seed), beta=0.1)
        rows += [
            {**r, "seed": int(seed)}
            for r in dp_upload_rows(
                counts, cfg.label_dp_epsilon, cfg.clients_per_round, rounds, int(seed), negative=cfg.dp_negative
            )
        ]
    return rules.exact(pd.DataFrame(rows), "paper", tolerance=1e-9)


def top_holder_share(counts, times_picked) -> float:
    """Share of all picks that go to the clients holding the most samples of some class (one top holder per
    class, lowest index on ties)."""
    c = np.asarray(counts)
    top = np.unique(np.argmax(c, axis=0))
    times = np.asarray(times_picked)
    return float(times[top].sum() / times.sum())


def _buffer_excludes_concentrated(studies, s, table):
    """Table VI's runs under Dir(0.1) (the buffer-diversity page's picks per client): :func:`top_holder_share` at
    Q = 75 % and at Q = 50 % of K, per data set and seed."""
    bd = studies["buffer_diversity"]
    picks = bd["picks"][bd["picks"]["partition"] == "Dir(0.1)"]
    rows = []
    for (ds, pct, seed), sub in picks.groupby(["dataset", "buffer_pct", "seed"]):
        if pct not in (50, 75):
            continue
        times = sub.sort_values("client")["times_picked"].to_numpy()
        rows.append(
            {
                "dataset": ds,
                "buffer_pct": pct,
                "seed": seed,
                "value": top_holder_share(bd["federations"][(ds, "Dir(0.1)", seed)], times),
            }
        )
    return apply_rule(
        s,
        table,
        pd.DataFrame(rows, columns=["dataset", "buffer_pct", "seed", "value"]),
        [(75, 50)],
        compare="buffer_pct",
        unit="",
    )


def _sparse_plateau(studies, s, table):
    """FedEntOpt's share of rounds covering every class on C = 1 federations at M = C (:data:`SPARSE`, Q = 70 %)
    minus on the paper's C = 2 federations at M = 10 (the selection study, Q = 70 %), per data set and seed."""
    sparse = studies["extras"]["sparse"]
    sparse = sparse[sparse["buffer_pct"] == 70]
    paper = _per_federation(studies, lambda tr, c, _: tr[REF].covers.mean())
    paper = paper[(paper["partition"] == "C=2") & paper["dataset"].isin(set(sparse["dataset"]))]
    f = pd.concat(
        [
            sparse[["dataset", "seed"]].assign(method="C=1, M=C", value=sparse["coverage"].to_numpy()),
            paper[["dataset", "seed", "value"]].assign(method="C=2, M=10"),
        ],
        ignore_index=True,
    )
    return apply_rule(s, table, f, [("C=1, M=C", "C=2, M=10")], unit="")


def _buffer_mitigates_plateau(studies, s, table):
    """H_norm of FedEntOpt's picks on C = 1 federations at M = C (:data:`SPARSE`), Q = 75 % minus Q = 25 %."""
    f = studies["extras"]["sparse"]
    f = f[f["buffer_pct"].isin([25, 75])][["dataset", "buffer_pct", "seed", "h_norm"]].rename(
        columns={"h_norm": "value"}
    )
    return apply_rule(s, table, f, [(75, 25)], compare="buffer_pct", unit="")


def _pool_size_limit(studies, s, table):
    """The share of single Dir(0.1) draws with an empty client (:data:`POOL_LIMIT`), K = 250 minus K = 200."""
    f = studies["extras"]["empty_clients"]
    small, large = POOL_LIMIT["pool_sizes"]
    return apply_rule(s, table, f, [(large, small)], compare="num_clients", unit="")


#: statement id -> ``f(studies, statement, table)``: its judgement from the label-only studies at the paper's
#: scale (:func:`label_studies`: page -> its studies; a statement without a page reads fedlib's own data).
LABEL_ONLY: dict[str, Callable] = {
    "IV/fig1_above_threshold": _fig1_above_threshold,
    "IV/fig1_above_random": _fig1_above_random,
    "IV/fig1_low_variance": _fig1_low_variance,
    "IV/entropy_implies_coverage": _entropy_implies_coverage,
    "IV/fig1_covers_all_ten": _fig1_covers,
    "V-E/hnorm_cells": _hnorm_cells,
    "V-E/hnorm_rises": _hnorm_rises,
    "V-E/every_client": _every_client,
    "v1/coverage_cifar10": _coverage_cifar10,
    "v1/coverage_cifar100": _coverage_cifar100,
    "v1/large_pools_lower_coverage": _large_pools_lower_coverage,
    "V-D/labels_4ck": _labels_4ck,
    "V-D/model_sizes": _model_sizes,
    "V-D/orders_of_magnitude": _orders_of_magnitude,
    "IV/labels_once_minimal": _labels_once_minimal,
    "V-D/negligible_one_time": _negligible_one_time,
    "V-D/ratio_column": _ratio_column,
    "VI/buffer_mitigates_adversaries": _buffer_mitigates_adversaries,
    "VI/liars_misguide": _liars_misguide,
    "VI/participation_limits_adversaries": _participation_limits_adversaries,
    "III/uniform_global_marginal": _uniform("train_counts"),
    "V-A1/uniform_validation": _uniform("test_counts"),
    "V-A1/class_counts": _class_counts,
    "v1/participation_2_5pct": _participation_2_5pct,
    "V-D/dp_same_cost": _dp_same_cost,
    "abstract/all_classes_exposed": _all_classes_exposed,
    "II/kl_same_subset": _kl_same_subset,
    "II/kl_excludes_data": _kl_excludes_data,
    "IV/weighted_mixture": _weighted_mixture,
    "V-A5/dir_concentrated": _dir_concentrated,
    "V-B2/laplace_scale": _laplace_scale,
    "II/attains_maximum_entropy": _attains_maximum_entropy,
    "IV/buffer_bound": _buffer_bound,
    "V-A5/fedconcat_budget": _fedconcat_budget,
    "V-B1/fedconcat_clusters_uneven": _fedconcat_clusters_uneven,
    "V-B2/dp_once": _dp_once,
    "V-E/buffer_excludes_concentrated": _buffer_excludes_concentrated,
    "VI/sparse_plateau": _sparse_plateau,
    "VI/buffer_mitigates_plateau": _buffer_mitigates_plateau,
    "v1/pool_size_limit": _pool_size_limit,
    "IV/greedy_raises_entropy": _greedy_raises_entropy,
    "IV/complements_missing_labels": _complements_missing_labels,
    "IV/deterministic_after_first": _deterministic_after_first,
    "IV/buffer_prevents_repeats": _buffer_prevents_repeats,
    "III/closer_to_global": _closer_to_global,
    "VI/lightweight": _lightweight,
}
