"""Seed plans: how many seeds a seed-paired gap needs for a verdict, and how far a tier's committed plan has got.

A rule (:mod:`repro.rules`) judges a seed-paired gap (say FedEntOpt minus FedAvg) by the two-sided ``1 - ALPHA``
t-interval of its mean over seeds.  For one gap, :func:`power` is the probability that the interval decides
(excludes 0 or the rule's margin; or, for an equivalence rule, lies inside the margin) when the true mean and
standard deviation are ``effect`` and ``sd``: the non-central t distribution, not the normal one.
:func:`seeds_needed` is the fewest seeds (2 to ``cap``) with at least ``POWER``; ``None`` where even ``cap`` seeds
fall short.

The effect planned with (:func:`planning_effect`) is the stored runs' mean gap (the pilot), or the paper's effect
where the paper states one of the same sign, smaller and inside the pilot's interval (the conservative of two
plausible effects); the spread is the pilot's.  A gap with neither a measured nor a stated effect gets ``cap``
seeds.

A claim is decided when ``need`` of its gaps are decided on its side, or when more than ``len(gaps) - need`` are
decided against it.  :func:`plan_claim` takes the cheaper of the two routes from the pilot's signs; a statement is
decided when one of its claims goes against it or when all are decided, and :func:`plan_statement` does the same
one level up.  Each gap of a chosen route asks for its own number of seeds on the cells (group and label without
the seed) whose runs it compares; :func:`cell_seeds` takes the largest ask per cell, so a cell that several
statements need counts once.  The power is per gap: a route through several gaps decides with a lower joint
probability (:func:`joint_power` multiplies the gaps' powers as if they were independent).

The subset tier's plan (``plans/subset_seed_plan.yaml``) was computed once, before the runs it asks for, from the
statement inventory the scorecard had before ``statements.yaml`` and the rules replaced it; the file records the
commit it was computed at (``git_commit``), where ``python scripts/seed_plan.py --tier subset`` recomputes it.  A
plan from ``statements.yaml`` and :mod:`repro.rules` is a new plan, in a new file.  :func:`read_plan` reads a
tier's committed plan and :func:`progress` counts its runs stored so far.

A confirmatory plan (:func:`verdict_chances`, :func:`fresh_seeds`, :func:`cells_read`) plans fresh seeds for a
statement the runs stored before it left undecided: its verdict is judged again on those seeds alone, the earlier
runs serving only as the pilot, so no seed is added to a verdict already looked at.  A tier's plans are written
one after another (``Tier.confirmatory_plans``), the n-th with seeds from :func:`first_fresh_seed`, each for the
undecided statements no earlier plan judges: a statement's fresh seeds are drawn once, never tried again.

Each comparison of the statement's judgement is taken to be normal with the pilot's estimate and the spread its
interval implies; the chance that its interval on ``n`` fresh seeds passes (at ``alpha``) or misses (at the family
level ``alpha / k``; the other way round under "some") follows from the non-central t, and the chances combine up
the judgement's tree as its verdicts do ("every", "some", "at least k"), comparisons taken as independent. A
statement is planned with the fewest seeds (the same for every cell it reads) at which it decides, either way, with
probability ``POWER``; or, with ``per_comparison``, with seeds per comparison (:func:`fresh_seeds_per_comparison`:
a comparison far from its boundary keeps few, a close one gets many), each cell running the most any comparison
reading it asks.  A plan may have a budget of CPU hours: it then takes the statements cheapest first and lists the
rest with what they would cost, for a later plan.

A plan that takes the pilot's estimates as the truth promises more than it keeps: a pilot of few seeds that met a
large gap or a small spread by chance gets too few seeds (``scripts/plan_calibration.py`` measures it).  With
``draws`` (:func:`verdict_chances`, ``assurance`` of :func:`confirmatory_plan`) each chance is averaged over draws of
every comparison's truth given its pilot instead.  A plan written with the first kind may be withdrawn before its
runs (:func:`repro.tiers.withdrawn`): its statements are then planned again, on new fresh seeds.  A plan whose file
missed cells that its own seeds per comparison ask for (:func:`missing_cells`) is completed by a record of those
cells (:func:`completion`, :func:`repro.tiers.completions`): the seeds it asked for, fixed before its runs, not more.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fedlib._validate import ParameterError
from repro.rules import ALPHA
from repro.tiers import cell_key

__all__ = [
    "POWER",
    "CAP",
    "TESTS",
    "Gap",
    "ClaimSpec",
    "power",
    "seeds_needed",
    "planning_effect",
    "plan_gap",
    "plan_claim",
    "plan_statement",
    "cell_seeds",
    "cell_key",
    "joint_power",
    "read_plan",
    "progress",
    "seeds_to_decide",
    "implied_sd",
    "verdict_chances",
    "at_most",
    "fresh_seeds",
    "fresh_seeds_per_comparison",
    "comparison_key",
    "cells_read",
    "cell_comparisons",
    "confirmatory_plan",
    "seeds_table",
    "DRAWS",
    "read_calibration",
    "judged_before",
    "plan_notes",
    "beyond_cap",
    "first_fresh_seed",
    "asked",
    "missing_cells",
    "completion",
    "completion_records",
]

#: Power a planned gap decides with (at two-sided level :data:`repro.rules.ALPHA`).
POWER = 0.8
#: The most seeds a plan asks for per cell.
CAP = 20
#: How a gap's interval decides: "excludes" (0 or ``margin`` outside the interval) or "inside" (the interval within
#: ``± margin``, an equivalence rule); "rounds" (the rule's draws are the rounds of each run, not seeds).
TESTS = ("excludes", "inside", "rounds")


@dataclass(frozen=True)
class Gap:
    """One seed-paired difference a claim judges, signed so that the claim's side is positive."""

    claim: str  # the claim's key without the tier
    name: str  # e.g. "FedEntOpt - FedAvg"
    cells: tuple  # ((group, {label fields}), ...): the runs the gap compares (a label without the seed)
    mean: float  # the pilot's mean difference (NaN: none measured)
    sd: float  # the pilot's standard deviation of the difference over seeds (ddof=1)
    n: int  # seeds in the pilot
    paper: float = math.nan  # the paper's effect in the same unit and sign (NaN: the paper gives no number)
    source: str = "pilot"  # where mean and sd come from
    test: str = "excludes"
    margin: float = 0.0  # the value the interval must exclude, or the half-width of the equivalence region


@dataclass(frozen=True)
class ClaimSpec:
    """A claim and its gaps: decided for it when ``need`` gaps are, against it when ``len(gaps) - need + 1`` are."""

    key: str
    gaps: tuple
    need: int
    notes: tuple = field(default_factory=tuple)


def _check(name: str, value, allowed: str, ok: bool) -> None:
    if not ok:
        raise ParameterError(None, name, value, allowed)


def power(effect: float, sd: float, n: int, *, test: str = "excludes", margin: float = 0.0, alpha: float = None):
    """Probability that the two-sided ``1 - alpha`` t-interval of the mean of ``n`` paired differences decides, when
    they are normal with mean ``effect`` and standard deviation ``sd`` (``alpha`` default: :data:`repro.rules.ALPHA`).

    ``test="excludes"``: the interval excludes ``margin`` (either side), the power of the two-sided one-sample
    t-test, ``P(|T| > t_{1-alpha/2, n-1})`` with ``T`` non-central t of ``n - 1`` degrees of freedom and
    non-centrality ``(effect - margin) sqrt(n) / sd``.  ``test="inside"``: the interval lies within ``± margin``,
    the two one-sided tests both reject, bounded below by ``P1 + P2 - 1`` (the usual approximation of their joint
    power).

    >>> round(power(1.0, 1.0, 10), 3)
    0.803
    """
    from scipy import stats

    _check("test", test, ", ".join(map(repr, TESTS[:2])), test in TESTS[:2])
    _check("n", n, "an integer >= 2", isinstance(n, (int, np.integer)) and n >= 2)
    _check("sd", sd, "a finite number >= 0", np.isfinite(sd) and sd >= 0)
    alpha = ALPHA if alpha is None else alpha
    df, crit = n - 1, float(stats.t.ppf(1 - alpha / 2, n - 1))
    if sd == 0:  # every seed alike: the interval is the point
        return float(effect != margin) if test == "excludes" else float(abs(effect) < margin)
    if test == "excludes":
        nc = (effect - margin) * math.sqrt(n) / sd
        return float(stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc))
    low = stats.nct.sf(crit, df, (effect + margin) * math.sqrt(n) / sd)
    high = stats.nct.sf(crit, df, (margin - effect) * math.sqrt(n) / sd)
    return float(max(0.0, low + high - 1.0))


def seeds_needed(
    effect: float,
    sd: float,
    *,
    test: str = "excludes",
    margin: float = 0.0,
    target: float = POWER,
    alpha: float = None,
    cap: int = CAP,
) -> int | None:
    """The fewest seeds ``n`` in 2..``cap`` with :func:`power` at least ``target``; None when ``cap`` seeds fall
    short (or the effect or spread is unknown).  ``test="rounds"``: 1 (the rule draws rounds, not seeds)."""
    _check("test", test, ", ".join(map(repr, TESTS)), test in TESTS)
    _check("cap", cap, "an integer >= 2", isinstance(cap, (int, np.integer)) and cap >= 2)
    _check("target", target, "a probability in (0, 1)", 0 < target < 1)
    if test == "rounds":
        return 1
    if not (np.isfinite(effect) and np.isfinite(sd)):
        return None
    for n in range(2, cap + 1):
        if power(effect, sd, n, test=test, margin=margin, alpha=alpha) >= target:
            return n
    return None


def planning_effect(pilot: float, paper: float, interval: tuple = (-math.inf, math.inf)) -> float:
    """The effect to plan with: the pilot's mean, or the paper's effect where it has the pilot's sign, is smaller
    and lies inside the pilot's ``interval`` (both plausible: the smaller); the paper's where there is no pilot
    mean (NaN)."""
    if not np.isfinite(pilot):
        return paper
    lo, hi = interval
    if np.isfinite(paper) and np.sign(paper) == np.sign(pilot) and abs(paper) < abs(pilot) and lo <= paper <= hi:
        return paper
    return pilot


def _interval(mean: float, sd: float, n: int) -> tuple[float, float]:
    """The two-sided ``1 - ALPHA`` t-interval of a mean from its sd (ddof=1) over ``n`` seeds: infinite for fewer
    than two seeds or no mean, the point itself for a zero sd (every seed alike)."""
    from scipy import stats

    if n < 2 or not np.isfinite(mean):
        return -math.inf, math.inf
    if not sd > 0:
        return float(mean), float(mean)
    half = float(stats.t.ppf(1 - ALPHA / 2, n - 1)) * sd / math.sqrt(n)
    return float(mean - half), float(mean + half)


def _side(g: Gap, effect: float) -> int:
    """+1 when the planned interval would fall on the claim's side, -1 against it."""
    if g.test == "inside":
        return 1 if abs(effect) < g.margin else -1
    return 1 if effect > g.margin else -1


def plan_gap(g: Gap, *, target: float = POWER, alpha: float = None, cap: int = CAP) -> dict:
    """One gap's plan: ``effect`` planned with, ``side`` (+1 for the claim, -1 against), ``n`` seeds needed (None
    beyond ``cap``), ``power_at_cap``, ``basis`` (how ``n`` was found) and ``paper_outside_pilot`` (the paper's
    effect lies outside the pilot's interval: the tier does not show the effect the paper reports).

    A rule that draws rounds needs one seed (``basis`` "rounds"); a gap with neither a pilot mean nor a paper
    effect cannot be powered and gets ``cap`` seeds (``basis`` "no effect: the cap")."""
    _check("test", g.test, ", ".join(map(repr, TESTS)), g.test in TESTS)
    lo, hi = _interval(g.mean, g.sd, g.n)
    effect = planning_effect(g.mean, g.paper, (lo, hi))
    out = {
        "effect": float(effect),
        "side": 1,
        "n": None,
        "power_at_cap": math.nan,
        "basis": "power",
        "paper_outside_pilot": bool(g.source == "pilot" and np.isfinite(g.paper) and not lo <= g.paper <= hi),
    }
    if g.test == "rounds":
        return {**out, "n": 1, "basis": "rounds"}
    if not np.isfinite(effect):
        return {**out, "n": cap, "basis": "no effect: the cap"}
    n = seeds_needed(effect, g.sd, test=g.test, margin=g.margin, target=target, alpha=alpha, cap=cap)
    at_cap = power(effect, g.sd, cap, test=g.test, margin=g.margin, alpha=alpha) if np.isfinite(g.sd) else math.nan
    return {**out, "side": _side(g, effect), "n": n, "power_at_cap": at_cap}


def _route(plans: list[tuple[Gap, dict]], side: int, count: int):
    """The ``count`` gaps on ``side`` with the fewest seeds needed, or None when fewer can be decided."""
    ok = sorted((p["n"], i) for i, (g, p) in enumerate(plans) if p["side"] == side and p["n"] is not None)
    if count < 1 or len(ok) < count:
        return None
    chosen = [plans[i] for _, i in ok[:count]]
    return max(p["n"] for _, p in chosen), chosen


def plan_claim(spec: ClaimSpec, **kw) -> dict:
    """The cheaper route to a verdict: ``route`` "for" (``need`` gaps decided on the claim's side) or "against"
    (``len(gaps) - need + 1`` decided against it), ``n`` (the most seeds a chosen gap needs), ``gaps`` ((Gap,
    plan) of the route) and ``every`` ((Gap, plan) of all gaps); route None and n None when neither fits the cap."""
    _check("need", spec.need, f"an integer in 1..{len(spec.gaps)}", 1 <= spec.need <= len(spec.gaps))
    every = [(g, plan_gap(g, **kw)) for g in spec.gaps]
    routes = [
        (r[0], name, r[1])
        for name, r in (
            ("for", _route(every, 1, spec.need)),
            ("against", _route(every, -1, len(spec.gaps) - spec.need + 1)),
        )
        if r is not None
    ]
    if not routes:
        return {"route": None, "n": None, "gaps": [], "every": every}
    n, name, chosen = min(routes, key=lambda r: (r[0], r[1] != "for"))
    return {"route": name, "n": n, "gaps": chosen, "every": every}


def plan_statement(claim_plans: dict) -> dict:
    """A statement's route from its undecided claims' plans (key -> :func:`plan_claim`): "against" through its
    cheapest claim that goes against it, or "for" through all of them; ``claims``: the keys the route needs."""
    against = sorted((p["n"], k) for k, p in claim_plans.items() if p["route"] == "against")
    options = []
    if against:
        options.append((against[0][0], "against", [against[0][1]]))
    if claim_plans and all(p["route"] == "for" for p in claim_plans.values()):
        options.append((max(p["n"] for p in claim_plans.values()), "for", list(claim_plans)))
    if not options:
        return {"route": None, "n": None, "claims": []}
    n, route, keys = min(options, key=lambda o: (o[0], o[1] != "against"))
    return {"route": route, "n": n, "claims": keys}


def cell_seeds(chosen: list[tuple[Gap, int]]) -> dict:
    """{cell_key: seeds} over (gap, its seeds) pairs: the largest number of seeds any gap asks of each cell."""
    out = {}
    for g, n in chosen:
        for group, label in g.cells:
            k = cell_key(group, label)
            out[k] = max(out.get(k, 0), n)
    return out


def joint_power(gaps: list[tuple[Gap, dict]], **kw) -> float:
    """The product of the gaps' powers at their planned seeds (independent gaps assumed); NaN where a gap was not
    planned by power (:func:`plan_gap`'s ``basis``)."""
    if not gaps or any(p["basis"] != "power" for _, p in gaps):
        return math.nan
    out = 1.0
    for g, p in gaps:
        out *= power(p["effect"], g.sd, p["n"], test=g.test, margin=g.margin, alpha=kw.get("alpha"))
    return out


def read_plan(tier: str = "subset", which: str | int = "seed") -> dict:
    """The committed plan file of ``tier``: ``which`` "seed" (``Tier.seed_plan``, written by
    ``scripts/seed_plan.py`` from its first inventory) or ``n`` >= 1, its n-th written confirmatory plan
    (``Tier.confirmatory_plans``)."""
    import yaml

    from repro import tiers

    path = _plan_path(tier, which)
    if not isinstance(path, str):
        raise ParameterError(f"tier {tier!r}", "seed_plan", path, "a plans/ path (a tier with a seed plan file)")
    return yaml.safe_load((tiers.ROOT / path).read_text())


def _plan_path(tier: str, which) -> str | None:
    from repro import tiers

    written = tiers.written_confirmatory_plans(tier)
    ok = which == "seed" or (isinstance(which, int) and not isinstance(which, bool) and 1 <= which <= len(written))
    _check("which", which, f"'seed' or a confirmatory plan's number 1..{len(written)} (of tier {tier!r})", ok)
    return tiers.get_tier(tier).seed_plan if which == "seed" else written[which - 1]


def progress(tier: str = "subset", results_dir=None, which: str | int = "seed") -> list[dict]:
    """Per run group of ``tier``'s plan ``which`` (:func:`read_plan`): the runs it asks for (the seed plan: the
    tier's own seeds and its cells'; a confirmatory plan: its fresh seeds), how many are stored now, and the
    CPU hours the rest takes at the seed plan's measured cost per run."""
    from repro import results, tiers

    plan, confirm = read_plan(tier, which), tiers.confirmatory(tier)
    mine = confirm.keeps(None if which == "seed" else which - 1)
    per_run = read_plan(tier)["seconds"]["cpu_seconds_per_run"] / 3600
    groups = (
        plan["groups"] if which == "seed" else sorted({json.loads(k)["group"] for k in tiers.plan_cells(tier, which)})
    )
    rows = []
    for group in groups:
        runs = [r for r in tiers.group_configs(tier, group) if mine(r.label.get("seed"))]
        missing = len(results.missing_runs(runs, tier, results_dir))
        rows.append(
            {
                "group": group,
                "runs": len(runs),
                "stored": len(runs) - missing,
                "to_train": missing,
                "cpu_hours_left": round(missing * per_run, 1),
            }
        )
    return rows


def seeds_to_decide(verdict, *, target: float = POWER, cap: int = CAP) -> dict:
    """What a judged comparison (a ``repro.rules.Verdict`` with an interval over ``n`` seeds) would need to decide:
    ``sd``, the seed spread its interval implies (ddof=1); ``distance``, its estimate's distance to the rule's
    boundary; ``n``, the fewest seeds with power ``target`` for an interval to clear the boundary if the estimate
    and spread are the true ones (None beyond ``cap``, or without an interval).  A planning aid for a new plan: it
    adds no seeds to a plan that ran.

    >>> from repro.rules import Verdict
    >>> v = Verdict("undecided", 1.0, -0.4, 2.4, 4, "reproduces", None, (), "", distance=1.0)
    >>> d = seeds_to_decide(v); round(d["sd"], 3), d["n"]
    (0.88, 9)
    """
    from scipy import stats

    n, low, high = int(verdict.n), float(verdict.low), float(verdict.high)
    if n < 2 or not (math.isfinite(low) and math.isfinite(high) and math.isfinite(verdict.distance)):
        return {"sd": math.nan, "distance": float(verdict.distance), "n": None}
    sd = (high - low) / 2 * math.sqrt(n) / float(stats.t.ppf(1 - ALPHA / 2, n - 1))
    need = seeds_needed(abs(float(verdict.distance)), sd, target=target, cap=cap)
    return {"sd": float(sd), "distance": float(verdict.distance), "n": need}


def implied_sd(verdict) -> float:
    """The spread over seeds (ddof=1) a comparison's two-sided ``1 - ALPHA`` t-interval over ``n`` seeds implies
    (NaN without an interval)."""
    from scipy import stats

    n, low, high = int(verdict.n), float(verdict.low), float(verdict.high)
    if n < 2 or not (math.isfinite(low) and math.isfinite(high)):
        return math.nan
    return (high - low) / 2 * math.sqrt(n) / float(stats.t.ppf(1 - ALPHA / 2, n - 1))


def _comparison_chances(v, n: int, within: str, alpha: float) -> tuple[float, float]:
    """(pass, miss) chances of comparison ``v`` judged on ``n`` fresh seeds, its estimate and spread the truth."""
    p, m = _chances(np.array([float(v.distance)]), np.array([implied_sd(v)]), n, v.k, within, alpha)
    return float(p[0]), float(m[0])


def _chances(d, sd, n: int, k: int, within: str, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """(pass, miss) chances, elementwise, of a comparison of ``k`` whose true distance to its boundary is ``d`` and
    whose seed spread is ``sd`` (arrays), judged on ``n`` fresh seeds: 0 where either is unknown."""
    from scipy import stats

    a_pass, a_miss = (alpha, alpha / k) if within == "every" else (alpha / k, alpha)
    known = np.isfinite(d) & np.isfinite(sd)
    flat = known & (sd == 0)  # every seed alike: the interval is the point
    d, sd = np.where(known, d, 0.0), np.where(known & ~flat, sd, 1.0)
    nc, df = d * math.sqrt(n) / sd, n - 1

    def beyond(crit: float, shift):  # P(T > crit), T non-central t; normal where scipy gives up
        p = stats.nct.sf(crit, df, shift)
        return np.where(np.isfinite(p), p, stats.norm.sf(crit - shift))

    passes = np.where(flat, d > 0, beyond(stats.t.ppf(1 - a_pass / 2, df), nc))
    misses = np.where(flat, d < 0, beyond(stats.t.ppf(1 - a_miss / 2, df), -nc))
    return np.where(known, passes, 0.0), np.where(known, misses, 0.0)


def _draws(v, count: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """``count`` draws of comparison ``v``'s true distance to its boundary and seed spread given its pilot (``n``
    seeds, implied spread ``s``): the posterior under flat priors on the mean and the log spread, spread
    ``s sqrt((n - 1) / chi2_{n-1})`` and distance normal about the pilot's with the drawn spread over ``sqrt(n)``."""
    n, sd, d = int(v.n), implied_sd(v), float(v.distance)
    if n < 2 or not (math.isfinite(sd) and math.isfinite(d)):
        return np.full(count, d), np.full(count, sd)
    spread = sd * np.sqrt((n - 1) / rng.chisquare(n - 1, count))
    return d + spread / math.sqrt(n) * rng.standard_normal(count), spread


def _at_least(chances: list, k: int):
    """P(at least ``k`` of independent events with these chances): the Poisson-binomial tail (elementwise over
    arrays of chances)."""
    dist = np.ones((1,) + np.shape(chances[0]) if chances else (1,))
    for p in chances:
        dist = np.concatenate([dist * (1 - p), np.zeros_like(dist[:1])]) + np.concatenate(
            [np.zeros_like(dist[:1]), dist * p]
        )
    return dist[k:].sum(axis=0)


def at_most(chances: list, k: int) -> float:
    """P(at most ``k`` of independent events with these chances happen): how surprising it is that no more than
    ``k`` statements decided if each decides with the chance its plan promised.

    Examples
    --------
    >>> round(at_most([0.8, 0.8], 0), 4), at_most([0.5], 1)
    (0.04, 1.0)
    """
    return float(1 - _at_least(list(chances), k + 1)) if k < len(chances) else 1.0


def comparison_key(v) -> tuple[str, str]:
    """(setting label, comparison) of a comparison verdict: how a plan names it."""
    return v.setting_label, v.comparison


def _leaves(v) -> list:
    return [v] if not v.parts else [c for p in v.parts for c in _leaves(p)]


def _node_chances(v, n, within: str, alpha: float, memo: dict):
    if not v.parts:
        seeds = n if isinstance(n, (int, np.integer)) else n[comparison_key(v)]
        key = (id(v), int(seeds), within)
        if key not in memo:
            d, sd = memo["truths"][id(v)]
            memo[key] = _chances(d, sd, int(seeds), v.k, within, alpha)
        return memo[key]
    mode = v.combine or "every"
    below = "every" if mode.startswith("at least") else mode
    chances = [_node_chances(p, n, below, alpha, memo) for p in v.parts]
    passes, misses = [c[0] for c in chances], [c[1] for c in chances]
    if mode == "every":
        return np.prod(passes, axis=0), 1 - np.prod([1 - m for m in misses], axis=0)
    if mode == "some":
        return 1 - np.prod([1 - p for p in passes], axis=0), np.prod(misses, axis=0)
    k = int(mode.split()[-1])
    return _at_least(passes, k), _at_least(misses, len(chances) - k + 1)


#: Draws of each comparison's truth a plan that weighs its pilot's uncertainty averages over.
DRAWS = 400


def verdict_chances(judgement, n, alpha: float = None, memo: dict = None, draws: int = 0, seed: int = 0):
    """(reproduces, does not reproduce): the chances that ``judgement``'s statement, judged again on ``n`` fresh
    seeds (an integer, or per comparison: {:func:`comparison_key`: seeds}), comes out each way.  ``draws`` 0: each
    comparison's estimate and implied spread are the truth; ``draws`` > 0: the chances averaged over that many
    draws of each comparison's truth given its pilot (:func:`_draws`, from ``seed``; the "assurance", which counts
    that a pilot of few seeds may have met a large gap or a small spread by chance).  ``memo``: a dict kept between
    calls on the same judgement with the same ``draws`` and ``seed``, so that each comparison's chances at each seed
    count are computed once.

    >>> from repro import rules
    >>> import pandas as pd
    >>> f = pd.DataFrame({"method": ["A"] * 3 + ["B"] * 3, "seed": [0, 1, 2] * 2,
    ...                   "value": [0.0, 1.0, 2.0, 0.0, 0.0, 0.0]})  # A - B: mean 1, sd 1 over 3 seeds
    >>> [round(x, 3) for x in verdict_chances(rules.direction(f, [("A", "B")]), 10)]  # power(1.0, 1.0, 10)
    [0.803, 0.0]
    """
    counts = [n] if isinstance(n, (int, np.integer)) else list(n.values())
    ok = all(isinstance(c, (int, np.integer)) and c >= 2 for c in counts)
    if ok and not isinstance(n, (int, np.integer)):
        ok = {comparison_key(v) for v in _leaves(judgement.overall)} <= set(n)
    _check("n", n, "an integer >= 2, or one for every comparison of the judgement", ok)
    _check("draws", draws, "an integer >= 0", isinstance(draws, (int, np.integer)) and draws >= 0)
    memo = {} if memo is None else memo
    if "truths" not in memo:
        rng, leaves = np.random.default_rng(seed), _leaves(judgement.overall)
        point = {id(v): (np.array([float(v.distance)]), np.array([implied_sd(v)])) for v in leaves}
        memo["truths"] = {id(v): _draws(v, draws, rng) for v in leaves} if draws else point
    passes, misses = _node_chances(judgement.overall, n, "every", ALPHA if alpha is None else alpha, memo)
    return float(np.mean(passes)), float(np.mean(misses))


def fresh_seeds(judgement, *, target: float = POWER, cap: int = CAP, draws: int = 0, seed: int = 0) -> dict:
    """The fewest fresh seeds ``n`` (2..``cap``) at which the statement decides either way with chance at least
    ``target`` (None beyond the cap): ``n``, ``route`` ("for" when a pass is the likelier decision, "against"),
    ``chances`` ((pass, miss) at ``n``, or at the cap when none).  ``draws``, ``seed``: as :func:`verdict_chances`
    takes them."""
    memo = {}
    for n in range(2, cap + 1):
        p, m = verdict_chances(judgement, n, memo=memo, draws=draws, seed=seed)
        if p + m >= target:
            return {"n": n, "route": "for" if p >= m else "against", "chances": (p, m)}
    return {"n": None, "route": None, "chances": verdict_chances(judgement, cap, memo=memo, draws=draws, seed=seed)}


def beyond_cap(
    judgement, *, target: float = POWER, counts=(100, 300, 1000, 3000), most: int = 10_000, draws: int = DRAWS, seed=0
) -> dict:
    """Would more seeds than a plan's cap decide the statement?  ``chances``: {n: (pass, miss)} at each
    seed count of ``counts``, the same for every cell; ``n``: the fewest seeds (up to ``most``) at which it decides
    either way with chance ``target``, bisected (the chance grows with the seeds), or None where not even ``most``
    would.  ``draws``, ``seed``: as :func:`verdict_chances` takes them (by default the assurance)."""
    _check("most", most, f"an integer >= {max(counts)}", isinstance(most, int) and most >= max(counts))
    memo, kw = {}, {"draws": draws, "seed": seed}

    def either(n: int) -> float:
        return sum(verdict_chances(judgement, n, memo=memo, **kw))

    chances = {n: verdict_chances(judgement, n, memo=memo, **kw) for n in counts}
    if either(most) < target:
        return {"chances": chances, "n": None}
    low, high = 1, most  # either(low) < target <= either(high)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if either(mid) >= target else (mid, high)
    return {"chances": chances, "n": high}


def fresh_seeds_per_comparison(
    judgement, *, target: float = POWER, cap: int = CAP, draws: int = 0, seed: int = 0
) -> dict:
    """Fresh seeds per comparison ({:func:`comparison_key`: seeds}, 2..``cap`` each) at which the statement decides
    either way with chance at least ``target``.  For each way (a pass, a miss, either): from 2 seeds each, one seed
    at a time to the comparison whose seed raises the log of that way's chance most (the fewest seeds first on a
    tie), until the chance reaches ``target``; the way with fewer seeds in all is taken.  A comparison far from its
    boundary so keeps few seeds while a close one gets many; ``n`` None where no way reaches ``target`` below
    ``cap``.  Returns ``n``, ``route`` and ``chances`` as :func:`fresh_seeds` does; ``draws``, ``seed``: as
    :func:`verdict_chances` takes them."""
    memo, kw, keys = {}, {"draws": draws, "seed": seed}, [comparison_key(v) for v in _leaves(judgement.overall)]
    found = []
    for way in (0, 1, 2):  # a pass, a miss, either
        n = dict.fromkeys(keys, 2)
        while _way(now := verdict_chances(judgement, n, memo=memo, **kw), way) < target:
            open_ = [k for k in n if n[k] < cap]
            if not open_:
                break
            gain = {
                k: math.log(_way(verdict_chances(judgement, {**n, k: n[k] + 1}, memo=memo, **kw), way) + 1e-300)
                for k in open_
            }
            n[max(open_, key=lambda k: (gain[k], -n[k]))] += 1
        else:
            found.append((sum(n.values()), "for" if now[0] >= now[1] else "against", n, now))
    if not found:
        return {"n": None, "route": None, "chances": verdict_chances(judgement, cap, memo=memo, **kw)}
    _, route, n, chances = min(found, key=lambda f: f[0])
    return {"n": n, "route": route, "chances": chances}


def _way(chances: tuple[float, float], way: int) -> float:
    """The chance of a pass (``way`` 0), a miss (1) or either (2)."""
    return chances[way] if way < 2 else chances[0] + chances[1]


def cells_read(fn, statement, table, tier: str, groups: dict) -> list[tuple[str, dict]]:
    """(group, label without the seed) of each planned cell of the groups ``statement``'s quantity ``fn`` reads
    (:func:`repro.quantities.read_groups`) whose runs it reads: the cells without whose stored runs (``groups``:
    group -> StoredGroup) the judgement's numbers change, widened to every cell of a method read whose other label
    values each occur among the cells read (a maximum over settings, say, may fall on another setting on fresh
    seeds)."""
    return [(g, lab) for g, lab, _ in cell_comparisons(fn, statement, table, tier, groups)]


def cell_comparisons(fn, statement, table, tier: str, groups: dict) -> list[tuple[str, dict, frozenset]]:
    """The cells of :func:`cells_read`, each with the comparisons (:func:`comparison_key`) whose numbers change
    without its stored runs (empty for a cell read only through a widening or an overall number)."""
    from repro import quantities, tiers
    from repro.results import StoredGroup, run_key

    def numbers(given):
        f = fn(quantities.Runs(tier, groups=given), statement, table).frame()
        # sorted: settings come in the order of the runs, which a cell's removal may change
        rows = sorted(f[["level", "setting", "comparison", "estimate", "n"]].round(9).astype(str).to_numpy().tolist())
        return rows, {(r[1], r[2]): tuple(r[3:]) for r in rows if r[0] == "comparison"}

    (base, base_parts), planned, read = numbers(groups), [], {}
    for group in quantities.read_groups(statement.groups):
        cells = {}
        for run in tiers.group_configs(tier, group):
            label = {k: v for k, v in run.label.items() if k != "seed"}
            cells.setdefault(cell_key(group, label), (label, set()))[1].add(run_key(run.config))
        stored = groups[group]
        for label, keys in cells.values():
            planned.append((group, label))
            kept = ~stored.frame["key"].isin(keys), ~stored.meta["key"].isin(keys)
            without = StoredGroup(stored.tier, group, stored.frame[kept[0]], stored.meta[kept[1]])
            rows, parts = numbers({**groups, group: without})
            if rows != base:
                changed = {k for k, v in base_parts.items() if parts.get(k) != v}
                read[cell_key(group, label)] = frozenset(changed)
    methods = {(g, lab.get("method")) for g, lab in planned if cell_key(g, lab) in read}
    seen = {(g, k, str(v)) for g, lab in planned if cell_key(g, lab) in read for k, v in lab.items() if k != "method"}
    return [
        (g, lab, read.get(cell_key(g, lab), frozenset()))
        for g, lab in planned
        if (g, lab.get("method")) in methods and all((g, k, str(v)) in seen for k, v in lab.items() if k != "method")
    ]


#: Fresh seeds of the n-th confirmatory plan start at n times this (or at the next multiple of it past an earlier
#: plan's seeds: :func:`first_fresh_seed`), clear of the seed plan's (0..CAP-1) and of every other plan's.
FIRST_FRESH_SEED = 100


def first_fresh_seed(tier: str, number: int) -> int:
    """The first fresh seed of ``tier``'s ``number``-th confirmatory plan: ``number`` * :data:`FIRST_FRESH_SEED`, or
    the next multiple of it past the seeds of every earlier plan (withdrawn ones too) where a cap above
    :data:`FIRST_FRESH_SEED` took them that far; a plan's seeds are ``first_seed`` .. ``first_seed + cap - 1``."""
    end = max((p["first_seed"] + p["cap"] for p in (read_plan(tier, n) for n in range(1, number))), default=0)
    return max(number * FIRST_FRESH_SEED, -(-end // FIRST_FRESH_SEED) * FIRST_FRESH_SEED)


def confirmatory_plan(
    tier: str,
    undecided,
    *,
    number: int = 1,
    table=None,
    target: float = POWER,
    cap: int = CAP,
    budget_hours: float | None = None,
    per_comparison: bool = False,
    assurance: bool = False,
) -> dict:
    """The ``number``-th confirmatory seed plan of ``tier``: for each training statement its stored runs leave
    undecided (``undecided``: (statement, judgement) pairs, :func:`repro.scorecard.undecided`) and no earlier plan
    judges, the fresh seeds (:func:`fresh_seeds`, from :func:`first_fresh_seed`) on which it decides
    either way with chance ``target``, given to every cell it reads (:func:`cells_read`); the statements it plans
    are judged on those seeds alone.  With ``budget_hours`` the plan takes the statements cheapest first (the runs
    of their own cells, shared among the statements that ask for the very same runs) while its total, a cell
    several of them read counted once, stays within that many CPU hours; the others are listed, with their cost,
    as beyond the budget (:func:`_within_budget`).  ``per_comparison``: the seeds of each comparison on their own
    (:func:`fresh_seeds_per_comparison`), a cell running the most that a comparison reading it asks.
    ``assurance``: each chance averaged over :data:`DRAWS` draws of the comparisons' truths given the pilot (seeded
    with ``number``; :func:`verdict_chances`), not the pilot's estimates taken as the truth.  A document for
    ``scripts/seed_plan.py --write-confirmatory`` to write once."""
    from repro import statements, tiers

    written = tiers.written_confirmatory_plans(tier)
    _check("number", number, f"the next plan's number, {len(written) + 1}", number == len(written) + 1)
    _check("cap", cap, "an integer >= 2", isinstance(cap, int) and cap >= 2)
    ok = budget_hours is None or (isinstance(budget_hours, (int, float)) and budget_hours > 0)
    _check("budget_hours", budget_hours, "None or a number of CPU hours > 0", ok)
    judged = judged_before(tier, number)
    table = table or statements.load_table()
    per_run = read_plan(tier)["seconds"]["cpu_seconds_per_run"]
    candidates = [(s, j) for s, j in undecided if s.id not in judged]
    draws = {"draws": DRAWS if assurance else 0, "seed": number}
    rows, wants = _confirmatory_rows(tier, candidates, table, target, cap, per_comparison, draws)
    first = first_fresh_seed(tier, number)
    asks = _within_budget(rows, wants, None if budget_hours is None else budget_hours * 3600 / per_run, per_run)
    n_runs = sum(n for _, _, n in asks.values())
    return {
        "tier": tier,
        **_provenance(tier),
        "rule": "each statement below judged again on fresh seeds alone (the stored runs are its pilot): the fewest "
        "seeds, the same for every cell it reads, at which it decides either way with chance >= power, each "
        "comparison normal with the pilot's estimate and implied spread, comparisons independent "
        "(repro.seed_plan.verdict_chances); capped"
        + (_PER_COMPARISON if per_comparison else "")
        + (_ASSURANCE if assurance else "")
        + ("; statements cheapest first while the plan's CPU hours stay within the budget" if budget_hours else ""),
        "alpha": ALPHA,
        "power": target,
        "cap": cap,
        **({"draws": DRAWS, "draw_seed": number} if assurance else {}),
        **({"budget_cpu_hours": budget_hours} if budget_hours is not None else {}),
        "number": number,
        "after": [Path(p).name for p in written],
        "first_seed": first,
        "judges": [r["statement"] for r in rows if r["seeds"] is not None],
        "totals": {"runs": n_runs, "cpu_hours": round(n_runs * per_run / 3600, 1), "cpu_seconds_per_run": per_run},
        "statements": rows,
        "cells": [
            {"group": g, "label": lab, "seeds": n, "first_seed": first}
            for g, lab, n in sorted(asks.values(), key=lambda c: cell_key(c[0], c[1]))
        ],
    }


def asked(row: dict, key: tuple[str, str]) -> int:
    """The fresh seeds a confirmatory plan's ``row`` (one of its ``statements``) asked for the comparison ``key``
    (:func:`comparison_key`): its ``seeds_per_comparison``, else the statement's ``seeds``."""
    return int(row.get("seeds_per_comparison", {}).get(f"{key[0]}: {key[1]}", row["seeds"]))


def missing_cells(tier: str, number: int, table=None) -> list[dict]:
    """The cells ``tier``'s confirmatory plan ``number`` asked fresh seeds for but gives fewer: each cell the
    comparisons of a statement it judges read (:func:`cell_comparisons` on the runs below :data:`FIRST_FRESH_SEED`,
    the plans' pilot) with the most seeds a comparison reading it asked (:func:`asked`; a cell no single comparison
    reads, the statement's ``seeds``), where the plan's cells (:func:`repro.tiers.plan_cells`) hold fewer.  Each as
    a plan cell: ``group``, ``label``, ``seeds`` from the plan's ``first_seed``."""
    from repro import quantities, statements, tiers

    plan, table = read_plan(tier, number), table or statements.load_table()
    by_id, rows = {s.id: s for s in table.statements}, {r["statement"]: r for r in plan["statements"]}
    runs = quantities.Runs(tier, keep=lambda seed: seed < FIRST_FRESH_SEED)
    wants = {}
    for sid in plan["judges"]:
        s, row, fn = by_id[sid], rows[sid], quantities.TRAINING[sid]
        stored = {g: runs.stored(g) for g in quantities.read_groups(s.groups)}
        for group, label, comps in cell_comparisons(fn, s, table, tier, stored):
            n = max((asked(row, c) for c in comps), default=int(row["seeds"]))
            k = cell_key(group, label)
            wants[k] = max(wants.get(k, (0, group, label)), (n, group, label), key=lambda w: w[0])
    have = {k: len(seeds) for k, seeds in tiers.plan_cells(tier, number).items()}
    return [
        {"group": g, "label": lab, "seeds": n, "first_seed": plan["first_seed"]}
        for k, (n, g, lab) in sorted(wants.items())
        if n > have.get(k, 0)
    ]


def completion(tier: str, number: int, why: str, table=None) -> dict:
    """The record that completes ``tier``'s confirmatory plan ``number`` (:func:`repro.tiers.completions`): its
    :func:`missing_cells`, the runs they add, ``why`` they were missing, and where it was computed."""
    from repro import tiers

    cells = missing_cells(tier, number, table)
    have = tiers.plan_cells(tier, number)
    added = sum(c["seeds"] - len(have.get(cell_key(c["group"], c["label"]), ())) for c in cells)
    per_run = read_plan(tier)["seconds"]["cpu_seconds_per_run"]
    return {
        "plan": number,
        **_provenance(tier),
        "how": f"python scripts/seed_plan.py --tier {tier} --complete {number} (repro.seed_plan.completion)",
        "why": why,
        "runs": added,
        "cpu_hours": round(added * per_run / 3600, 1),
        "cells": cells,
    }


def completion_records(tier: str = "subset") -> list[dict]:
    """The records of ``tier``'s plan completions (each as :func:`completion` wrote it), in the order written; none
    for a tier without the file (:func:`repro.tiers.completion_records`)."""
    from repro import tiers

    return tiers.completion_records(tier)


def judged_before(tier: str, number: int) -> set:
    """The statements ``tier``'s confirmatory plans before the ``number``-th judge (a withdrawn plan judges none):
    never planned again."""
    from repro import tiers

    gone = tiers.withdrawn(tier)
    return {i for n in range(1, number) if n not in gone for i in read_plan(tier, n)["judges"]}


def plan_notes(tier: str) -> dict[str, str]:
    """Statement id -> what ``tier``'s confirmatory plans (withdrawn ones aside) say of the seeds its verdict rests
    on: a statement a plan judges, that it is judged once on that plan's fresh seeds; one a plan left out, the
    plan's reason (the chance its cap of seeds would decide it, or its budget; :func:`beyond_cap` says whether more
    seeds would).  A later plan's word replaces an earlier's."""
    from repro import tiers

    gone, out = tiers.withdrawn(tier), {}
    for n in range(1, len(tiers.written_confirmatory_plans(tier)) + 1):
        if n in gone:
            continue
        plan = read_plan(tier, n)
        for s in plan["statements"]:
            if s["statement"] in plan["judges"]:
                out[s["statement"]] = (
                    f"judged once on confirmatory plan {n}'s fresh seeds ({s['seeds']} at most a cell), fixed before "
                    "its runs: no seeds are added"
                )
            elif s["route"] is None:  # beyond the cap: the chance the cap's seeds would decide it
                out[s["statement"]] = (
                    f"left out of confirmatory plan {n}: {plan['cap']} fresh seeds would decide it with chance "
                    f"{sum(s['chances']):.3g} (< {plan['power']})"
                )
            elif s.get("seeds") is None:
                out[s["statement"]] = f"left out of confirmatory plan {n}: {s.get('note', 'beyond its budget')}"
    return out


_PER_COMPARISON = (
    "; the seeds per comparison, not per statement: from 2 each, one at a time to the comparison whose seed raises "
    "that chance most (repro.seed_plan.fresh_seeds_per_comparison), a cell running the most any comparison reading "
    "it asks"
)


_ASSURANCE = (
    "; each chance averaged over draws of every comparison's true gap and spread given its pilot (flat priors: "
    "spread from the scaled inverse chi-square, gap normal about the pilot's), not the pilot's estimates taken as the "
    "truth (repro.seed_plan.verdict_chances with draws)"
)


def _provenance(tier: str) -> dict:
    import datetime
    import subprocess

    from repro import tiers

    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, cwd=tiers.ROOT)
    return {
        "computed_at": datetime.datetime.now().isoformat(timespec="seconds"),
        "git_commit": commit.stdout.strip() or None,
        "how": f"python scripts/seed_plan.py --tier {tier} --write-confirmatory (repro.seed_plan.confirmatory_plan)",
    }


def _confirmatory_rows(
    tier: str, candidates, table, target: float, cap: int, per_comparison: bool = False, draws: dict = None
):
    """One plan row per (statement, judgement) and, per statement that decides within ``cap`` seeds, its cells:
    {statement id: [(group, label, seeds), ...]}.  ``per_comparison``: seeds per comparison
    (:func:`fresh_seeds_per_comparison`), a cell running the most that a comparison reading it asks (a cell read
    by no single comparison, the most of any); otherwise one number for every cell (:func:`fresh_seeds`).  ``draws``:
    the planner's ``draws`` and ``seed`` (none: the pilot taken as the truth)."""
    from repro import quantities

    runs = quantities.Runs(tier, keep=lambda seed: seed < FIRST_FRESH_SEED)
    planner = fresh_seeds_per_comparison if per_comparison else fresh_seeds
    rows, wants = [], {}
    for s, j in candidates:
        plan = planner(j, target=target, cap=cap, **(draws or {}))
        most = max(plan["n"].values()) if per_comparison and plan["n"] else plan["n"]
        row = {
            "statement": s.id,
            "verdict_now": f"{j.verdict}: {j.overall.comparison} {j.overall.estimate:+.3g} "
            f"[{j.overall.low:+.3g}, {j.overall.high:+.3g}], n = {j.overall.n}",
            "route": plan["route"],
            "seeds": most,
            "chances": [round(float(c), 3) for c in plan["chances"]],
        }
        if plan["n"] is None:
            chance = sum(plan["chances"])
            row["note"] = f"{cap} fresh seeds decide it with chance {chance:.3g} (< {target}): not planned"
            if cap < FIRST_FRESH_SEED:  # would as many as the plans' seed spacing?
                beyond = planner(j, target=target, cap=FIRST_FRESH_SEED, **(draws or {}))["n"]
                beyond = max(beyond.values()) if per_comparison and beyond else beyond
                row["note"] += f"; {beyond} would" if beyond else f"; not even {FIRST_FRESH_SEED} would"
        else:
            fn, stored = quantities.TRAINING[s.id], {g: runs.stored(g) for g in quantities.read_groups(s.groups)}
            cells = cell_comparisons(fn, s, table, tier, stored)
            row["cells"] = len(cells)
            if per_comparison:
                row["seeds_per_comparison"] = {f"{a}: {b}": int(c) for (a, b), c in plan["n"].items()}
            wants[s.id] = [
                (group, label, max((plan["n"][c] for c in comps), default=most) if per_comparison else most)
                for group, label, comps in cells
            ]
        rows.append(row)
    return rows, wants


def _within_budget(rows: list[dict], wants: dict, budget_runs: float | None, per_run: float) -> dict:
    """The cells the plan runs ({cell key: (group, label, seeds)}, the largest ask per cell): every statement of
    ``wants`` (no budget), or the cheapest first (its runs over the number of statements asking for the very same
    runs) while the total stays within ``budget_runs``; a statement left out gets ``seeds`` None and a note with
    its own cost (its ``rows`` entry is changed in place)."""
    asks = {}
    same = {i: [j for j in wants if wants[j] == wants[i]] for i in wants}  # statements that share their runs
    order = sorted(wants, key=lambda i: sum(n for _, _, n in wants[i]) / len(same[i]))
    for sid in order:
        merged = dict(asks)
        for group, label, n in wants[sid]:
            k = cell_key(group, label)
            merged[k] = (group, label, max(n, merged.get(k, (0, 0, 0))[2]))
        if budget_runs is None or sum(n for _, _, n in merged.values()) <= budget_runs:
            asks = merged
            continue
        row = next(r for r in rows if r["statement"] == sid)
        own = sum(n for _, _, n in wants[sid])
        most = "up to " if "seeds_per_comparison" in row else ""
        row["note"] = (
            f"{most}{row['seeds']} fresh seeds on {len(wants[sid])} cells ({own} runs, "
            f"{own * per_run / 3600:.1f} CPU hours) would decide it with chance {sum(row['chances']):.2f}: beyond the "
            "plan's budget, not planned"
        )
        row["seeds"] = None
    return asks


#: Where ``scripts/plan_calibration.py --write`` keeps its simulation of the planners (repository-relative).
CALIBRATION = "plans/plan_calibration.csv"


def read_calibration():
    """The planners' calibration (:data:`CALIBRATION`) as a frame, one row per scenario and planner: the share of
    planned pilots whose fresh seeds decided, beside the chance promised; None before it was written."""
    import pandas as pd

    from repro import tiers

    path = tiers.ROOT / CALIBRATION
    return pd.read_csv(path) if path.is_file() else None


def seeds_table(tier: str, groups, results_dir=None):
    """One row per cell (group and label without the seed) of ``tier``'s ``groups``: ``planned`` (seeds the tier
    and its seed plan ask for) and ``stored`` of them; ``fresh planned`` and ``fresh stored`` (the confirmatory
    plan's).  What a page shows beside its verdicts."""
    import pandas as pd

    from repro import results, tiers
    from repro.results import run_key

    fresh, rows = tiers.confirmatory(tier).seeds, {}
    for group in groups:
        runs = tiers.group_configs(tier, group)
        missing = {run_key(r.config) for r in results.missing_runs(runs, tier, results_dir)}
        for r in runs:
            label = {k: v for k, v in r.label.items() if k != "seed"}
            cols = {"group": group, **label, "planned": 0, "stored": 0, "fresh planned": 0, "fresh stored": 0}
            row = rows.setdefault(cell_key(group, label), cols)
            which = "fresh " if r.label["seed"] in fresh else ""
            row[which + "planned"] += 1
            row[which + "stored"] += run_key(r.config) not in missing
    return pd.DataFrame(list(rows.values()))
