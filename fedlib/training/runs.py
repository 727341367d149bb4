"""Run tables and run directories: the per-round table of a run, its reading back, the run cache and resume.

A run's table (``TABLE_COLUMNS``, described in ``fedlib.training.trainer``) is kept in the run cache, a
``RunDir`` under ``config_hash(config, code_version())`` with every column and the checkpoints that let a run
resume, and in the caller's store of results, ``compact_table`` (``STORED_COLUMNS``, floats rounded to 5 decimals)
under a key without the code version (``ExperimentConfig.key_dict``). ``read_table`` reads both back.

A run directory holds ``config.json`` (configuration, code version, git commit as provenance), ``checkpoint.pt``
(everything a resume needs, written every ``checkpoint_every`` rounds and at the end), ``table.csv`` and
``result.json``, written last: its presence marks the run finished. Every file
is written atomically. ``code_version()`` (``fedlib.__version__`` or ``$FEDLIB_CODE_VERSION``) keys the cache:
bump the version whenever a change alters what training computes.
"""

from __future__ import annotations

import functools
import io
import json
import math
import os
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

from fedlib.training.config import ExperimentConfig, config_hash

__all__ = [
    "last_rounds_mean",
    "TABLE_COLUMNS",
    "STORED_COLUMNS",
    "RunResult",
    "make_table",
    "normalise_table",
    "compact_table",
    "read_table",
    "code_version",
    "RunDir",
    "atomic_write_bytes",
    "atomic_write_text",
]

# fmt: off
#: Columns of a run's per-round table, in order (``fedlib.training.trainer`` describes each).
TABLE_COLUMNS = (
    "round", "lr", "test_accuracy", "test_loss", "train_loss", "picked", "num_picked", "num_trained", "num_dropped",
    "entropy_bits", "covers_all_classes", "entropy_bits_trained", "bytes_uploaded", "cumulative_bytes", "seconds",
    "kept", "reselection_entropy_bits", "kept_covers_all_classes", "phase",
)
#: Columns of a stored table (a caller's result store): no client ids, floats rounded to 5 decimals.
STORED_COLUMNS = (
    "round", "test_accuracy", "test_loss", "train_loss", "num_picked", "num_trained", "num_dropped", "entropy_bits",
    "covers_all_classes", "entropy_bits_trained", "reselection_entropy_bits", "kept_covers_all_classes", "phase",
    "cumulative_bytes", "seconds",
)
# fmt: on


# ----------------------------------------------------------------------------------------------------
# run tables


def last_rounds_mean(table: pd.DataFrame, last: int = 10, *, by: Sequence[str] = (), column: str = "test_accuracy"):
    """Mean of ``column`` over a run's last ``last`` evaluated rounds (round >= 1, ``column`` not NaN): the paper's
    per-run number (§V-A5). A float for one run; with ``by`` (the columns naming a run) a Series, one mean per run.

    >>> t = pd.DataFrame({"round": [0, 1, 2, 3], "test_accuracy": [0.1, 0.2, float("nan"), 0.6]})
    >>> round(last_rounds_mean(t, 2), 6)  # rounds 1 and 3; round 2 was not evaluated
    0.4
    """
    t = table[(table["round"] >= 1) & table[column].notna()]
    by = list(by)
    t = t.sort_values([*by, "round"])
    if not by:
        return float(t[column].tail(last).mean()) if len(t) else float("nan")
    return t.groupby(by, sort=False)[column].apply(lambda s: s.tail(last).mean())


@dataclass
class RunResult:
    """Outcome of ``fedlib.training.trainer.run_experiment``: the per-round table, the run directory, whether it was
    read from the cache, whether it finished (``stop_after``) and the final global model (None if not available)."""

    config: ExperimentConfig
    table: pd.DataFrame
    run_dir: Path | None = None
    from_cache: bool = False
    finished: bool = True
    global_params: dict | None = field(default=None, repr=False)

    @property
    def final_accuracy(self) -> float:
        """Mean test accuracy over the last 10 evaluated rounds (:func:`last_rounds_mean`)."""
        return last_rounds_mean(self.table, 10)

    def summary(self) -> dict:
        t = self.table[self.table["round"] >= 1]
        return {
            "final_accuracy": self.final_accuracy,
            "rounds": int(t["round"].max()) if len(t) else 0,
            "seconds_per_round": float(t["seconds"].mean()) if len(t) else float("nan"),
            "total_bytes": int(self.table["cumulative_bytes"].iloc[-1]) if len(self.table) else 0,
        }


def make_table(rows) -> pd.DataFrame:
    """The per-round table of a run from its row dicts (the trainer's rows)."""
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


def normalise_table(table: pd.DataFrame) -> pd.DataFrame:
    """A ``table.csv`` read back with the in-memory dtypes: the id columns as strings (CSV reads "" as NaN and a
    single id as a number)."""
    t = table.copy()

    def as_ids(v):
        if isinstance(v, str):
            return v
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return ""
        return str(int(v))

    text = t["picked"].dtype  # the string dtype this pandas gives the id columns
    t["kept"] = t["kept"].map(as_ids).astype(text)
    t["phase"] = t["phase"].astype(text)
    return t[[c for c in TABLE_COLUMNS if c in t.columns] + [c for c in t.columns if c not in TABLE_COLUMNS]]


def compact_table(table: pd.DataFrame) -> pd.DataFrame:
    """The stored form of a run's table: the ``STORED_COLUMNS`` it has, floats rounded to 5 decimals (the
    cumulative byte count aside)."""
    t = table[[c for c in STORED_COLUMNS if c in table.columns]].copy()
    for c in t.columns:
        if t[c].dtype.kind == "f" and c not in ("cumulative_bytes",):
            t[c] = t[c].round(5)
    return t


def read_table(path) -> pd.DataFrame:
    """A run table read back from CSV with the dtypes of a fresh run: a run directory's ``table.csv`` (every
    column, ``normalise_table``) or a stored compact table (``STORED_COLUMNS``)."""
    t = pd.read_csv(path, dtype={"picked": str})
    for c in ("covers_all_classes", "kept_covers_all_classes"):
        if c in t.columns and t[c].notna().all():  # a table stored before a column existed reads it as NaN
            t[c] = t[c].astype(bool)
    if "picked" not in t.columns:  # a stored table
        return t
    t["picked"] = t["picked"].fillna("")
    return normalise_table(t)


# ----------------------------------------------------------------------------------------------------
# run directories


@functools.lru_cache(maxsize=1)
def _git_commit() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    commit = out.stdout.strip()
    return commit[:12] if commit else None


def code_version() -> str:
    """``fedlib.__version__``, or ``$FEDLIB_CODE_VERSION`` (see the module docstring)."""
    env = os.environ.get("FEDLIB_CODE_VERSION")
    if env:
        return env
    from fedlib import __version__

    return __version__


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder and ``os.replace``."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def _write_json(path: Path, data: dict) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


class RunDir:
    """The run directory of one configuration under ``run_root``."""

    def __init__(self, run_root, config: ExperimentConfig, *, version: str | None = None):
        self.config = config
        self.version = code_version() if version is None else version
        self.hash = config_hash(config, self.version)
        self.path = Path(run_root) / self.hash

    config_file = property(lambda self: self.path / "config.json")
    checkpoint_file = property(lambda self: self.path / "checkpoint.pt")
    table_file = property(lambda self: self.path / "table.csv")
    result_file = property(lambda self: self.path / "result.json")

    def is_finished(self) -> bool:
        return self.result_file.exists() and self.table_file.exists()

    def prepare(self) -> None:
        """Create the folder and write ``config.json``."""
        self.path.mkdir(parents=True, exist_ok=True)
        provenance = {"code_version": self.version, "git_commit": _git_commit(), "hash": self.hash}
        _write_json(self.config_file, {"config": self.config.to_dict(), **provenance})

    def save_checkpoint(self, ckpt: dict) -> None:
        buf = io.BytesIO()
        torch.save(ckpt, buf)
        atomic_write_bytes(self.checkpoint_file, buf.getvalue())

    def load_checkpoint(self) -> dict | None:
        if not self.checkpoint_file.exists():
            return None
        return torch.load(self.checkpoint_file, map_location="cpu", weights_only=True)

    def write_result(self, table: pd.DataFrame) -> None:
        atomic_write_text(self.table_file, table.to_csv(index=False))
        summary = RunResult(self.config, table).summary()
        _write_json(
            self.result_file, {"hash": self.hash, "code_version": self.version, "git_commit": _git_commit(), **summary}
        )

    def load_result(self):
        """The stored ``RunResult`` of a finished run (``from_cache=True``; final params from the checkpoint)."""
        table = read_table(self.table_file)
        ckpt = self.load_checkpoint()
        params = ckpt["global_params"] if ckpt is not None else None
        return RunResult(self.config, table, self.path, from_cache=True, finished=True, global_params=params)
