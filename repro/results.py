"""Stored result tables: finished runs kept small enough to commit, so the book renders without retraining.

Layout: ``<results_dir>/<tier>/<group>/<key>.csv`` (the per-round table in its stored form,
``fedlib.training.runs.compact_table``: ``STORED_COLUMNS``, floats rounded to 5 decimals) and ``<key>.json`` beside
it (``label``: the run's table coordinates such as method, partition and seed; ``config``; ``code_version``;
``git_commit``; ``device``; ``wall_seconds``; ``data_source``; ``stored_at``).  ``key = run_key(config)``: 16 hex
digits of SHA-256 over the configuration without the fields that do not change the numbers' meaning (``device``,
``engine``, ``data_root``, ``download``, ``eval_batch_size``, ``checkpoint_every``), so a stored table is found again
after a new commit (the commit it came from is in the JSON and on every page).

Tables are read back with ``fedlib.training.runs.read_table``; ``ensure_runs`` trains what is missing and
``load_or_run`` gives a page its runs.  Statistics over them and the paper's values beside ours are in
``repro.reporting``.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import os
import platform
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from fedlib._validate import ParameterError
from fedlib.training.config import ExperimentConfig
from fedlib.training.runs import STORED_COLUMNS, atomic_write_text, compact_table, last_rounds_mean, read_table

__all__ = [
    "RESULTS_DIR",
    "run_key",
    "key_fields",
    "store_run",
    "load_run",
    "labelled_run",
    "load_group",
    "find_stored",
    "StoredGroup",
    "missing_runs",
    "group_dir",
    "ensure_runs",
    "load_or_run",
    "device_description",
    "git_commit",
]

ROOT = Path(__file__).resolve().parents[1]
#: Default folder of the stored tables (``results/`` of the repository).
RESULTS_DIR = ROOT / "results"

_KEY_EXCLUDE = ("device", "engine", "data_root", "download", "eval_batch_size", "checkpoint_every")


# ----------------------------------------------------------------------------------------------------
# keys, provenance


def key_fields(config: ExperimentConfig) -> dict:
    """The configuration fields that enter every run key (this one and the lying-clients group's)."""
    return {k: v for k, v in config.key_dict().items() if k not in _KEY_EXCLUDE}


def run_key(config: ExperimentConfig) -> str:
    """16 hex digits identifying what a run computes (see the module docstring)."""
    d = key_fields(config)
    payload = json.dumps(d, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def git_commit() -> str | None:
    """The 12-digit commit of the checkout fedlib is imported from (None outside git)."""
    from fedlib.training.runs import _git_commit

    return _git_commit()


def device_description(device: str = "cpu") -> str:
    """E.g. ``"cpu (x86_64, 2 cores), torch 2.x"`` or ``"cuda: NVIDIA H100 ..., torch 2.x"``."""
    import torch

    if str(device).startswith("cuda") and torch.cuda.is_available():
        return f"cuda: {torch.cuda.get_device_name(torch.device(device))}, torch {torch.__version__}"
    return f"cpu ({platform.machine()}, {os.cpu_count()} cores), torch {torch.__version__}"


#: Tiers whose stored runs (``results/<tier>/``) are trained on a CPU.  A GPU run of one shares its key (the device
#: does not enter it) but not its floats, so it is stored as another machine's (``results/machines/<name>/``) and
#: enters the scorecard only through the machine rule, never mixed into the column.
CPU_TIERS = ("quick", "subset")


def check_store(configs, tier: str, results_dir=None) -> None:
    """Refuse, before any work, a CUDA run of a :data:`CPU_TIERS` tier headed for the repository's own store."""
    here = Path(results_dir if results_dir is not None else RESULTS_DIR).resolve() == RESULTS_DIR.resolve()
    cuda = sorted({str(c.device) for c in configs if str(c.device).startswith("cuda")})
    if tier in CPU_TIERS and here and cuda:
        raise ParameterError(
            None,
            "results_dir",
            results_dir,
            f"results/machines/<machine name> (the {tier} tier's stored runs are CPU runs; a GPU run is another "
            "machine's, which the scorecard compares through its machine rule)",
            got=f"the repository's results/ for {tier}-tier runs on {', '.join(cuda)}",
        )


def group_dir(results_dir, tier: str, group: str) -> Path:
    """The folder of ``group``'s stored runs at ``tier`` (``results_dir`` None: :data:`RESULTS_DIR`)."""
    return Path(results_dir if results_dir is not None else RESULTS_DIR) / tier / group


def store_run(
    table: pd.DataFrame,
    config: ExperimentConfig,
    tier: str,
    group: str,
    label: dict,
    *,
    results_dir=None,
    wall_seconds: float | None = None,
    device: str | None = None,
    data_source: str | None = None,
    code_version: str | None = None,
    float_env: dict | str | None = "here",
    key: str | None = None,
    columns: dict | None = None,
    extra_meta: dict | None = None,
) -> Path:
    """Write one run's compact table and its JSON; returns the CSV path.  ``float_env``: what the run's floats
    depended on (``repro.float_env.current`` in the process that trained it; ``"here"``: this process's; None:
    not known, e.g. a run read back from the run cache).

    A group that keys its runs by more than the configuration (``repro.adversarial_runs``) passes its own
    ``key`` (default :func:`run_key`), ``columns`` to append to the stored table (name -> one value per row) and
    ``extra_meta``, fields added to the JSON (a field the JSON already has is refused)."""
    from fedlib.training.runs import code_version as _cv
    from repro import float_env as _fe

    check_store([config], tier, results_dir)
    key = run_key(config) if key is None else key
    meta = {
        "key": key,
        "tier": tier,
        "experiment": group,  # the JSON's name for the group, as in every file stored so far
        "label": label,
        "config": config.to_dict(),
        "code_version": code_version or _cv(),
        "git_commit": git_commit(),
        "device": device or device_description(config.device),
        "float_env": _fe.current(config.device) if float_env == "here" else float_env,
        "wall_seconds": None if wall_seconds is None else round(float(wall_seconds), 2),
        "data_source": data_source,
        "stored_at": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    clash = sorted(set(extra_meta or {}) & set(meta))
    if clash:
        raise ParameterError(None, "extra_meta", extra_meta, f"fields other than the stored ones {clash}")
    meta.update(extra_meta or {})
    stored = compact_table(table)
    for name, values in (columns or {}).items():
        stored[name] = values
    d = group_dir(results_dir, tier, group)
    d.mkdir(parents=True, exist_ok=True)
    csv = d / f"{key}.csv"
    atomic_write_text(csv, stored.to_csv(index=False))
    atomic_write_text(d / f"{key}.json", json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return csv


def load_run(csv_path) -> tuple[pd.DataFrame, dict]:
    """A stored table and its JSON."""
    csv_path = Path(csv_path)
    table = read_table(csv_path)
    meta = json.loads(csv_path.with_suffix(".json").read_text())
    return table, meta


def labelled_run(csv_path, label: dict | None = None) -> tuple[pd.DataFrame, dict]:
    """:func:`load_run` with the run's key and its label columns (``label``, default: the stored label) in front,
    as :func:`load_group` puts them."""
    table, meta = load_run(csv_path)
    for k, v in reversed(list((meta["label"] if label is None else label).items())):
        table.insert(0, k, v)
    table.insert(0, "key", meta["key"])
    return table, meta


@dataclass
class StoredGroup:
    """The stored runs of one group at one tier.

    ``frame``: one row per (run, round) with the label columns first; ``meta``: one row per run (label columns,
    key, code_version, git_commit, device, wall_seconds, data_source).
    """

    tier: str
    group: str
    frame: pd.DataFrame
    meta: pd.DataFrame

    def __len__(self) -> int:
        return len(self.meta)

    @property
    def empty(self) -> bool:
        return len(self.meta) == 0


def load_group(tier: str, group: str, results_dir=None) -> StoredGroup:
    """Every stored run of ``group`` at ``tier`` (an empty ``StoredGroup`` if none).  Parsed once per content of
    the folder and handed out as a copy: a caller that changes it changes nothing for the next, and a run stored
    or rewritten meanwhile is read."""
    d = group_dir(results_dir, tier, group).resolve()
    once = _read_group(tier, group, d, _folder_digest(d))
    return StoredGroup(tier, group, once.frame.copy(), once.meta.copy())


def _folder_digest(folder: Path) -> str:
    """A digest of a group folder's stored files, names and bytes (of no files if there is no folder)."""
    digest = hashlib.blake2b(digest_size=16)
    for path in sorted(folder.glob("*.csv")) + sorted(folder.glob("*.json")) if folder.is_dir() else []:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@functools.lru_cache(maxsize=64)
def _read_group(tier: str, group: str, d: Path, digest: str) -> StoredGroup:
    frames, metas, labels = [], [], []
    for csv in sorted(d.glob("*.csv")) if d.is_dir() else []:
        if not csv.with_suffix(".json").exists():
            continue
        table, meta = labelled_run(csv)
        label = meta["label"]
        frames.append(table)
        labels.append((label, meta["key"]))
        metas.append(
            {
                **label,
                "key": meta["key"],
                "code_version": meta.get("code_version"),
                "git_commit": meta.get("git_commit"),
                "device": meta.get("device"),
                "wall_seconds": meta.get("wall_seconds"),
                "data_source": meta.get("data_source"),
                "dataset": meta["config"]["dataset"] if "dataset" not in label else label["dataset"],
                "rounds": meta["config"]["rounds"],
            }
        )
    _check_one_run_per_label(labels, d)
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["key", *STORED_COLUMNS])
    return StoredGroup(tier, group, frame, pd.DataFrame(metas))


def _check_one_run_per_label(runs: list[tuple[dict, str]], folder) -> None:
    """``runs``: (label, key) per stored run.  Two stored runs with one label (say, one stored under an older key)
    would be averaged as one run and silently change every statistic over seeds; refuse them, naming both keys."""
    seen = {}
    for label, key in runs:
        text = json.dumps(label, sort_keys=True, default=str)
        if text in seen:
            raise ValueError(
                f"{folder}: runs {seen[text]} and {key} are stored with the same label {text}; "
                "keep one (a run stored under an older key is the usual cause)."
            )
        seen[text] = key


def find_stored(config: ExperimentConfig, tier: str, results_dir=None, groups: Iterable[str] | None = None):
    """Path of a stored CSV for ``config`` in any group folder of ``tier`` (None if there is none)."""
    root = Path(results_dir if results_dir is not None else RESULTS_DIR) / tier
    key = run_key(config)
    names = (
        list(groups)
        if groups is not None
        else (sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else [])
    )
    for name in names:
        p = root / name / f"{key}.csv"
        if p.exists() and p.with_suffix(".json").exists():
            return p
    return None


def missing_runs(runs: Sequence, tier: str, results_dir=None) -> list:
    """The runs (``repro.tiers.PlannedRun``) with no stored table in their own group folder."""
    return [r for r in runs if not (group_dir(results_dir, tier, r.group) / f"{run_key(r.config)}.csv").exists()]


# ----------------------------------------------------------------------------------------------------
# running what is missing


def _train_one(config: ExperimentConfig, run_root: str | None):
    """Train one run (a job of ``repro.runner.run_each``); returns (table, wall seconds, data source, float
    environment), or (None, the reason, None, None) for a configuration the trainer refuses."""
    from fedlib.data.datasets import load_dataset
    from fedlib.training.trainer import run_experiment
    from repro import float_env

    t0 = time.perf_counter()
    try:
        res = run_experiment(config, run_root=run_root, progress=False)
    except ValueError as exc:  # e.g. an algorithm the trainer does not run yet, an impossible partition
        return None, f"{type(exc).__name__}: {exc}", None, None
    wall = time.perf_counter() - t0
    if res.from_cache:  # the run cache holds it: the stored wall time is the training time it took
        wall = float(res.table["seconds"].sum())
    try:
        source = load_dataset(
            config.dataset, data_root=config.data_root, download=False, **config.dataset_options
        ).source
    except Exception:  # noqa: BLE001 -- provenance only
        source = config.dataset
    env = float_env.current(config.device)
    if res.from_cache:  # trained earlier by another process: its environment is not known here
        env = None
    return res.table, wall, source, env


def ensure_runs(
    runs: Sequence,
    tier: str,
    *,
    results_dir=None,
    run_root="runs",
    workers: int = 1,
    threads: int | None = None,
    log=print,
    ray=None,
) -> dict:
    """Make sure every run has a stored table: copy one stored for another group of the tier, else train
    (``fedlib.training.trainer.run_experiment`` with the run cache ``run_root``) and store.  ``workers`` processes train
    in parallel with ``threads`` torch threads each (default: cores // workers).  With ``ray`` (a
    ``repro.distributed.RayOptions``) every run is a Ray task instead (``workers``/``threads`` unused).  The runs go
    through ``repro.runner.run_each``.  Returns counts and wall time."""
    import shutil

    from repro.runner import run_each

    check_store([r.config for r in runs], tier, results_dir)
    t0 = time.perf_counter()
    todo, copied = [], 0
    seen = set()
    for r in missing_runs(runs, tier, results_dir):
        src = find_stored(r.config, tier, results_dir)
        if src is not None:
            table, meta = load_run(src)
            dst = group_dir(results_dir, tier, r.group)
            dst.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst / src.name)
            meta = {**meta, "experiment": r.group, "label": r.label}
            (dst / src.with_suffix(".json").name).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
            copied += 1
        elif (r.group, run_key(r.config)) not in seen:
            seen.add((r.group, run_key(r.config)))
            todo.append(r)
    workers = max(1, workers)
    if ray is None:
        threads = threads or max(1, (os.cpu_count() or 1) // workers)
        options = {"backend": "pool" if workers > 1 else "serial", "workers": workers, "threads": threads}
    else:
        options = {"backend": "ray", "ray": ray}
    root = None if run_root is None else str(Path(run_root).resolve())  # a Ray worker needs the absolute path
    trained, skipped = 0, []
    for n, (i, out, err) in enumerate(run_each(_train_one, [(r.config, root) for r in todo], run_root=root, **options)):
        r, (table, wall, source, env) = todo[i], out if err is None else (None, err, None, None)
        if table is None:
            skipped.append((r.label, wall))
            log(f"skipped {r.group} {r.label}: {wall}")
            continue
        provenance = {"wall_seconds": wall, "data_source": source, "float_env": env}
        store_run(table, r.config, tier, r.group, r.label, results_dir=results_dir, **provenance)
        trained += 1
        acc = 100 * last_rounds_mean(table, 10)
        log(f"[{n + 1}/{len(todo)}] {r.group} {r.label}: final accuracy {acc:.2f} %, {wall:.1f} s")
    return {
        "copied": copied,
        "trained": trained,
        "already": len(runs) - copied - len(todo),
        "skipped": skipped,
        "wall_seconds": time.perf_counter() - t0,
    }


# ----------------------------------------------------------------------------------------------------
# for the notebooks: load (or, in the quick tier, train what is missing)


def load_or_run(
    tier: str,
    group: str,
    results_dir=None,
    *,
    run_missing: bool = False,
    run_root: str | None = None,
    workers: int = 1,
    log=print,
) -> StoredGroup:
    """The stored runs of ``group`` at ``tier``; with ``run_missing`` (honoured for the quick tier only:
    the other tiers take hours, use ``scripts/run_experiments.py``) the missing ones are trained first."""
    from repro import tiers

    if run_missing and tier == "quick":
        runs = tiers.group_configs(tier, group)
        if missing_runs(runs, tier, results_dir):
            root = run_root or str(ROOT / "runs")
            info = ensure_runs(runs, tier, results_dir=results_dir, run_root=root, workers=workers, log=log)
            log(f"trained {info['trained']} missing runs in {info['wall_seconds']:.0f} s")
    return load_group(tier, group, results_dir)
