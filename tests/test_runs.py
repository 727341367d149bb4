"""Run directories: cached results are read back, interrupted runs resume bitwise, files are atomic."""

import json

import pytest
import torch
from conftest import write_tiny_npz

import fedlib.training.trainer as trainer
from fedlib.training.config import ExperimentConfig
from fedlib.training.runs import TABLE_COLUMNS, RunDir, atomic_write_text, code_version
from fedlib.training.trainer import run_experiment


@pytest.fixture(scope="module")
def tiny_npz(tmp_path_factory):
    return write_tiny_npz(tmp_path_factory.mktemp("data"), seed=1, num_samples=200, num_train=150)


def _cfg(path, **kw):
    base = dict(
        dataset="npz",
        dataset_options={"path": path},
        num_clients=6,
        clients_per_round=2,
        rounds=5,
        local_epochs=1,
        batch_size=16,
        min_partition_size=2,
        beta=0.5,
        checkpoint_every=2,
        selector="fedentopt",
        selector_params={"buffer_size": 2},
        algorithm="scaffold",
        dropout_prob=0.3,
        straggler_fraction=0.5,
    )
    base.update(kw)
    return ExperimentConfig(**base)


@pytest.mark.slow
def test_resume_after_interruption_is_bitwise_identical(tiny_npz, tmp_path):
    cfg = _cfg(tiny_npz)
    full = run_experiment(cfg, run_root=tmp_path / "a", progress=False)
    # killed after round 3: the last checkpoint is round 2, so round 3 is recomputed on resume
    part = run_experiment(cfg, run_root=tmp_path / "b", progress=False, stop_after=3)
    assert not part.finished
    assert torch.load(RunDir(tmp_path / "b", cfg).checkpoint_file, weights_only=True)["round"] == 2
    resumed = run_experiment(cfg, run_root=tmp_path / "b", progress=False)
    assert resumed.finished and not resumed.from_cache
    for k in full.global_params:
        assert torch.equal(full.global_params[k], resumed.global_params[k]), k
    cols = [c for c in TABLE_COLUMNS if c != "seconds"]
    assert full.table[cols].equals(resumed.table[cols])


@pytest.mark.slow
def test_finished_run_is_read_back_not_recomputed(tiny_npz, tmp_path, monkeypatch):
    cfg = _cfg(tiny_npz, rounds=2)
    first = run_experiment(cfg, run_root=tmp_path, progress=False)
    d = RunDir(tmp_path, cfg)
    assert first.run_dir == d.path and d.is_finished()
    stored = json.loads(d.config_file.read_text())
    assert stored["config"] == cfg.to_dict() and stored["code_version"] == code_version()

    def boom(*a, **k):
        raise AssertionError("a finished run must not be recomputed")

    monkeypatch.setattr(trainer, "Experiment", boom)
    again = run_experiment(cfg, run_root=tmp_path, progress=False)
    assert again.from_cache
    import pandas as pd

    pd.testing.assert_frame_equal(again.table, first.table, check_exact=True)
    for k in first.global_params:
        assert torch.equal(again.global_params[k], first.global_params[k])


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    atomic_write_text(tmp_path / "x.json", "{}")
    atomic_write_text(tmp_path / "x.json", '{"a": 1}')
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]
    assert json.loads((tmp_path / "x.json").read_text()) == {"a": 1}


def test_code_version_env_override(monkeypatch):
    monkeypatch.setenv("FEDLIB_CODE_VERSION", "test-1")
    assert code_version() == "test-1"
