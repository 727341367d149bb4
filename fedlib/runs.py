"""Run directories: results keyed by configuration and code version, checkpoints, resume.

Layout of ``<run_root>/<hash>/`` (``hash = config_hash(config, code_version())``):

``config.json``      the configuration (``ExperimentConfig.to_dict()``) and the code version
``checkpoint.pt``    the latest checkpoint (``torch.save``): round index, global params, server state, client
                     states, selector state, the numpy bit-generator states of the selection and availability
                     streams, the torch RNG state and the table rows so far.  Written every
                     ``config.checkpoint_every`` rounds and after the last round (then it holds the final model).
``table.csv``        the tidy per-round table (``fedlib.trainer.TABLE_COLUMNS``); ``table.parquet`` too when
                     pyarrow is installed.
``result.json``      written last: the summary (final accuracy = mean of the last 10 rounds, seconds per round,
                     total bytes).  Its presence marks the run as finished.

Every file is written atomically: to a temporary file in the same folder, then ``os.replace``.

Code version (``code_version()``): ``fedlib.__version__``, or the value of the environment variable
``FEDLIB_CODE_VERSION`` if set. It keys the cache, so bump ``fedlib.__version__`` whenever a change alters what
training computes; commits that do not (documentation, notebooks, new options with old defaults) keep their
cached runs. The git commit a run was computed with is recorded in ``config.json`` and ``result.json``
(``git_commit``) as provenance, not used as a key: keying on it made every commit retrain everything.
"""
from __future__ import annotations

import functools
import json
import os
import subprocess
import tempfile
from pathlib import Path

import pandas as pd
import torch

from .config import ExperimentConfig, config_hash

__all__ = ["code_version", "RunDir", "atomic_write_bytes", "atomic_write_text", "read_table"]


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
    from . import __version__

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


def _atomic_save(obj, path: Path) -> None:
    import io

    buf = io.BytesIO()
    torch.save(obj, buf)
    atomic_write_bytes(path, buf.getvalue())


def read_table(path) -> pd.DataFrame:
    """Read a ``table.csv`` back with the trainer's dtypes."""
    t = pd.read_csv(path, dtype={"picked": str})
    t["picked"] = t["picked"].fillna("")
    t["covers_all_classes"] = t["covers_all_classes"].astype(bool)
    return t


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
        atomic_write_text(self.config_file, json.dumps(
            {"config": self.config.to_dict(), "code_version": self.version, "git_commit": _git_commit(),
             "hash": self.hash}, indent=2,
            sort_keys=True) + "\n")

    def save_checkpoint(self, ckpt: dict) -> None:
        _atomic_save(ckpt, self.checkpoint_file)

    def load_checkpoint(self) -> dict | None:
        if not self.checkpoint_file.exists():
            return None
        return torch.load(self.checkpoint_file, map_location="cpu", weights_only=True)

    def write_result(self, table: pd.DataFrame) -> None:
        from .trainer import RunResult

        atomic_write_text(self.table_file, table.to_csv(index=False))
        try:
            import io

            import pyarrow  # noqa: F401

            buf = io.BytesIO()
            table.to_parquet(buf, index=False)
            atomic_write_bytes(self.path / "table.parquet", buf.getvalue())
        except ImportError:
            pass
        summary = RunResult(self.config, table).summary()
        atomic_write_text(self.result_file, json.dumps(
            {"hash": self.hash, "code_version": self.version, "git_commit": _git_commit(), **summary},
            indent=2, sort_keys=True) + "\n")

    def load_result(self):
        """The stored ``RunResult`` of a finished run (``from_cache=True``; final params from the checkpoint)."""
        from .trainer import RunResult

        table = read_table(self.table_file)
        ckpt = self.load_checkpoint()
        params = ckpt["global_params"] if ckpt is not None else None
        return RunResult(self.config, table, self.path, from_cache=True, finished=True, global_params=params)
