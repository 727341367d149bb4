"""CLI: --help, errors before training, a tiny run and a tiny sweep."""
import subprocess
import sys

import pytest

from fedlib.cli import main
from fedlib.partition import partition_fields
from conftest import write_tiny_npz


@pytest.fixture(scope="module")
def tiny_npz(tmp_path_factory):
    return write_tiny_npz(tmp_path_factory.mktemp("data"), seed=2, num_samples=160, num_train=120)


def _args(path, run_root):
    return ["--dataset", "npz", "--dataset-option", f"path={path}", "--clients", "6", "--per-round", "2",
            "--rounds", "2", "--epochs", "1", "--batch-size", "16", "--min-partition-size", "2",
            "--run-root", str(run_root), "--no-progress"]


def test_help():
    out = subprocess.run([sys.executable, "-m", "fedlib", "run", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--selector" in out.stdout and "--buffer" in out.stdout


def test_bad_config_fails_before_training(tiny_npz, tmp_path, capsys):
    assert main(["run", "--selector", "entopt"] + _args(tiny_npz, tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("error: config field 'selector': got 'entopt'; allowed: 'random', 'fedentopt', 'kl', "
                           "'dc'.")
    assert not (tmp_path).exists() or not any(tmp_path.iterdir())
    assert main(["run", "--buffer", "0.5"] + _args(tiny_npz, tmp_path)) == 2
    assert "--buffer is a parameter of selector 'fedentopt', not of 'random'." in capsys.readouterr().err
    # a sweep checks every configuration before the first run
    assert main(["sweep", "--algorithms", "fedavg,fedx", "--seeds", "0"] + _args(tiny_npz, tmp_path)) == 2
    assert "config field 'algorithm': got 'fedx'" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_parse_partition():
    # the command line's notation (--partitions) through the one parser, fedlib.partition
    assert partition_fields("dir0.1") == {"partition": "dirichlet", "beta": 0.1, "classes_per_client": None}
    assert partition_fields("c2")["classes_per_client"] == 2
    with pytest.raises(ValueError, match="partition 'd0.1' not understood"):
        partition_fields("d0.1")


def test_run_and_sweep(tiny_npz, tmp_path, capsys):
    args = _args(tiny_npz, tmp_path)
    assert main(["run", "--selector", "fedentopt", "--buffer", "0.5", "--algorithm", "fedprox", "--mu", "0.01"]
                + args) == 0
    out = capsys.readouterr().out
    assert "final accuracy (mean of last 10 rounds)" in out
    assert main(["sweep", "--selectors", "random,fedentopt", "--buffer", "2", "--algorithms", "fedavg",
                 "--partitions", "dir0.5", "--seeds", "0,1"] + args) == 0
    out = capsys.readouterr().out
    assert "accuracy (%)" in out and "fedentopt" in out and " ± " in out
