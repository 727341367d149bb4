"""What a few seeds can tell: seed-paired tests, rank agreement with the paper, and rounds to a target.

Every run of one configuration at one seed shares its federation (partition and data) with the other methods'
runs at that seed, so methods are compared seed by seed:

``paired_test(a, b)``
    Paired t-test and exact sign-flip permutation test of ``a - b`` over seeds.  With n seeds the sign-flip
    p-value cannot fall below ``2 / 2**n`` (0.25 for 3 seeds): with three seeds only the t-test (which assumes
    normal differences) can call a gap significant.
``paired_against(per_run, reference)``
    ``reference`` minus every other method, per partition (Table I: FedEntOpt against each method).
``paired_pairs(per_run, pairs)``
    Given pairs ``(a, b)``: ``a - b`` per partition (Table II: FedEntOpt+X against X).
``rank_correlation(summary)``
    Spearman's rho (and Kendall's tau) between our method means and the paper's, per partition.
``rounds_to_reference(frame, reference)``
    The paper's "reaches a given target accuracy faster" (§V-B1) made concrete: at each seed the target is the
    reference method's final accuracy at that seed (its last-``window``-round mean); per run, the first round at
    which the trailing ``window``-round mean of the test accuracy reaches it.

``races(frame, reference)``
    §V-B1 against every method: at each seed and for each other method X the target is X's final accuracy; the
    rounds X needs minus the rounds ``reference`` needs (never reached: one round past the run).

``per_run_final(frame)`` is the reproduction's one definition of a run's final accuracy: the mean test accuracy
over its final ``last`` evaluated rounds, in % (from :func:`fedlib.training.runs.last_rounds_mean`, which gives it
in the trainer's fractions). Every table, rule and page of the reproduction reports accuracy in %.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd

from fedlib._validate import ParameterError, check_int
from fedlib.training.runs import last_rounds_mean

__all__ = [
    "sign_flip_p",
    "paired_test",
    "per_run_final",
    "paired_against",
    "paired_pairs",
    "rank_correlation",
    "rounds_to_reference",
    "races",
]

_KEYS = ("model", "dataset", "partition", "liars", "liar_pct", "method", "seed")


EXACT_SIGN_FLIPS = 20  # up to this many differences every sign pattern is enumerated


def sign_flip_p(diffs, draws: int = 100_000, seed: int = 0) -> float:
    """Two-sided p-value of the paired sign-flip permutation test: the share of sign patterns whose |mean| is at
    least the observed |mean|.  Exact (all 2^n patterns) for n <= :data:`EXACT_SIGN_FLIPS`; beyond, ``draws``
    patterns drawn from ``seed``, as (1 + hits) / (1 + draws): a valid, slightly conservative Monte Carlo p-value.

    >>> sign_flip_p([1.0, 2.0, 3.0])  # only all + and all - reach |mean| = 2
    0.25
    >>> sign_flip_p([0.0, 0.0])
    1.0
    """
    d = np.asarray(diffs, dtype=float)
    if d.ndim != 1 or d.size < 1 or not np.all(np.isfinite(d)):
        raise ParameterError(None, "diffs", diffs, "a 1-D sequence of at least one finite difference")
    draws = check_int("draws", draws, low=1)
    observed = abs(d.mean()) - 1e-12
    if d.size <= EXACT_SIGN_FLIPS:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
        return float(np.mean(np.abs(signs @ d) / d.size >= observed))
    rng, hits = np.random.default_rng(seed), 0
    for start in range(0, draws, 10_000):
        signs = rng.choice((1.0, -1.0), size=(min(10_000, draws - start), d.size))
        hits += int(np.count_nonzero(np.abs(signs @ d) / d.size >= observed))
    return (1 + hits) / (1 + draws)


def paired_test(a, b) -> dict:
    """Seed-paired comparison of ``a`` and ``b`` (same seeds, same order): n, mean and std (ddof=1) of ``a - b``,
    the paired t-test's p (``scipy.stats.ttest_rel``; NaN without scipy or with constant differences) and the
    sign-flip p (:func:`sign_flip_p`, exact up to 20 seeds)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim != 1:
        raise ParameterError(None, "a", a, "a 1-D sequence of values", got=f"shape {a.shape}")
    if b.shape != a.shape:
        raise ParameterError(None, "b", b, f"a 1-D sequence of {a.size} values, as long as a", got=f"shape {b.shape}")
    d = a - b
    p_t = float("nan")
    if d.size > 1 and np.ptp(d) > 0:
        try:
            from scipy import stats

            p_t = float(stats.ttest_rel(a, b).pvalue)
        except ImportError:  # pragma: no cover
            pass
    return {
        "n": int(d.size),
        "mean_diff": float(d.mean()),
        "std_diff": float(d.std(ddof=1)) if d.size > 1 else 0.0,
        "p_ttest": p_t,
        "p_signflip": sign_flip_p(d),
    }


def _check_by(table: pd.DataFrame, by: Sequence[str], what: str) -> None:
    missing = [c for c in by if c not in table.columns]
    if missing:
        raise ParameterError(None, "by", list(by), f"columns of {what}: {list(table.columns)}", got=f"{missing}")


def per_run_final(frame: pd.DataFrame, last: int = 10, *, by: Sequence[str] = ()) -> pd.DataFrame:
    """Per run (the key columns of ``frame`` among model, dataset, partition, liars, method, seed, plus ``by``,
    e.g. ``clients_per_round``): the mean test accuracy over its final ``last`` evaluated rounds (round >= 1), in
    %, as column ``accuracy``.  Pass the same ``by`` to :func:`paired_pairs` to compare methods within its groups."""
    if last < 1:
        raise ParameterError(None, "last", last, "a positive number of rounds")
    _check_by(frame, by, "the frame")
    keys = [
        *(c for c in _KEYS[:-2] if c in frame.columns),
        *(c for c in by if c not in _KEYS),
        *(c for c in _KEYS[-2:] if c in frame.columns),
    ]
    acc = 100 * last_rounds_mean(frame, last, by=keys)  # fractions -> %
    return acc.rename("accuracy").reset_index()


def _groups(per_run: pd.DataFrame, by: Sequence[str] = ()):
    _check_by(per_run, by, "per_run")
    keys = [
        *(c for c in _KEYS if c in per_run.columns and c not in ("method", "seed")),
        *(c for c in by if c not in _KEYS),
    ]
    if not keys:
        return [((), per_run)], keys
    return [(k if isinstance(k, tuple) else (k,), g) for k, g in per_run.groupby(keys, sort=False)], keys


def _compare(sub: pd.DataFrame, a: str, b: str) -> dict | None:
    pa = sub[sub["method"] == a].set_index("seed")["accuracy"]
    pb = sub[sub["method"] == b].set_index("seed")["accuracy"]
    seeds = sorted(set(pa.index) & set(pb.index))
    if not seeds:
        return None
    return {"a": a, "b": b, **paired_test(pa.loc[seeds].to_numpy(), pb.loc[seeds].to_numpy())}


def paired_pairs(per_run: pd.DataFrame, pairs: Sequence[tuple[str, str]], *, by: Sequence[str] = ()) -> pd.DataFrame:
    """For every pair ``(a, b)`` and every group (the key columns among model, dataset, partition, liars, liar_pct,
    plus ``by``): :func:`paired_test` of ``a - b`` over the seeds both have (columns: group keys, ``a``, ``b``,
    ``n``, ``mean_diff`` (pp), ``std_diff``, ``p_ttest``, ``p_signflip``).  Pairs without a common seed in a group
    are left out."""
    rows = []
    groups, keys = _groups(per_run, by)
    for k, sub in groups:
        for a, b in pairs:
            res = _compare(sub, a, b)
            if res is not None:
                rows.append({**dict(zip(keys, k)), **res})
    return pd.DataFrame(rows)


def paired_against(
    per_run: pd.DataFrame, reference: str, methods: Sequence[str] | None = None, *, by: Sequence[str] = ()
) -> pd.DataFrame:
    """``reference`` minus each other method (``methods``, default: all in ``per_run``), per group: see
    :func:`paired_pairs`.  Raises ``ValueError`` when ``reference`` has no run."""
    present = list(dict.fromkeys(per_run["method"]))
    if reference not in present:
        raise ParameterError(
            None, "reference", reference, f"a method with stored runs: {', '.join(map(repr, present))}"
        )
    others = [m for m in (methods or present) if m != reference]
    return paired_pairs(per_run, [(reference, m) for m in others], by=by)


def rank_correlation(
    summary: pd.DataFrame,
    *,
    by: str = "partition",
    ours: str = "ours_mean",
    paper: str = "paper_mean",
    label: str = "method",
) -> pd.DataFrame:
    """Per ``by`` group: Spearman's rho and Kendall's tau (with their p-values, scipy) between our means and the
    paper's over the rows where both exist; ``n`` rows, and the ``label`` ranked first by each."""
    from scipy import stats

    rows = []
    for k, sub in summary.groupby(by, sort=False):
        sub = sub.dropna(subset=[ours, paper])
        row = {
            by: k,
            "n": len(sub),
            "spearman_rho": np.nan,
            "spearman_p": np.nan,
            "kendall_tau": np.nan,
            "kendall_p": np.nan,
            "ours_first": None,
            "paper_first": None,
        }
        if len(sub) >= 3:
            rho, p_rho = stats.spearmanr(sub[ours], sub[paper])
            tau, p_tau = stats.kendalltau(sub[ours], sub[paper])
            row.update(
                spearman_rho=float(rho),
                spearman_p=float(p_rho),
                kendall_tau=float(tau),
                kendall_p=float(p_tau),
                ours_first=sub.loc[sub[ours].idxmax(), label],
                paper_first=sub.loc[sub[paper].idxmax(), label],
            )
        rows.append(row)
    return pd.DataFrame(rows)


def _first_reach(curve: pd.Series, target: float) -> float:
    hit = curve.index[curve.to_numpy() >= target]
    return float(hit.min()) if len(hit) else np.nan


def rounds_to_reference(
    frame: pd.DataFrame, reference: str = "FedAvg", *, window: int = 10, by: Sequence[str] = ("partition",)
) -> pd.DataFrame:
    """Rounds each method needs to reach ``reference``'s final accuracy, per ``by`` group, seed by seed.

    At each seed the target is ``reference``'s mean test accuracy over its last ``window`` rounds at that seed
    (the federation is shared, so the comparison is paired; the reference reaches its own target at the latest
    in its last round).  Per run, the first round R at which the mean over rounds R-window+1..R reaches the
    target of its seed (NaN if never; seeds without a reference run are left out).  Columns: ``by``,
    ``method``, ``target`` (mean of the seeds' targets, %), ``rounds_mean`` (over the runs that reached it),
    ``reached``, ``runs``, ``speedup`` (the reference's ``rounds_mean`` / the method's)."""
    if window < 1:
        raise ParameterError(None, "window", window, "a positive number of rounds")
    by = list(by)
    if reference not in set(frame["method"]):
        present = ", ".join(map(repr, dict.fromkeys(frame["method"])))
        raise ParameterError(None, "reference", reference, f"a method with stored runs: {present}")
    t = frame[(frame["round"] >= 1) & frame["test_accuracy"].notna()]
    rows = []
    for k, grp in t.groupby(by, sort=False):
        k = k if isinstance(k, tuple) else (k,)
        targets = {
            s: 100 * run.sort_values("round")["test_accuracy"].tail(window).mean()
            for s, run in grp[grp["method"] == reference].groupby("seed")
        }
        if not targets:
            continue
        for m, runs in grp.groupby("method", sort=False):
            firsts = []
            for s, run in runs.groupby("seed"):
                if s not in targets:
                    continue
                curve = 100 * run.set_index("round")["test_accuracy"].sort_index().rolling(window).mean()
                firsts.append(_first_reach(curve.dropna(), targets[s]))
            firsts = np.array(firsts, dtype=float)
            reached = firsts[~np.isnan(firsts)]
            rows.append(
                {
                    **dict(zip(by, k)),
                    "method": m,
                    "target": float(np.mean(list(targets.values()))),
                    "rounds_mean": float(reached.mean()) if reached.size else np.nan,
                    "reached": int(reached.size),
                    "runs": int(firsts.size),
                }
            )
    out = pd.DataFrame(rows)
    if len(out):
        ref_rounds = out[out["method"] == reference].set_index(by)["rounds_mean"]
        out["speedup"] = [
            ref_rounds.get(tuple(r[c] for c in by) if len(by) > 1 else r[by[0]], np.nan) / r["rounds_mean"]
            for _, r in out.iterrows()
        ]
    return out


def _rounds_to(curve: pd.Series, target: float, never: float) -> float:
    first = _first_reach(curve.dropna(), target)
    return never if np.isnan(first) else first


def races(
    frame: pd.DataFrame,
    reference: str = "FedEntOpt",
    *,
    window: int = 10,
    by: Sequence[str] = ("partition",),
    exclude: Sequence[str] = ("FedEntOpt (DP)",),
) -> pd.DataFrame:
    """Seed by seed, ``reference`` against every other method X (but ``exclude``), per ``by`` group: the target is
    X's final accuracy at that seed (its last-``window``-round mean, %); ``rounds_method`` and ``rounds_reference``
    are the first rounds at which each run's trailing ``window``-round mean reaches it (never: the run's last round
    + 1); ``saved`` = rounds_method - rounds_reference (> 0: the reference is faster)."""
    if window < 1:
        raise ParameterError(None, "window", window, "a positive number of rounds")
    by = list(by)
    t = frame[(frame["round"] >= 1) & frame["test_accuracy"].notna()]
    rows = []
    for k, grp in t.groupby(by, sort=False):
        k = k if isinstance(k, tuple) else (k,)
        curves = {
            (m, s): 100 * run.set_index("round")["test_accuracy"].sort_index()
            for (m, s), run in grp.groupby(["method", "seed"], sort=False)
        }
        for (m, s), acc in curves.items():
            if m == reference or m in exclude or (reference, s) not in curves:
                continue
            ref = curves[(reference, s)]
            target = float(acc.tail(window).mean())
            own = _rounds_to(acc.rolling(window).mean(), target, acc.index.max() + 1)
            theirs = _rounds_to(ref.rolling(window).mean(), target, ref.index.max() + 1)
            rows.append(
                {
                    **dict(zip(by, k)),
                    "method": m,
                    "seed": s,
                    "target": target,
                    "rounds_method": own,
                    "rounds_reference": theirs,
                    "saved": own - theirs,
                }
            )
    return pd.DataFrame(rows)
