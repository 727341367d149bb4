"""Every command-line script of the checkout answers ``--help`` from any folder, without the checkout on
``PYTHONPATH`` (which conftest sets for the other tests' subprocesses), before it does any work."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(
    p for folder in ("scripts", "benchmarks") for p in (ROOT / folder).glob("*.py") if "__main__" in p.read_text()
)


def test_the_scripts_are_found():
    names = {p.name for p in SCRIPTS}
    assert {"run_experiments.py", "reproduce_stored.py", "seed_plan.py", "bench_selection.py"} <= names


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_script_prints_its_usage_from_anywhere_before_any_work(script, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, str(script), "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("usage: "), out.stdout[:300]
    assert not any(tmp_path.iterdir()), "--help wrote files"
