"""Seed plans: how many seeds each undecided training statement of a tier needs, fixed from the stored runs before
the runs it asks for.

A claim's rule (:mod:`repro.claims`) judges one or more seed-paired gaps (say FedEntOpt minus FedAvg),
each by the two-sided ``1 - ALPHA`` t-interval of its mean over seeds.  For one gap, :func:`power` is the
probability that the interval decides (excludes 0 or the rule's margin; or, for an equivalence rule, lies inside
the margin) when the true mean and standard deviation are ``effect`` and ``sd``: the non-central t distribution,
not the normal one.  :func:`seeds_needed` is the fewest seeds (2 to ``cap``) with at least ``POWER``; ``None``
where even ``cap`` seeds fall short.

The effect planned with (:func:`planning_effect`) is the stored runs' mean gap (the pilot), or the paper's effect
where the paper states one of the same sign, smaller and inside the pilot's interval (the conservative of two
plausible effects); the spread is the pilot's.  Where a group has no stored runs at the tier, :func:`subset_claims`
takes the nearest measured gap of the same tier and names it (``source``); a gap with neither a measured nor a
stated effect gets ``cap`` seeds.

A claim is decided when ``need`` of its gaps are decided on its side, or when more than ``len(gaps) - need`` are
decided against it (``_best``: every gap; "at least 3 of 8": 3).  :func:`plan_claim` takes the cheaper of the two
routes from the pilot's signs; a statement (:data:`repro.scorecard.STATEMENTS`) is decided when one of
its claims goes against it or when all are decided, and :func:`plan_statement` does the same one level up.  Each
gap of a chosen route asks for its own number of seeds on the cells (group and label without the seed) whose runs
it compares; :func:`cell_seeds` takes the largest ask per cell, so a cell that several statements need counts once.
The power is per gap: a route through several gaps decides with a lower joint probability (:func:`joint_power`
multiplies the gaps' powers as if they were independent).  :func:`plan` puts it together for every statement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from repro import claims
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
    "subset_claims",
    "plan",
]

#: Power a planned gap decides with (at two-sided level ``claims.ALPHA``).
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
        raise ValueError(f"{name} must be {allowed} (got {value!r}).")


def power(effect: float, sd: float, n: int, *, test: str = "excludes", margin: float = 0.0, alpha: float = None):
    """Probability that the two-sided ``1 - alpha`` t-interval of the mean of ``n`` paired differences decides, when
    they are normal with mean ``effect`` and standard deviation ``sd`` (``alpha`` default: ``claims.ALPHA``).

    ``test="excludes"``: the interval excludes ``margin`` (either side), the power of the two-sided one-sample
    t-test, ``P(|T| > t_{1-alpha/2, n-1})`` with ``T`` non-central t of ``n - 1`` degrees of freedom and
    non-centrality ``(effect - margin) sqrt(n) / sd``.  ``test="inside"``: the interval lies within ``± margin``,
    the two one-sided tests both reject, bounded below by ``P1 + P2 - 1`` (the usual approximation of their joint
    power).

    >>> round(power(1.0, 1.0, 10), 3)
    0.803
    """
    from scipy import stats

    _check("test", test, f"one of {TESTS[:2]}", test in TESTS[:2])
    _check("n", n, "an integer >= 2", isinstance(n, (int, np.integer)) and n >= 2)
    _check("sd", sd, "a finite number >= 0", np.isfinite(sd) and sd >= 0)
    alpha = claims.ALPHA if alpha is None else alpha
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
    _check("test", test, f"one of {TESTS}", test in TESTS)
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
    _check("test", g.test, f"one of {TESTS}", g.test in TESTS)
    lo, hi = claims.interval(g.mean, g.sd, g.n) if np.isfinite(g.mean) else (-math.inf, math.inf)
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


# --------------------------------------------------------------------------------------------- the subset pilot


def _stats(diffs) -> tuple[float, float, int]:
    d = np.asarray(diffs, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return math.nan, math.nan, 0
    return float(d.mean()), float(d.std(ddof=1)) if d.size > 1 else math.nan, int(d.size)


def _pair(per_run, a: str, b: str, part: str, **by) -> tuple[float, float, int]:
    """Mean, sd and n of ``a - b`` over the seeds both have in ``part`` (and the ``by`` columns' values)."""
    sub = per_run[per_run["partition"] == part]
    for k, v in by.items():
        sub = sub[sub[k] == v]
    wide = sub.pivot_table(index="seed", columns="method", values="accuracy")
    if a not in wide or b not in wide:
        return math.nan, math.nan, 0
    return _stats((wide[a] - wide[b]).dropna())


class _Cells:
    """The cells (group, label without the seed) of a tier's groups, found from a partial label."""

    def __init__(self, tier: str):
        import dataclasses

        from repro import tiers

        base = dataclasses.replace(tiers.get_tier(tier), seed_plan=None)  # the cells do not depend on the seeds
        self.labels = {}
        for group in tiers.tier_groups(base):
            seen = {cell_key(group, r.label): r.label for r in tiers.group_configs(base, group)}
            self.labels[group] = [{k: v for k, v in lab.items() if k != "seed"} for lab in seen.values()]

    def find(self, group: str, **part) -> tuple:
        hits = [lab for lab in self.labels.get(group, []) if all(lab.get(k) == v for k, v in part.items())]
        if len(hits) != 1:
            raise ValueError(f"{len(hits)} cells of group {group!r} match {part} (a gap needs exactly one).")
        return group, hits[0]

    def every(self, group: str, **part) -> list:
        return [(group, lab) for lab in self.labels.get(group, []) if all(lab.get(k) == v for k, v in part.items())]


def _table1(per_run, races, cells: _Cells) -> list[ClaimSpec]:
    """Table I (best, the DP variant, the weak baselines) and §V-B1's races, from the stored Table I runs."""
    from repro import paper_values as paper

    ref, dp = "FedEntOpt", "FedEntOpt (DP)"
    tol = max(abs(v[ref][0] - v[dp][0]) for v in paper.TABLE_I.values())  # as claims.table1_best
    methods = list(dict.fromkeys(per_run["method"]))
    rivals = [m for m in methods if m not in (ref, dp)]
    out = []

    def gap(key, a, b, part, **kw):
        row = paper.TABLE_I.get(("LeNet-5", "CIFAR-10", part), {})
        theirs = row[a][0] - row[b][0] if a in row and b in row else math.nan
        if kw.get("test") == "inside":
            theirs = math.nan  # the paper's |DP - non-DP| gaps set the margin, not an effect
        two = (cells.find("table1", partition=part, method=a), cells.find("table1", partition=part, method=b))
        return Gap(key, f"{a} - {b}", two, *_pair(per_run, a, b, part), paper=theirs, **kw)

    parts = list(dict.fromkeys(per_run["partition"]))
    for part in parts:
        key = f"table1/{part}/best"
        out.append(ClaimSpec(key, tuple(gap(key, ref, m, part) for m in rivals), len(rivals)))
        key = f"table1/{part}/dp_matches"
        out.append(ClaimSpec(key, (gap(key, ref, dp, part, test="inside", margin=tol),), 1))
        key = f"table1/{part}/dp_above_baselines"
        out.append(ClaimSpec(key, tuple(gap(key, dp, m, part) for m in rivals), 3))  # "several": 3, as the rule
        for m, name, only in (("FedConcat", "fedconcat", None), ("KL", "kl", None)) + tuple(
            (m, m.lower(), "Dir(0.1)") for m in ("FedNova", "SCAFFOLD")
        ):
            if only in (None, part):
                key = f"table1/{part}/{name}_below_fedavg"
                out.append(ClaimSpec(key, (gap(key, "FedAvg", m, part),), 1))
        key = f"accuracy_curves/{part}/faster_than_every_method"
        gaps = []
        for m, r in races[races["partition"] == part].groupby("method", sort=False):
            two = (cells.find("table1", partition=part, method=ref), cells.find("table1", partition=part, method=m))
            gaps.append(Gap(key, f"rounds of {m} - rounds of {ref}", two, *_stats(r["saved"])))
        out.append(ClaimSpec(key, tuple(gaps), len(gaps)))
    key = "table1/dp_sometimes_higher"
    out.append(ClaimSpec(key, tuple(gap(key, dp, ref, p) for p in parts), 1))
    return out


def _table2(per_run, cells: _Cells) -> list[ClaimSpec]:
    """Table II: FedEntOpt+X - X on the paper's side, from the stored Table II runs."""
    from repro import paper_values as paper

    out = []
    for part in dict.fromkeys(per_run["partition"]):
        for combo in (m for m in dict.fromkeys(per_run["method"]) if m.startswith("FedEntOpt+")):
            base = combo[len("FedEntOpt+") :]
            theirs = paper.TABLE_II[(part, base, "CIFAR-10")][0]
            sign = 1.0 if theirs >= 0 else -1.0
            mean, sd, n = _pair(per_run, combo, base, part)
            two = (
                cells.find("table2", partition=part, method=combo),
                cells.find("table2", partition=part, method=base),
            )
            key = f"table2/{part}/{base}"
            out.append(ClaimSpec(key, (Gap(key, f"{combo} - {base}", two, sign * mean, sd, n, sign * theirs),), 1))
    return out


def _participation(per_run, t1_run, cells: _Cells, methods: tuple) -> list[ClaimSpec]:
    """Fig. 2 from the stored participation runs with Table I's full-rate runs; a method the tier runs but the pilot
    lacks takes its Table I gap at the full rate."""
    ref, tol, out = "FedEntOpt", claims.TOLERANCES["participation_pp"], []
    for part in dict.fromkeys(per_run["partition"]):
        sub = per_run[per_run["partition"] == part]
        rates = sorted(set(sub["clients_per_round"]))
        k = int(sub["num_clients"].iloc[0])

        def cell(m, mm):
            if mm == rates[-1]:
                return cells.find("table1", partition=part, method=m)
            return cells.find("participation", partition=part, method=m, clients_per_round=mm)

        key = f"participation/{part}/best_at_every_rate"
        gaps = []
        for m in (m for m in methods if m != ref):
            for mm in rates:
                g = _pair(sub, ref, m, part, clients_per_round=mm)
                src = "pilot"
                if g[2] == 0:
                    g, src = _pair(t1_run, ref, m, part), f"analog: Table I's {ref} - {m} at M = {rates[-1]}"
                two = (cell(ref, mm), cell(m, mm))
                gaps.append(Gap(key, f"{ref} - {m} at M = {mm} of K = {k}", two, *g, source=src))
        out.append(ClaimSpec(key, tuple(gaps), len(gaps)))
        # keeps_accuracy and others_lose_more read only the seeds that have every method at every rate
        setting = cells.every("participation", partition=part) + [
            c for m in methods for c in cells.every("table1", partition=part, method=m)
        ]
        wide = sub.pivot_table(index="seed", columns=["method", "clients_per_round"], values="accuracy").dropna()
        lo, hi = rates[0], rates[-1]
        change = wide[(ref, lo)] - wide[(ref, hi)]
        key = f"participation/{part}/keeps_accuracy"
        g = Gap(key, f"{ref} at M = {lo} - at M = {hi}", tuple(setting), *_stats(change), margin=-tol)
        out.append(ClaimSpec(key, (g,), 1))
        extra = {
            m: change - (wide[(m, lo)] - wide[(m, hi)])
            for m in dict.fromkeys(sub["method"])
            if m != ref and (m, lo) in wide and (m, hi) in wide
        }
        worst = max(extra, key=lambda m: extra[m].mean())
        key = f"participation/{part}/others_lose_more"
        g = Gap(key, f"extra loss of {worst} (the largest), M = {hi} to {lo}", tuple(setting), *_stats(extra[worst]))
        out.append(ClaimSpec(key, (g,), 1, (f"judged on the rival that loses most in the pilot ({worst})",)))
    return out


def _analogs(t1_run, part_run, cells: _Cells, tier: str) -> list[ClaimSpec]:
    """The groups without stored runs at the tier: availability, the buffer's accuracy, the large pools, FedEntropy;
    each gap takes the nearest measured gap of the tier (its ``source``)."""
    from repro import paper_values as paper
    from repro import tiers

    out = []
    for sc in tiers.AVAILABILITY_SCENARIOS:
        for part in tiers.PARTITIONS:
            key = f"availability/{sc}/{part}/best"
            row = paper.TABLE_III[(sc, "CIFAR-10", part, "LeNet-5")]
            gaps = tuple(
                Gap(
                    key,
                    f"FedEntOpt - {m}",
                    (
                        cells.find("availability", scenario=sc, partition=part, method="FedEntOpt"),
                        cells.find("availability", scenario=sc, partition=part, method=m),
                    ),
                    *_pair(t1_run, "FedEntOpt", m, part),
                    paper=row["FedEntOpt"][0] - row[m][0],
                    source=f"analog: Table I's FedEntOpt - {m} (no {sc.lower()})",
                )
                for m in ("FedAvg", "FedProx")
            )
            out.append(ClaimSpec(key, gaps, 2))
    qs = [int(round(100 * q)) for q in tiers.BUFFER_FRACTIONS]
    for part in tiers.PARTITIONS:
        _, sd, n = _pair(t1_run, "FedEntOpt", "FedAvg", part)
        src = "analog: the sd of Table I's FedEntOpt - FedAvg (two selection rules); the paper's effect"

        def step(key, a, b):  # accuracy at Q = a minus at Q = b
            theirs = paper.TABLE_VI[("CIFAR-10", part, a)][0] - paper.TABLE_VI[("CIFAR-10", part, b)][0]
            two = (
                cells.find("buffer", partition=part, buffer_pct=a),
                cells.find("buffer", partition=part, buffer_pct=b),
            )
            return Gap(key, f"Q = {a} % - Q = {b} %", two, math.nan, sd, n, paper=theirs, source=src)

        if part == "C=2":
            key = f"buffer_accuracy/{part}/rises"
            out.append(ClaimSpec(key, tuple(step(key, b, a) for a, b in zip(qs, qs[1:])), len(qs) - 1))
        else:
            key = f"buffer_accuracy/{part}/largest_degrades"
            out.append(ClaimSpec(key, (step(key, qs[-2], qs[-1]),), 1))
        key = f"buffer_accuracy/{part}/q0_worst"
        out.append(ClaimSpec(key, tuple(step(key, q, qs[0]) for q in qs[1:]), len(qs) - 1))
    pools = tiers.get_tier(tier).large_pools
    low = int(part_run["clients_per_round"].min())
    pilot = _pair(part_run, "FedEntOpt", "FedAvg", "Dir(0.1)", clients_per_round=low)
    for k in pools["num_clients"]:
        for m in pools["clients_per_round"]:
            key = f"large_pools/K{k}/M{m}/above_fedavg"
            two = tuple(
                cells.find("large_pools", num_clients=k, clients_per_round=m, method=x) for x in ("FedEntOpt", "FedAvg")
            )
            src = f"analog: participation's FedEntOpt - FedAvg, Dir(0.1), K = 100, M = {low}"
            out.append(ClaimSpec(key, (Gap(key, "FedEntOpt - FedAvg", two, *pilot, source=src),), 1))
    fe = {m: cells.find("fedentropy", method=m) for m in ("FedEntropy", "FedAvg", "FedEntOpt")}
    for a, name in (("FedEntOpt", "fedentopt_above_reselection"), ("FedAvg", "random_above_reselection")):
        key = f"fedentropy_entropy/{name}"
        g = Gap(key, f"entropy {a} - FedEntropy", (fe[a], fe["FedEntropy"]), math.nan, math.nan, 0, test="rounds")
        out.append(ClaimSpec(key, (g,), 1))
    key = "fedentropy_entropy/fedavg_above_reselection"
    _, sd, n = _pair(t1_run, "FedEntOpt", "FedAvg", "C=2")
    src = "no effect stated or measured; the sd of Table I's FedEntOpt - FedAvg, C=2"
    g = Gap(key, "FedAvg - FedEntropy", (fe["FedAvg"], fe["FedEntropy"]), math.nan, sd, n, source=src)
    out.append(ClaimSpec(key, (g,), 1))
    return out


def subset_claims(tier: str = "subset", results_dir=None, last: int = 10) -> list[ClaimSpec]:
    """Every training claim of ``tier`` with its gaps: from the stored runs (Table I and II, the races, the
    participation rates) and, for the groups with none stored, from the nearest measured gap (:func:`_analogs`).
    ``last``: the final rounds averaged, as the claims do."""
    from repro import participation, significance, tiers
    from repro.results import load_group

    cells = _Cells(tier)
    t1 = load_group(tier, "table1", results_dir)
    t1_run = significance.per_run_final(t1.frame, last)
    races = significance.races(t1.frame, "FedEntOpt", window=last)
    t2_run = significance.per_run_final(load_group(tier, "table2", results_dir).frame, last)
    frame, _ = participation.with_full_rate(load_group(tier, "participation", results_dir), results_dir)
    part_run = participation.per_run(frame, last)
    methods = tiers.get_tier(tier).participation.get("methods", tiers.PARTICIPATION_METHODS)
    return (
        _table1(t1_run, races, cells)
        + _table2(t2_run, cells)
        + _participation(part_run, t1_run, cells, methods)
        + _analogs(t1_run, part_run, cells, tier)
    )


# --------------------------------------------------------------------------------------------- the plan


def _num(x, digits=3):
    return None if x is None or not np.isfinite(x) else round(float(x), digits)


def _gap_row(g: Gap, p: dict) -> dict:
    return {
        "claim": g.claim,
        "gap": g.name,
        "source": g.source,
        "pilot_mean": _num(g.mean),
        "pilot_sd": _num(g.sd),
        "pilot_seeds": g.n,
        "paper": _num(g.paper),
        "rule": {"excludes": f"interval excludes {g.margin:g}", "inside": f"interval inside ±{g.margin:g}"}.get(
            g.test, "rounds are the draws"
        ),
        "effect_planned": _num(p["effect"]),
        "seeds_needed": p["n"],
        "basis": p["basis"],
        "power_at_cap": _num(p["power_at_cap"]),
        "paper_outside_pilot_interval": p["paper_outside_pilot"],
        "in_plan": False,
    }


def _why_not(claim_plans: dict, cap: int) -> str:
    """Why a statement cannot be decided within ``cap`` seeds: the gaps that would need more."""
    parts = []
    for key, p in claim_plans.items():
        short = [
            f"{g.name} (power at {cap} seeds {q['power_at_cap']:.2f})"
            for g, q in p["every"]
            if q["n"] is None and np.isfinite(q["power_at_cap"])
        ]
        if p["route"] is None and short:
            parts.append(f"{key}: {'; '.join(short[:3])}" + (f"; {len(short) - 3} more" if len(short) > 3 else ""))
    text = f"cannot decide within the cap of {cap} seeds at {POWER:.0%} power: " + " | ".join(parts)
    if any(q["paper_outside_pilot"] and q["n"] is None for p in claim_plans.values() for _, q in p["every"]):
        text += (
            "; where the paper's effect lies outside the pilot's interval, the tier does not show the paper's "
            "effect and more seeds cannot (the paper's data may)"
        )
    return text


def plan(tier: str = "subset", results_dir=None, *, target: float = POWER, cap: int = CAP, alpha: float = None):
    """The seed plan of ``tier``: every training statement of :data:`repro.scorecard.STATEMENTS`
    that is undecided at ``tier`` or not judged there for want of stored runs, planned as the module docstring
    says.  Returns ``statements``, ``claims`` and ``gaps`` (rows for the plan file) and ``cells`` ({cell_key:
    seeds}, the seeds each cell needs; the tier's own seeds still run where they are more)."""
    from fnmatch import fnmatchcase

    from repro import machine_spread, scorecard

    if not hasattr(scorecard, "STATEMENTS"):
        raise RuntimeError(
            "seed_plan.plan reads the statement inventory the scorecard had before statements.yaml and the rules "
            "replaced it; the committed plan (plans/subset_seed_plan.yaml) records the commit it was computed at "
            "(git_commit), where `python scripts/seed_plan.py --tier subset` recomputes it. A plan from "
            "statements.yaml and repro.rules is a new plan, in a new file."
        )

    kw = {"target": target, "cap": cap, "alpha": alpha}
    verdicts = {
        c.key.split(":", 1)[1]: "undecided" if flips else c.verdict
        for _, c, flips in scorecard.training_claims(tier, results_dir)
    }
    specs = {c.key: c for c in subset_claims(tier, results_dir)}
    statements, claim_rows, gap_rows, chosen, done = [], [], [], [], set()
    for st in scorecard.STATEMENTS:
        if st.label_only or not st.claims or st.page not in machine_spread.STORED_CLAIMS:
            continue

        def hit(k, st=st):
            return any(fnmatchcase(k, pat) for pat in st.claims)

        judged = [k for k in verdicts if hit(k)]
        now = {verdicts[k] for k in judged}
        if judged and ("does not reproduce" in now or "undecided" not in now):
            continue  # decided at this tier
        open_ = [k for k in judged if verdicts[k] == "undecided"] if judged else [k for k in specs if hit(k)]
        lacking = [k for k in open_ if k not in specs]
        if lacking or not open_:
            raise ValueError(f"statement {st.key!r}: no gaps for its claims {lacking or st.claims} (seed_plan).")
        claim_plans = {k: plan_claim(specs[k], **kw) for k in open_}
        route = plan_statement(claim_plans)
        notes = sorted(
            {
                f"{g.claim}: {g.name}, paper {g.paper:+.2f}, pilot {g.mean:+.2f} ± {g.sd:.2f} sd over {g.n} seeds"
                for p in claim_plans.values()
                for g, q in p["every"]
                if q["paper_outside_pilot"]
            }
        )
        statements.append(
            {
                "statement": st.key,
                "verdict_now": "undecided" if judged else "not judged (no stored runs)",
                "claims": open_,
                "route": route["route"],
                "seeds": route["n"],
                "decided_through": route["claims"],
                "note": _why_not(claim_plans, cap) if route["route"] is None else "",
                "paper_outside_pilot_interval": notes,
            }
        )
        for key, p in claim_plans.items():
            if key in route["claims"]:
                chosen += [(g, q["n"]) for g, q in p["gaps"]]
            if key in done:
                continue
            done.add(key)
            claim_rows.append(
                {
                    "claim": key,
                    "need": f"{specs[key].need} of {len(specs[key].gaps)} gaps",
                    "route": p["route"],
                    "seeds": p["n"],
                    "joint_power": _num(joint_power(p["gaps"], alpha=alpha)),
                    "notes": list(specs[key].notes),
                }
            )
            gap_rows += [_gap_row(g, q) for g, q in p["every"]]
    in_plan = {(g.claim, g.name) for g, _ in chosen}  # a claim planned through a later statement too
    for row in gap_rows:
        row["in_plan"] = (row["claim"], row["gap"]) in in_plan
    return {"statements": statements, "claims": claim_rows, "gaps": gap_rows, "cells": cell_seeds(chosen)}


def read_plan(tier: str = "subset") -> dict:
    """The committed plan file of ``tier`` (``Tier.seed_plan``), as written by ``scripts/seed_plan.py``."""
    import yaml

    from repro import tiers

    path = tiers.get_tier(tier).seed_plan
    if not isinstance(path, str):
        raise ValueError(f"tier {tier!r} has no seed plan file (Tier.seed_plan: got {path!r}; allowed: a plans/ path).")
    return yaml.safe_load((tiers._ROOT / path).read_text())


def progress(tier: str = "subset", results_dir=None) -> list[dict]:
    """Per run group of ``tier``: the runs the tier (its seeds and its plan's) asks for, how many are stored now,
    and the CPU hours the rest takes at the plan's measured cost per run."""
    from repro import results, tiers

    plan = read_plan(tier)
    per_run = plan["seconds"]["cpu_seconds_per_run"] / 3600
    rows = []
    for group in plan["groups"]:
        runs = tiers.group_configs(tier, group)
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
