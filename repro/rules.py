"""Rules that judge the paper's statements: a handful of functions, each the same for a pass and a miss.

Every rule takes a tidy per-seed frame (:func:`tidy`, :func:`from_group`): one row per run with its setting columns
(model, dataset, partition, clients_per_round, ...: every column but ``method``, ``seed`` and ``value``),
``method``, ``seed`` and ``value``.  It judges every setting on its own (settings are never pooled) and returns a
:class:`Judgement`: a :class:`Verdict` per comparison, per setting and overall.

Intervals are two-sided (1 - alpha) t-intervals over seeds only, the independent draws (rounds of one run are
not); seed-paired (the seeds both methods have) where the methods share a federation, Welch otherwise.  One seed
gives no interval: undecided.  ``alpha`` is :data:`ALPHA` (0.05, ``statements.yaml``'s ``alpha``) for every rule.

Each statement claims a region for a quantity; one interval decides both ways.  "reproduces": the interval lies
inside the region; "does not reproduce": it lies entirely outside; "undecided": it straddles a boundary (and shows
where its estimate leans and whether it excludes the paper's value).  Each conclusion is a one-sided test at
alpha / 2, a pass and a miss alike: for one comparison, flipping the data's sign and the statement's side leaves a
verdict as it is, flipping one of them swaps reproduces and does not reproduce (for several, "every" and "some"
swap the same way).  We use the 1 - alpha interval for the pass of an equivalence too (not the 1 - 2 alpha of a
textbook TOST): one interval, one error rate, for both conclusions of every rule.

- :func:`direction` (``a - b`` on ``side`` of 0).  Does not reproduce: the interval excludes 0 on the wrong side.
- :func:`best` (the reference above every rival in every setting): :func:`direction` against each rival.  Does not
  reproduce: some rival significantly better in some setting (at the family level below).
- :func:`magnitude` (``a - b`` "about v" / "over v" / "under v", the paper's rounding ``tolerance`` widening the
  region).  Does not reproduce: the interval is disjoint from the region.  An interval that merely contains the
  paper's number is undecided unless it fits inside the region: a wide interval confirms nothing.
- :func:`equal_within` (``|a - b| <= margin``, the margin fixed before the data from a measured spread): an
  equivalence test (TOST at alpha / 2 per side, the 1 - alpha interval inside +-margin).  Does not reproduce: the
  interval lies entirely beyond +margin or entirely below -margin.
- :func:`exact` (label-only identities and counts, no sampling): reproduces iff every row equals the paper's value
  within ``tolerance``; does not reproduce otherwise; undecided only without a value.

Several comparisons (rivals, settings) combine as the wording says.  ``combine="every"`` (the statement holds for
each): reproduces iff every part reproduces; does not reproduce iff some part lies outside at the family level
alpha / k (Bonferroni over the statement's k comparisons, so that a miss claimed from any one of k intervals is, like
the pass, wrong with probability at most alpha / 2).  ``combine="some"`` mirrors it (reproduces iff some part lies
inside at alpha / k; does not iff every part lies outside).  A combined verdict shows the numbers of its binding
comparison: of the parts with the combined verdict, for "every" the one whose estimate lies furthest towards a miss
(the pass closest to its boundary, the clearest miss, the open one leaning most towards a miss), for "some" the one
furthest towards a pass.

``paper`` gives the paper's own number for a comparison (its table): the verdict says whether our interval excludes
it, and ``paper_agrees`` whether the paper's own number fits the statement; False marks a statement the paper's own
table contradicts, not a failure of ours.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from fedlib._validate import ParameterError, check_choice

__all__ = [
    "ALPHA",
    "REPRODUCES",
    "DOES_NOT",
    "UNDECIDED",
    "VERDICTS",
    "Verdict",
    "Judgement",
    "t_interval",
    "tidy",
    "from_group",
    "direction",
    "best",
    "magnitude",
    "equal_within",
    "exact",
    "join",
    "at_least",
    "rounding",
]

#: The two-sided level of every interval and test, the one alpha of the reproduction (``statements.yaml``: ``alpha``).
ALPHA = 0.05

REPRODUCES, DOES_NOT, UNDECIDED = "reproduces", "does not reproduce", "undecided"
#: The three verdicts a rule gives (the scorecard's first three).
VERDICTS = (REPRODUCES, DOES_NOT, UNDECIDED)
NEITHER = "neither"  # ``leans`` of an estimate on the boundary (or of no estimate)

#: Columns of a stored group's per-run meta that describe where a run came from, not what it computed.
_PROVENANCE = ("key", "code_version", "git_commit", "device", "wall_seconds", "data_source", "stored_at")


# ----------------------------------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Verdict:
    """One verdict: of one comparison in one setting, of a setting, or of the whole statement (``parts``: what it
    combines).  A combined verdict carries the numbers of its binding comparison.

    ``estimate``, ``low``, ``high``: the mean and its (1 - alpha) t-interval over ``n`` seeds (low/high are
    infinite without an interval; for :func:`exact` the smallest and largest value).  ``leans``: the verdict the
    estimate alone points to ("reproduces", "does not reproduce", or "neither" on the boundary); ``distance``: the
    estimate's signed distance to the region's boundary (> 0 inside).  ``paper``: the paper's own number for the
    comparison; ``excludes_paper_value``: whether the interval excludes it (None without one); ``paper_agrees``:
    whether it fits the statement (False: the paper's own table contradicts the statement here; for a combined
    verdict, combined as its parts are: "every" needs all of them, "some" one).  ``combine``: how a combined
    verdict combines its parts ("every", "some", "at least k"; "" for a comparison); ``k``: the number of
    comparisons the family level of a comparison divides alpha by.
    """

    verdict: str
    estimate: float
    low: float
    high: float
    n: int
    leans: str
    excludes_paper_value: bool | None
    setting: tuple[tuple[str, object], ...]
    reason: str
    comparison: str = ""
    paper: float | None = None
    paper_agrees: bool | None = None
    distance: float = float("nan")
    parts: tuple[Verdict, ...] = ()
    combine: str = ""
    k: int = 1

    @property
    def setting_dict(self) -> dict:
        return dict(self.setting)

    @property
    def setting_label(self) -> str:
        """E.g. ``"model=lenet5, dataset=cifar10, partition=Dir(0.1)"`` ("all settings" for the overall one)."""
        return ", ".join(f"{k}={v}" for k, v in self.setting) if self.setting else "all settings"

    @property
    def interval(self) -> tuple[float, float]:
        return self.low, self.high


@dataclass(frozen=True)
class Judgement:
    """A rule's answer: ``overall`` (the statement), ``settings`` (one per setting, in the frame's order; each
    with its comparisons as ``parts``)."""

    rule: str
    statement: str
    overall: Verdict
    settings: tuple[Verdict, ...]

    @property
    def verdict(self) -> str:
        return self.overall.verdict

    def by_setting(self) -> dict[tuple, str]:
        """Setting (tuple of its column values) -> verdict."""
        return {tuple(v for _, v in s.setting): s.verdict for s in self.settings}

    def comparisons(self) -> list[Verdict]:
        return [p for s in self.settings for p in s.parts]

    def frame(self) -> pd.DataFrame:
        """One row per verdict: the overall one, each setting's, each comparison's (``level``)."""
        rows = []
        for level, v in (
            ("overall", self.overall),
            *((lvl, x) for s in self.settings for lvl, x in (("setting", s), *(("comparison", p) for p in s.parts))),
        ):
            rows.append(
                {
                    "level": level,
                    "setting": v.setting_label,
                    "comparison": v.comparison,
                    "verdict": v.verdict,
                    "estimate": v.estimate,
                    "low": v.low,
                    "high": v.high,
                    "n": v.n,
                    "leans": v.leans,
                    "paper": v.paper,
                    "excludes_paper_value": v.excludes_paper_value,
                    "paper_agrees": v.paper_agrees,
                    "reason": v.reason,
                }
            )
        return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------------- intervals


def t_interval(values, alpha: float = ALPHA) -> tuple[float, float, float, int]:
    """(mean, low, high, n) of ``values`` (draws: seeds, or seed-paired differences): the two-sided (1 - alpha)
    t-interval; infinite for n < 2, the point itself when every draw is alike.

    >>> m, lo, hi, n = t_interval([1.0, 2.0, 3.0])  # sd 1, t(0.975, 2) = 4.303
    >>> round(lo, 3), round(hi, 3), n
    (-0.484, 4.484, 3)
    """
    d = np.asarray(values, dtype=float)
    s = _Sample.one(d, "draws")
    return (s.estimate, *s.interval(alpha), s.n)


@dataclass(frozen=True)
class _Sample:
    """A mean (or difference of means) with its standard error and degrees of freedom."""

    estimate: float
    se: float
    df: float
    n: int
    how: str

    @classmethod
    def one(cls, d: np.ndarray, how: str) -> _Sample:
        n = int(d.size)
        mean = float(d.mean()) if n else math.nan
        se = float(d.std(ddof=1)) / math.sqrt(n) if n > 1 else math.inf
        return cls(mean, se, n - 1, n, how)

    @classmethod
    def welch(cls, a: np.ndarray, b: np.ndarray) -> _Sample:
        na, nb = int(a.size), int(b.size)
        est = float(a.mean() - b.mean()) if na and nb else math.nan
        how = f"Welch, {na} and {nb} seeds"
        if na < 2 or nb < 2:
            return cls(est, math.inf, 0, min(na, nb), how)
        va, vb = float(a.var(ddof=1)) / na, float(b.var(ddof=1)) / nb
        se = math.sqrt(va + vb)
        df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1)) if se > 0 else na + nb - 2
        return cls(est, se, df, min(na, nb), how)

    def interval(self, alpha: float) -> tuple[float, float]:
        if self.n < 2 or not math.isfinite(self.estimate) or not math.isfinite(self.se):
            return -math.inf, math.inf
        if self.se == 0:
            return self.estimate, self.estimate
        from scipy import stats

        half = float(stats.t.ppf(1 - alpha / 2, self.df)) * self.se
        return self.estimate - half, self.estimate + half


@dataclass(frozen=True)
class _Region:
    """The values a statement claims: [low, high] (``closed``) or (low, high)."""

    low: float
    high: float
    closed: bool
    text: str

    def inside(self, lo: float, hi: float) -> bool:
        if self.closed:
            return self.low <= lo and hi <= self.high
        return self.low < lo and hi < self.high

    def outside(self, lo: float, hi: float) -> bool:
        return hi < self.low or lo > self.high

    def contains(self, x: float) -> bool:
        return self.low <= x <= self.high if self.closed else self.low < x < self.high

    def distance(self, x: float) -> float:
        """Signed distance of ``x`` to the region's boundary: > 0 inside, < 0 outside, 0 on it."""
        if not math.isfinite(x):
            return math.nan
        if self.contains(x):
            return float(min(x - self.low, self.high - x))
        return -float(max(self.low - x, x - self.high, 0.0))


def _leans(distance: float) -> str:
    if not math.isfinite(distance) or distance == 0:
        return NEITHER
    return REPRODUCES if distance > 0 else DOES_NOT


def _g(x: float) -> str:
    return f"{x:+.4g}" if math.isfinite(x) else ("+inf" if x > 0 else "-inf" if x < 0 else "nan")


def _level(alpha: float) -> str:
    return f"{100 * (1 - alpha):.4g} %"


# ------------------------------------------------------------------------------------------------------- frames


def tidy(per_run: pd.DataFrame, value: str = "accuracy", *, method: str = "method", seed: str = "seed"):
    """``per_run`` (one row per run, e.g. :func:`repro.significance.per_run_final`) as the rules take
    it: ``value`` renamed ``value``, ``method`` and ``seed`` renamed so, provenance columns (``key``, commit, device,
    ...) dropped, and every other column kept as a setting column, in its order.  Raises ``ValueError`` for two
    rows of one (setting, method, seed): a run counted twice would shrink every interval."""
    out = per_run.rename(columns={value: "value", method: "method", seed: "seed"})
    missing = [c for c in ("method", "seed", "value") if c not in out.columns]
    if missing:
        raise ValueError(f"per_run has no column {missing} (columns: {list(per_run.columns)}).")
    out = out.drop(columns=[c for c in _PROVENANCE if c in out.columns])
    settings = [c for c in out.columns if c not in ("method", "seed", "value")]
    out = out[[*settings, "method", "seed", "value"]].reset_index(drop=True)
    _check_unique(out, settings)
    return out


def from_group(stored, last: int = 10) -> pd.DataFrame:
    """The tidy frame of a stored group (:func:`repro.results.load_group`): per run, the mean test
    accuracy (%) over its final ``last`` evaluated rounds, with every label column of the run (method, seed, model,
    partition, clients_per_round, ...) and its data set (from the run's configuration) as setting columns; the
    number of rounds too where it differs between runs.  Settings are never collapsed."""
    from repro.significance import per_run_final

    if stored.empty:
        return pd.DataFrame(columns=["method", "seed", "value"])
    runs = per_run_final(stored.frame[["key", "round", "test_accuracy"]], last, by=["key"])
    finals = runs.set_index("key")["accuracy"].rename("value")
    meta = stored.meta.drop(columns=[c for c in _PROVENANCE if c != "key" and c in stored.meta.columns])
    if "rounds" in meta.columns and meta["rounds"].nunique() <= 1:
        meta = meta.drop(columns="rounds")
    first = [c for c in ("model", "dataset", "partition") if c in meta.columns]
    meta = meta[[*first, *(c for c in meta.columns if c not in first)]]
    out = meta.merge(finals, left_on="key", right_index=True, how="inner")
    return tidy(out, "value")


def _check_unique(frame: pd.DataFrame, settings: Sequence[str], compare: str = "method") -> None:
    cols = [*settings, compare, "seed"] if "seed" in frame.columns else [*settings, compare]
    dup = frame.duplicated(cols, keep=False)
    if dup.any():
        raise ValueError(
            f"two rows of one setting, {compare} and seed (a run counted twice):\n{frame[dup].head(6).to_string()}"
        )


def _settings(frame: pd.DataFrame, exclude: Sequence[str]) -> list[str]:
    return [c for c in frame.columns if c not in (*exclude, *_PROVENANCE)]


def _groups(frame: pd.DataFrame, settings: list[str]):
    if not settings:
        yield (), frame
        return
    for key, sub in frame.groupby(settings, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        yield tuple(zip(settings, key)), sub


def _check(frame: pd.DataFrame, compare: str) -> list[str]:
    missing = [c for c in (compare, "seed", "value") if c not in frame.columns]
    if missing:
        raise ValueError(f"frame needs the columns {missing} (have {list(frame.columns)}); see rules.tidy.")
    if frame["value"].isna().any():
        raise ValueError("frame has rows without a value; drop or fill them first.")
    settings = _settings(frame, (compare, "seed", "value"))
    _check_unique(frame, settings, compare)
    return settings


def _resolve(x, setting: tuple, a: str, b: str | None):
    """A per-comparison parameter: a callable ``f(setting: dict, a, b)`` or the value itself."""
    if callable(x):
        x = x(dict(setting), a, b)
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


# ---------------------------------------------------------------------------------------------- the engine


Pairs = tuple[str, str | None] | Sequence[tuple[str, str | None]] | Callable[[pd.DataFrame], Sequence]


def _label(x) -> bool:
    """A method name (or value of the compared column), not a pair or a list of them."""
    return not isinstance(x, list | tuple)


def _pairs(pairs, sub: pd.DataFrame) -> list[tuple]:
    if callable(pairs):
        return list(pairs(sub))
    if isinstance(pairs, tuple) and len(pairs) == 2 and all(_label(p) for p in pairs):
        return [pairs]
    if _label(pairs):
        return [(pairs, None)]
    return [(p, None) if _label(p) else tuple(p) for p in pairs]


def _sample(sub: pd.DataFrame, a: str, b: str | None, paired: bool, compare: str) -> tuple[_Sample | None, str]:
    va = sub[sub[compare] == a].set_index("seed")["value"]
    if b is None:
        return _Sample.one(va.to_numpy(dtype=float), "one sample"), ""
    vb = sub[sub[compare] == b].set_index("seed")["value"]
    if va.empty or vb.empty:
        return None, f"no run of {a if va.empty else b}"
    if not paired:
        return _Sample.welch(va.to_numpy(dtype=float), vb.to_numpy(dtype=float)), ""
    seeds = sorted(set(va.index) & set(vb.index))
    if not seeds:
        return None, "no seed both have"
    d = va.loc[seeds].to_numpy(dtype=float) - vb.loc[seeds].to_numpy(dtype=float)
    return _Sample.one(d, "seed-paired"), ""


def _part(setting, a, b, sample, why, region, paper, alpha, k, combine, unit) -> Verdict:
    name = a if b is None else f"{a} - {b}"
    agrees = None if paper is None else bool(region.contains(float(paper)))
    if sample is None or sample.n < 2:
        est = sample.estimate if sample is not None else math.nan
        dist = region.distance(est)
        why = why or f"{sample.n if sample else 0} seed{'s' if sample and sample.n != 1 else ''}: no interval"
        return Verdict(
            UNDECIDED,
            est,
            -math.inf,
            math.inf,
            sample.n if sample else 0,
            _leans(dist),
            None if paper is None else False,
            setting,
            f"{name} {region.text}? {why}, undecided" + (f" (estimate {_g(est)}{unit})" if math.isfinite(est) else ""),
            name,
            None if paper is None else float(paper),
            agrees,
            dist,
        )
    lo, hi = sample.interval(alpha)
    flo, fhi = sample.interval(alpha / k) if k > 1 else (lo, hi)
    family = f"the statement's family level {_level(alpha / k)} (k = {k}) [{_g(flo)}, {_g(fhi)}]"
    if combine == "every":
        if region.inside(lo, hi):
            verdict, how = REPRODUCES, f"within '{region.text}'"
        elif region.outside(flo, fhi):
            verdict, how = DOES_NOT, f"entirely outside '{region.text}'" + (f", also at {family}" if k > 1 else "")
        else:
            verdict = UNDECIDED
            how = (
                f"entirely outside '{region.text}' at {_level(alpha)} but not at {family}"
                if region.outside(lo, hi)
                else f"straddles the boundary of '{region.text}'"
            )
    else:
        if region.inside(flo, fhi):
            verdict, how = REPRODUCES, f"within '{region.text}'" + (f", also at {family}" if k > 1 else "")
        elif region.outside(lo, hi):
            verdict, how = DOES_NOT, f"entirely outside '{region.text}'"
        else:
            verdict = UNDECIDED
            how = (
                f"within '{region.text}' at {_level(alpha)} but not at {family}"
                if region.inside(lo, hi)
                else f"straddles the boundary of '{region.text}'"
            )
    dist = region.distance(sample.estimate)
    excludes = None if paper is None else bool(float(paper) < lo or float(paper) > hi)
    text = (
        f"{name} = {_g(sample.estimate)} [{_g(lo)}, {_g(hi)}]{unit} ({_level(alpha)} t-interval, {sample.how}, "
        f"n = {sample.n}): {how}"
    )
    if verdict == UNDECIDED:
        text += f"; leans {_leans(dist)}"
    if paper is not None:
        text += f"; {'excludes' if excludes else 'holds'} the paper's {_g(float(paper))}"
        if not agrees:
            text += f" (the paper's own value is not '{region.text}')"
    return Verdict(
        verdict,
        sample.estimate,
        lo,
        hi,
        sample.n,
        _leans(dist),
        excludes,
        setting,
        text,
        name,
        None if paper is None else float(paper),
        agrees,
        dist,
        k=k,
    )


def _empty(setting: tuple, why: str, n: int = 0, comparison: str = "", paper: float | None = None) -> Verdict:
    """An undecided verdict without a number."""
    return Verdict(
        UNDECIDED, math.nan, -math.inf, math.inf, n, NEITHER, None, setting, f"{why}: undecided", comparison, paper
    )


def _agree(values, combine: str) -> bool | None:
    known = [v for v in values if v is not None]
    if not known:
        return None
    return all(known) if combine == "every" else any(known)


def _combine(parts: Sequence[Verdict], combine: str, setting: tuple, what: str) -> Verdict:
    """One verdict of ``parts`` as ``combine`` says, with the numbers of the binding part."""
    verdicts = [p.verdict for p in parts]
    if combine == "every":
        order, pick = (DOES_NOT, UNDECIDED, REPRODUCES), min
    else:
        order, pick = (REPRODUCES, UNDECIDED, DOES_NOT), max
    verdict = next(v for v in order if v in verdicts)
    binding = pick(
        (p for p in parts if p.verdict == verdict),
        key=lambda p: p.distance if math.isfinite(p.distance) else 0.0,
    )
    tally = ", ".join(f"{verdicts.count(v)} {v}" for v in VERDICTS if v in verdicts)
    agrees = _agree([p.paper_agrees for p in parts], combine)
    if len(parts) > 1:
        where = binding.setting_label + ": " if binding.setting != setting else ""
        reason = f"{combine} {what}: {tally}; binding: {where}{binding.reason}"
    else:
        reason = binding.reason
    if agrees is False:  # the paper's own numbers do not bear the statement out: marked, not our failure
        n_against = sum(p.paper_agrees is False for p in parts)
        count = f"{n_against} of {len(parts)} {what}s"
        reason += " || the paper's own table contradicts the statement " + (
            f"here ({count})" if setting else f"in {count}"
        )
    return replace(
        binding,
        verdict=verdict,
        setting=setting,
        reason=reason,
        paper_agrees=agrees,
        parts=tuple(parts),
        combine=combine,
    )


def _modes(combine) -> tuple[str, str]:
    """(within a setting, across settings) of ``combine``: one word for both, or a pair."""
    within, across = (combine, combine) if isinstance(combine, str) else tuple(combine)
    if within not in ("every", "some") or across not in ("every", "some"):
        raise ParameterError(None, "combine", combine, "'every', 'some' or a pair of them")
    return within, across


def _judge(frame, pairs, region_of, rule, statement, *, paper, paired, combine, alpha, compare, unit) -> Judgement:
    within, across = _modes(combine)
    if not 0 < alpha < 1:
        raise ParameterError(None, "alpha", alpha, "a number in (0, 1)")
    settings = _check(frame, compare)
    items = []
    for setting, sub in _groups(frame, settings):
        present = set(sub[compare])
        for a, b in _pairs(pairs, sub):
            if a not in present and (b is None or b not in present):
                continue  # neither method is run in this setting: not a comparison of it
            sample, why = _sample(sub, a, b, paired, compare)
            items.append((setting, a, b, sample, why))
    k = len(items)
    per_setting: dict[tuple, list[Verdict]] = {}
    for setting, a, b, sample, why in items:
        region = region_of(setting, a, b)
        p = _resolve(paper, setting, a, b)
        per_setting.setdefault(setting, []).append(_part(setting, a, b, sample, why, region, p, alpha, k, within, unit))
    if not per_setting:
        return Judgement(rule, statement, _empty((), "no run to compare"), ())
    settings_v = tuple(_combine(parts, within, s, "comparison") for s, parts in per_setting.items())
    overall = _combine(settings_v, across, (), "setting")
    return Judgement(rule, statement, overall, settings_v)


# ------------------------------------------------------------------------------------------------------ rules


def direction(
    frame: pd.DataFrame,
    pairs: Pairs,
    *,
    side: int = 1,
    threshold: float = 0.0,
    paper=None,
    paired: bool = True,
    combine: str = "every",
    alpha: float = ALPHA,
    compare: str = "method",
    unit: str = "",
) -> Judgement:
    """``a - b`` lies on ``side`` (+1: above 0, -1: below) of 0 (or of ``threshold``), per setting, for each pair
    ``(a, b)`` of ``pairs`` (one pair, a list of them, or ``f(setting frame) -> pairs``; ``b`` None: ``a``'s own
    value).  ``combine``: "every" or "some", or a pair (within a setting, across settings), e.g. ``("some",
    "every")`` for "some rival in every setting".

    Reproduces: the (1 - alpha) interval lies entirely on ``side``; does not reproduce: entirely on the other side
    (at the family level for ``combine="every"`` over several comparisons); undecided: it holds 0.  ``paper``: the
    paper's own value (a number, or ``f(setting: dict, a, b)``), which never changes the verdict: the verdict says
    whether the interval excludes it.  ``compare``: the column that names what is compared (``method``, or e.g.
    ``buffer_pct``)."""
    if side not in (1, -1):
        raise ParameterError(None, "side", side, "+1 or -1")
    t = float(threshold)
    region = _Region(t, math.inf, False, f"above {t:g}") if side > 0 else _Region(-math.inf, t, False, f"below {t:g}")
    statement = f"{_pair_text(pairs)} {region.text} ({'/'.join(dict.fromkeys(_modes(combine)))} comparison)"
    return _judge(
        frame,
        pairs,
        lambda *_: region,
        "direction",
        statement,
        paper=paper,
        paired=paired,
        combine=combine,
        alpha=alpha,
        compare=compare,
        unit=unit,
    )


def best(
    frame: pd.DataFrame,
    reference: str,
    *,
    rivals: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    paper=None,
    paired: bool = True,
    alpha: float = ALPHA,
    compare: str = "method",
    unit: str = "",
) -> Judgement:
    """``reference`` above every rival in every setting: :func:`direction` of ``reference - rival`` (side +1,
    ``combine="every"``) against each rival run in the setting (``rivals``: only these; ``exclude``: never these).

    Reproduces only if it reproduces against every rival in every setting; does not reproduce if some rival is
    significantly better in some setting (its interval below 0 at the statement's family level, Bonferroni over
    all rivals and settings); else undecided.  ``paper``: ``f(setting: dict, reference, rival)``, e.g. the
    paper's Table I gap."""

    def pairs(sub):
        present = list(dict.fromkeys(sub[compare]))
        others = present if rivals is None else list(rivals)
        return [(reference, m) for m in others if m != reference and m not in exclude]

    region = _Region(0.0, math.inf, False, "above 0")
    return _judge(
        frame,
        pairs,
        lambda *_: region,
        "best",
        f"{reference} above every rival in every setting",
        paper=paper,
        paired=paired,
        combine="every",
        alpha=alpha,
        compare=compare,
        unit=unit,
    )


def magnitude(
    frame: pd.DataFrame,
    pairs: Pairs,
    *,
    value,
    kind: str = "about",
    tolerance: float = 0.0,
    paper=None,
    paired: bool = True,
    combine: str = "every",
    alpha: float = ALPHA,
    compare: str = "method",
    unit: str = "",
) -> Judgement:
    """``a - b`` has the size the paper states: ``kind`` "about" ``value`` (a number, or ``(low, high)`` for "1-3
    pp") within ``tolerance`` (the paper's rounding: :func:`rounding`), "over" ``value`` (above ``value -
    tolerance``) or "under" it (below ``value + tolerance``).  ``value`` may be ``f(setting: dict, a, b)``.

    Reproduces: the (1 - alpha) interval lies inside that region; does not reproduce: it is disjoint from it;
    undecided: it overlaps its boundary.  ``paper``: the paper's own measured number (default: ``value``), whose
    exclusion the verdict reports."""
    check_choice("kind", kind, ("about", "over", "under"))
    if tolerance < 0 or (kind == "about" and not tolerance > 0 and not isinstance(value, tuple | list)):
        allowed = "a number >= 0, and > 0 for 'about' one number (an interval never fits a single point)"
        raise ParameterError(None, "tolerance", tolerance, allowed)

    def region_of(setting, a, b):
        v = _resolve(value, setting, a, b)
        if v is None:
            raise ValueError(f"magnitude: no value for {a} - {b} in {dict(setting)}.")
        if kind == "about":
            lo, hi = (float(v[0]), float(v[1])) if isinstance(v, tuple | list) else (float(v), float(v))
            text = f"about {lo:g}" if lo == hi else f"between {lo:g} and {hi:g}"
            return _Region(lo - tolerance, hi + tolerance, True, f"{text} (+-{tolerance:g})")
        if kind == "over":
            return _Region(float(v) - tolerance, math.inf, False, f"over {float(v) - tolerance:g}")
        return _Region(-math.inf, float(v) + tolerance, False, f"under {float(v) + tolerance:g}")

    def paper_of(setting, a, b):
        p = _resolve(paper, setting, a, b) if paper is not None else _resolve(value, setting, a, b)
        return float(np.mean(p)) if isinstance(p, tuple | list) else p

    statement = f"{_pair_text(pairs)} {kind} {value if not callable(value) else 'the paper value'}"
    return _judge(
        frame,
        pairs,
        region_of,
        "magnitude",
        statement,
        paper=paper_of,
        paired=paired,
        combine=combine,
        alpha=alpha,
        compare=compare,
        unit=unit,
    )


def equal_within(
    frame: pd.DataFrame,
    pairs: Pairs,
    *,
    margin: float,
    one_sided: str | None = None,
    paper=None,
    paired: bool = True,
    combine: str = "every",
    alpha: float = ALPHA,
    compare: str = "method",
    unit: str = "",
) -> Judgement:
    """``a`` and ``b`` are equal within ``margin`` (stated before the data, from a measured spread or the paper's
    own numbers; the same margin decides a pass and a miss).

    Reproduces: the (1 - alpha) interval of ``a - b`` lies inside [-margin, +margin] (two one-sided tests, each at
    alpha / 2); does not reproduce: it lies entirely above +margin or entirely below -margin; undecided: it crosses
    +-margin.  ``one_sided="lower"``: non-inferiority, the region [-margin, +inf) (a rise is no miss);
    ``"upper"``: non-superiority, (-inf, +margin]."""
    if not margin > 0:
        raise ParameterError(None, "margin", margin, "a number > 0")
    m = float(margin)
    if one_sided is None:
        region = _Region(-m, m, True, f"within +-{m:g}")
    elif one_sided == "lower":
        region = _Region(-m, math.inf, True, f"at least -{m:g}")
    elif one_sided == "upper":
        region = _Region(-math.inf, m, True, f"at most {m:g}")
    else:
        raise ParameterError(None, "one_sided", one_sided, "None, 'lower', 'upper'")
    return _judge(
        frame,
        pairs,
        lambda *_: region,
        "equal_within",
        f"{_pair_text(pairs)} {region.text}",
        paper=paper,
        paired=paired,
        combine=combine,
        alpha=alpha,
        compare=compare,
        unit=unit,
    )


def exact(
    frame: pd.DataFrame,
    paper,
    *,
    tolerance: float = 0.0,
    combine: str = "every",
    value: str = "value",
    relation: str = "equal",
) -> Judgement:
    """Label-only identities and counts (no sampling): every row's ``value`` equals the paper's within
    ``tolerance`` (a float tolerance stated with the rule: 0 for counts, the printed precision for printed numbers).
    ``relation``: "equal" (the default), or a bound the paper states: "at_least" / "at_most" (within
    ``tolerance`` of it) or "above" / "below" (strictly).

    ``paper``: a number, the name of a column of ``frame``, or ``f(setting: dict, None, None)``.  Settings: every
    column but ``value``, ``seed`` and that column.  Per setting, reproduces iff every row is equal, does not
    reproduce iff one is not; undecided only where a value is missing.  ``low``/``high``: the smallest and largest
    value (no interval: nothing is sampled)."""
    if tolerance < 0:
        raise ParameterError(None, "tolerance", tolerance, "a number >= 0")
    check_choice("combine", combine, ("every", "some"))
    check_choice("relation", relation, _EXACT)
    column = paper if isinstance(paper, str) else None
    if column is not None and column not in frame.columns:
        allowed = f"a number, a function or a column of frame: {', '.join(map(repr, frame.columns))}"
        raise ParameterError(None, "paper", paper, allowed)
    settings = _settings(frame, (value, "seed", column or value))
    parts = []
    for setting, sub in _groups(frame, settings):
        ours = sub[value].to_numpy(dtype=float)
        if column:
            theirs = sub[column].to_numpy(dtype=float)
        else:
            p = _resolve(paper, setting, None, None)
            theirs = np.full(ours.shape, math.nan if p is None else float(p))
        diff = ours - theirs
        pv = float(theirs[0]) if theirs.size and np.all(theirs == theirs[0]) else None
        if not ours.size or np.isnan(diff).any():
            parts.append(_empty(setting, "no value to compare", int(ours.size), "ours - paper", pv))
            continue
        room = _EXACT[relation](diff, tolerance)  # >= 0 (> 0 for a strict bound) where the row holds
        equal = room > 0 if relation in ("above", "below") else room >= 0
        worst = int(np.argmin(room))
        verdict = REPRODUCES if equal.all() else DOES_NOT
        dist = float(room[worst])
        words = "equal to the paper's" if relation == "equal" else relation.replace("_", " ") + " the paper's"
        reason = f"{int(equal.sum())} of {equal.size} {words} within {tolerance:g}" + (
            "" if equal.all() else f"; largest gap {_g(float(diff[worst]))} (ours {ours[worst]:.6g})"
        )
        parts.append(
            Verdict(
                verdict,
                float(ours.mean()),
                float(ours.min()),
                float(ours.max()),
                int(ours.size),
                REPRODUCES if dist >= 0 else DOES_NOT,
                not bool(equal.all()),
                setting,
                reason,
                "ours - paper",
                pv,
                None,
                dist,
            )
        )
    if not parts:
        return Judgement("exact", "equal to the paper's value", _empty((), "no row to compare"), ())
    overall = _combine(parts, combine, (), "setting")
    return Judgement("exact", f"equal to the paper's value within {tolerance:g}", overall, tuple(parts))


def join(judgements: Sequence[Judgement], combine: str = "every", statement: str = "") -> Judgement:
    """One judgement of several (the parts of a statement judged apart: a value per part, a margin per cell): every
    setting of each, combined as ``combine`` says ("every": the statement holds in each part)."""
    check_choice("combine", combine, ("every", "some"))
    if not judgements:
        raise ParameterError(None, "judgements", judgements, "at least one judgement")
    settings = tuple(s for j in judgements for s in j.settings)
    rule = "/".join(dict.fromkeys(j.rule for j in judgements))
    statement = statement or "; ".join(dict.fromkeys(j.statement for j in judgements))
    if not settings:
        return Judgement(rule, statement, judgements[0].overall, ())
    return Judgement(rule, statement, _combine(settings, combine, (), "setting"), settings)


def _distance(v: Verdict) -> float:
    return v.distance if math.isfinite(v.distance) else 0.0


def at_least(judgement: Judgement, k: int, across: str = "every") -> Judgement:
    """``judgement`` read as "at least ``k`` of the comparisons of each setting" ("several" baselines), in every
    setting (``across="some"``: in some setting): a setting reproduces when ``k`` of its comparisons reproduce,
    does not when more than n - k do not (fewer than ``k`` can still reproduce), else undecided, carrying the
    numbers of the undecided comparison that would make the k-th pass (with ``r`` passes, the (k - r)-th
    strongest undecided one: its side is the side ``k`` of them lean to).  Each comparison keeps its own verdict
    (judge it with ``combine="every"``: a pass at alpha, a miss at the statement's family level)."""
    if k < 1:
        raise ParameterError(None, "k", k, "an integer >= 1")
    out = []
    for s in judgement.settings:
        parts = s.parts or (s,)
        n = len(parts)
        ups = sum(p.verdict == REPRODUCES for p in parts)
        downs = sum(p.verdict == DOES_NOT for p in parts)
        verdict = REPRODUCES if ups >= k else DOES_NOT if downs > n - k else UNDECIDED
        if verdict == UNDECIDED:  # the comparison that must still turn for a pass: it sets the side leaned to
            still_open = sorted((p for p in parts if p.verdict == UNDECIDED), key=_distance, reverse=True)
            binding = still_open[k - ups - 1]
        else:
            binding = min((p for p in parts if p.verdict == verdict), key=_distance)
        reason = f"at least {k} of {n} comparisons: {ups} reproduce, {downs} do not; binding: {binding.reason}"
        out.append(
            replace(
                binding, verdict=verdict, setting=s.setting, reason=reason, parts=tuple(parts), combine=f"at least {k}"
            )
        )
    if not out:
        return judgement
    return Judgement(
        judgement.rule, f"at least {k}: {judgement.statement}", _combine(out, across, (), "setting"), tuple(out)
    )


_EXACT = {  # relation -> room(diff = ours - paper, tolerance): how far each row lies inside the relation
    "equal": lambda d, tol: tol - np.abs(d),
    "at_least": lambda d, tol: d + tol,
    "at_most": lambda d, tol: tol - d,
    "above": lambda d, tol: d,
    "below": lambda d, tol: -d,
}


def rounding(printed: str | float) -> float:
    """The tolerance the paper's rounding implies: half a unit of the last printed digit.

    >>> rounding("6"), rounding("41.16"), rounding(0.5)
    (0.5, 0.005, 0.05)
    """
    text = str(printed).strip().rstrip("%").strip()
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    return 0.5 * 10.0**-decimals


def _pair_text(pairs) -> str:
    if callable(pairs):
        return "each comparison"
    ps = _pairs(pairs, pd.DataFrame())
    return "; ".join(str(a) if b is None else f"{a} - {b}" for a, b in ps)
