"""Fig. 2 (accuracy versus participation rate) as numbers that can be tested.

The paper varies M/K from its 10 % baseline down to 4 %-9 % (§V-B3) and reads Fig. 2 as: FedEntOpt "consistently
maintains high accuracy, even with lower participation rates", "the other methods partially suffer performance
degradation", most of all under Dir(0.1).  It gives no numbers, so this module turns the reading into statistics
over the stored runs, seed by seed (at one seed every method and rate shares the federation):

``with_full_rate(stored, results_dir)``
    The participation group's runs plus the paper's 10 % point: for each participation configuration, the stored
    Table I run whose configuration is the same in every run-key field but ``clients_per_round`` (the tier's own
    M), labelled like the participation runs.  Nothing is added where no such run is stored.
``rate_change(per_run, reference)``
    Per partition and method: the change of the final accuracy from the highest to the lowest rate (paired by
    seed, with its t-test p), the least-squares slope over all rates (pp of accuracy per pp of rate), and, for
    the other methods, how much more they lose than ``reference`` (paired by seed).

:func:`fedlib.claims.participation` judges the paper's reading on :func:`rate_change`'s table.

``per_run`` is :func:`fedlib.significance.per_run_final` with ``by=("num_clients", "clients_per_round")``.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from . import results, significance, tiers

__all__ = ["RATE_KEYS", "full_rate_runs", "with_full_rate", "per_run", "rate_change", "summary"]

RATE_KEYS = ("num_clients", "clients_per_round")


def _without_m(config) -> str:
    fields = {k: v for k, v in results.key_fields(config).items() if k != "clients_per_round"}
    return json.dumps(fields, sort_keys=True, default=str)


def full_rate_runs(tier: str) -> list[tuple[dict, tiers.Run]]:
    """(label, Table I run) for every participation configuration of ``tier`` that Table I runs at another M
    (the same configuration in every run-key field but ``clients_per_round``); the label is the participation
    label with that M."""
    part = tiers.experiment_configs(tier, "participation")
    rates = {r.config.clients_per_round for r in part}
    by_config = {_without_m(r.config): r for r in part}
    out, seen = [], set()
    for run in tiers.experiment_configs(tier, "table1"):
        match = by_config.get(_without_m(run.config))
        m = run.config.clients_per_round
        if match is None or m in rates:
            continue
        label = {**match.label, "clients_per_round": m}
        text = json.dumps(label, sort_keys=True, default=str)
        if text not in seen:
            seen.add(text)
            out.append((label, run))
    return out


def with_full_rate(stored: results.StoredExperiment, results_dir=None) -> tuple[pd.DataFrame, int]:
    """``stored.frame`` (the participation group) plus the stored Table I runs of :func:`full_rate_runs`, and how
    many runs were added."""
    frames = [stored.frame]
    for label, run in full_rate_runs(stored.tier):
        path = results.find_stored(run.config, stored.tier, results_dir, experiments=["table1"])
        if path is None:
            continue
        table, meta = results.load_run(path)
        for k, v in reversed(list(label.items())):
            table.insert(0, k, v)
        table.insert(0, "key", meta["key"])
        frames.append(table)
    return pd.concat(frames, ignore_index=True), len(frames) - 1


def per_run(frame: pd.DataFrame, last: int = 10) -> pd.DataFrame:
    """Per run: the mean test accuracy (%) over its final ``last`` rounds, keyed by the rate columns too; adds
    ``rate`` (100 M / K, %)."""
    out = significance.per_run_final(frame, last, by=RATE_KEYS)
    out["rate"] = 100 * out["clients_per_round"] / out["num_clients"]
    return out


def _by_seed(sub: pd.DataFrame) -> pd.DataFrame:
    """seed x rate table of accuracies, only the seeds that have every rate."""
    wide = sub.pivot_table(index="seed", columns="rate", values="accuracy")
    return wide.dropna()


def rate_change(runs: pd.DataFrame, reference: str = "FedEntOpt") -> pd.DataFrame:
    """Per partition and method (``runs``: :func:`per_run`): ``high``/``low`` (the highest and lowest rate, %),
    ``acc_high``/``acc_low`` (seed means, %), ``change`` (low minus high, pp) with ``change_std`` and the paired
    t-test ``p_change``; ``slope`` (least squares per seed, pp per pp of rate, mean over seeds); ``n`` seeds
    (those with every rate); and ``extra_loss`` = the method's change minus ``reference``'s (pp, paired by seed,
    with ``p_extra_loss``; NaN for the reference); ``best_at``: at how many of the ``rates`` the method has the
    highest seed mean of all methods.  Raises ``ValueError`` when ``reference`` has no run."""
    if reference not in set(runs["method"]):
        raise ValueError(f"reference must be a method with stored runs (got {reference!r}).")
    rows = []
    for part, grp in runs.groupby("partition", sort=False):
        wides = {m: _by_seed(g) for m, g in grp.groupby("method", sort=False)}
        best = grp.groupby(["rate", "method"])["accuracy"].mean().unstack().idxmax(axis=1)
        for m, w in wides.items():
            if w.shape[1] < 2 or len(w) == 0:
                continue
            hi, lo = w.columns.max(), w.columns.min()
            test = significance.paired_test(w[lo].to_numpy(), w[hi].to_numpy())
            slopes = [np.polyfit(w.columns.to_numpy(float), row.to_numpy(float), 1)[0] for _, row in w.iterrows()]
            row = {"partition": part, "method": m, "high": hi, "low": lo, "n": len(w),
                   "acc_high": w[hi].mean(), "acc_low": w[lo].mean(), "change": test["mean_diff"],
                   "change_std": test["std_diff"], "p_change": test["p_ttest"], "slope": float(np.mean(slopes)),
                   "extra_loss": np.nan, "p_extra_loss": np.nan, "best_at": int((best == m).sum()),
                   "rates": len(best)}
            ref = wides.get(reference)
            if m != reference and ref is not None and hi in ref and lo in ref:
                seeds = sorted(set(w.index) & set(ref.index))
                if seeds:
                    d_m = (w.loc[seeds, lo] - w.loc[seeds, hi]).to_numpy()
                    d_r = (ref.loc[seeds, lo] - ref.loc[seeds, hi]).to_numpy()
                    t = significance.paired_test(d_r, d_m)
                    row.update(extra_loss=t["mean_diff"], p_extra_loss=t["p_ttest"])
            rows.append(row)
    return pd.DataFrame(rows)


def summary(stored: results.StoredExperiment, last: int = 10, reference: str = "FedEntOpt",
            results_dir=None) -> pd.DataFrame:
    """:func:`rate_change` of the stored participation runs with the full-rate point (:func:`with_full_rate`)."""
    frame, _ = with_full_rate(stored, results_dir)
    return rate_change(per_run(frame, last), reference)
