"""Fig. 2 (accuracy versus participation rate) as numbers that can be tested.

The paper varies M/K from its 10 % baseline down to 4 %-9 % (§V-B3) and reads Fig. 2 as: "FedEntOpt consistently
maintains high accuracy, even with lower participation rates regardless of the model size, while the other methods
partially suffer performance degradation", and "the difference in classification accuracy is particularly
pronounced in the challenging Dir(0.1) case".  It gives no numbers, so this module turns the reading into
statistics over the stored runs, seed by seed (at one seed every method and rate shares the federation):

``with_full_rate(stored, results_dir)``
    The participation group's runs plus the paper's 10 % point: every stored Table I run whose configuration is a
    participation configuration's in every run-key field but ``clients_per_round`` (the tier's own M) and the seed,
    labelled like the participation runs with its own seed (a seed plan may give a cell of Table I more seeds than
    the participation cells of the same method).  Nothing is added where no such run is stored.
``per_run(frame)``
    :func:`repro.significance.per_run_final` keyed by K and M too, with the rate 100 M / K.
``rate_change(runs, reference)``
    Per setting (partition, model, ...) and method, over the seeds that have every method and rate: the change of
    the final accuracy from the highest to the lowest rate (paired by seed, with its t-test p), the least-squares
    slope over the rates, the gap to ``reference`` and how much more the method loses than ``reference``.

:mod:`repro.quantities` judges the paper's reading (the statements of §V-B3) on the same runs.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from fedlib._validate import ParameterError
from repro import results, significance, tiers

__all__ = ["RATE_KEYS", "full_rate_runs", "with_full_rate", "per_run", "group_columns", "rate_change", "summary"]

RATE_KEYS = ("num_clients", "clients_per_round")


def _family(config) -> str:
    """The run-key fields but M and the seed: a participation curve's configuration at any rate and seed."""
    fields = {k: v for k, v in results.key_fields(config).items() if k not in ("clients_per_round", "seed")}
    return json.dumps(fields, sort_keys=True, default=str)


def full_rate_runs(tier: str) -> list[tuple[dict, tiers.PlannedRun]]:
    """(label, Table I run) for every Table I run of ``tier`` at an M the participation group lacks whose
    configuration is a participation configuration's in every run-key field but ``clients_per_round`` and the
    seed, at any seed Table I runs (a seed plan may plan the two groups' cells with different seeds); the label is
    that participation label with the run's M and seed."""
    part = tiers.group_configs(tier, "participation")
    rates = {r.config.clients_per_round for r in part}
    by_family = {_family(r.config): r for r in part}
    out = []
    for run in tiers.group_configs(tier, "table1"):
        match = by_family.get(_family(run.config))
        m = run.config.clients_per_round
        if match is not None and m not in rates:
            out.append(({**match.label, "clients_per_round": m, "seed": run.config.seed}, run))
    return out


def with_full_rate(stored: results.StoredGroup, results_dir=None) -> tuple[pd.DataFrame, int]:
    """``stored.frame`` (the participation group) plus the stored Table I runs of :func:`full_rate_runs`, and how
    many runs were added."""
    frames = [stored.frame]
    for label, run in full_rate_runs(stored.tier):
        path = results.find_stored(run.config, stored.tier, results_dir, groups=["table1"])
        if path is None:
            continue
        frames.append(results.labelled_run(path, label)[0])
    return pd.concat(frames, ignore_index=True), len(frames) - 1


def per_run(frame: pd.DataFrame, last: int = 10) -> pd.DataFrame:
    """Per run: the mean test accuracy (%) over its final ``last`` rounds, keyed by the rate columns too; adds
    ``rate`` (100 M / K, %)."""
    out = significance.per_run_final(frame, last, by=RATE_KEYS)
    out["rate"] = 100 * out["clients_per_round"] / out["num_clients"]
    return out


#: Columns of :func:`per_run` that are not a group of their own: the rate and what it is made of, the method
#: and seed compared within a group, and the statistic.
_NOT_GROUP = ("method", "seed", "accuracy", "rate", "clients_per_round")


def group_columns(runs: pd.DataFrame) -> list[str]:
    """The columns of ``runs`` that split it into settings compared separately (partition, model, data set, K)."""
    return [c for c in runs.columns if c not in _NOT_GROUP]


def _group_rows(key: dict, wide: pd.DataFrame, reference: str) -> list[dict]:
    """Rows of :func:`rate_change` for one setting; ``wide``: seed x (method, rate), seeds with every column."""
    means = wide.mean().unstack("method")  # rate x method
    best = means.idxmax(axis=1)
    ref_rates = sorted(means.index[means[reference].notna()])
    hi, lo = ref_rates[-1], ref_rates[0]
    d_ref = wide[(reference, lo)] - wide[(reference, hi)]
    rows = []
    for m in means.columns:
        if (m, hi) not in wide or (m, lo) not in wide:
            continue
        w = wide[m]
        test = significance.paired_test(w[lo].to_numpy(), w[hi].to_numpy())
        x = w.columns.to_numpy(float)
        row = {
            **key,
            "method": m,
            "high": hi,
            "low": lo,
            "n": len(wide),
            "acc_high": w[hi].mean(),
            "acc_low": w[lo].mean(),
            "change": test["mean_diff"],
            "change_std": test["std_diff"],
            "p_change": test["p_ttest"],
            "slope": float(np.mean([np.polyfit(x, r.to_numpy(float), 1)[0] for _, r in w.iterrows()])),
            "gap": np.nan,
            "extra_loss": np.nan,
            "p_extra_loss": np.nan,
            "best_at": int((best == m).sum()),
            "rates": len(best),
        }
        if m != reference:
            shared = [r for r in w.columns if (reference, r) in wide]
            row["gap"] = float((wide[reference][shared] - w[shared]).to_numpy().mean())
            t = significance.paired_test(d_ref.to_numpy(), (w[lo] - w[hi]).to_numpy())
            row.update(extra_loss=t["mean_diff"], p_extra_loss=t["p_ttest"])
        rows.append(row)
    return rows


def rate_change(runs: pd.DataFrame, reference: str = "FedEntOpt") -> pd.DataFrame:
    """What fewer clients cost each method, per setting (:func:`group_columns`: partition, model, K, ...).

    ``runs``: :func:`per_run`.  Within a setting only the seeds that have a run for every method and rate enter
    (``n``), so every number below is over the same seeds.  Per method: ``high``/``low`` (the reference's highest
    and lowest rate, %), ``acc_high``/``acc_low`` (seed means, %), ``change`` = acc(low) - acc(high) (pp, paired
    by seed) with ``change_std`` and the paired t-test ``p_change``; ``slope`` (least squares over the method's
    rates per seed, pp of accuracy per pp of rate, mean over seeds; positive: it loses accuracy as fewer clients
    take part); for the other methods ``gap`` (reference minus method, pp, mean over rates and seeds) and
    ``extra_loss`` = the reference's change minus the method's (pp, paired by seed; positive: the method loses
    that much more than the reference) with the paired t-test ``p_extra_loss``; ``best_at``: at how many of the
    ``rates`` the method has the highest mean.  Raises ``ValueError`` when ``reference`` has no run, and when a
    setting holds two runs of one method, rate and seed."""
    if reference not in set(runs["method"]):
        present = ", ".join(map(repr, dict.fromkeys(runs["method"])))
        raise ParameterError(None, "reference", reference, f"a method with stored runs: {present}")
    keys = group_columns(runs)
    rows = []
    for key, grp in runs.groupby(keys, sort=False) if keys else [((), runs)]:
        key = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        try:
            wide = grp.pivot(index="seed", columns=["method", "rate"], values="accuracy").dropna()
        except ValueError as err:
            raise ValueError(f"runs holds two runs of one method, rate and seed in setting {key}.") from err
        if len(wide) and reference in wide.columns.get_level_values("method") and len(wide[reference].columns) > 1:
            rows += _group_rows(key, wide.sort_index(axis=1), reference)
    return pd.DataFrame(rows)


def summary(
    stored: results.StoredGroup, last: int = 10, reference: str = "FedEntOpt", results_dir=None
) -> pd.DataFrame:
    """:func:`rate_change` of the stored participation runs with the full-rate point (:func:`with_full_rate`)."""
    frame, _ = with_full_rate(stored, results_dir)
    return rate_change(per_run(frame, last), reference)
