"""scripts/run_notebooks.py never waits forever: a hung cell times out, the page is run once more, then the run
fails naming the page and the cell, and writes no executed notebook. It checks a page's parameters itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "scripts" / "run_notebooks.py"


def _table(tmp_path: Path, body: str) -> Path:
    params = nbformat.v4.new_code_cell("naptime = 60  # seconds the second cell sleeps")
    params.metadata["tags"] = ["parameters"]
    nb = nbformat.v4.new_notebook(cells=[params, nbformat.v4.new_code_cell(body)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "sleepy.ipynb")
    runs = {
        "runs": [
            {
                "name": "sleepy",
                "notebook": str(tmp_path / "sleepy.ipynb"),
                "tier": "quick",
                "parameters": {"naptime": 60},
            }
        ]
    }
    (tmp_path / "runs.yaml").write_text(yaml.safe_dump(runs))
    return tmp_path / "runs.yaml"


def _run(tmp_path: Path, table: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(RUNNER), "--runs", str(table), "--out-dir", str(tmp_path / "out"), *extra],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_a_hung_cell_times_out_is_retried_once_and_fails_naming_page_and_cell(tmp_path):
    table = _table(tmp_path, "import time\ntime.sleep(naptime)")
    done = _run(tmp_path, table, "--cell-timeout", "3")
    assert done.returncode == 1
    assert done.stdout.count("TIMEOUT sleepy") == 1 and "trying again" in done.stdout
    # cell 2 of the executed notebook: parameters, injected parameters, the sleeping cell
    assert "sleepy" in done.stderr and "cell 2 (import time)" in done.stderr
    assert "ran longer than 3 s (2 attempts)" in done.stderr
    assert not (tmp_path / "out" / "sleepy.ipynb").exists()
    assert (tmp_path / "out" / "sleepy.failed.ipynb").exists()


@pytest.mark.slow
def test_an_error_is_not_retried_and_names_the_cell(tmp_path):
    table = _table(tmp_path, "raise RuntimeError('broken on purpose')")
    done = _run(tmp_path, table, "--cell-timeout", "60")
    assert done.returncode == 1
    assert "TIMEOUT" not in done.stdout
    assert "cell 2 (raise RuntimeError" in done.stderr and "broken on purpose" in done.stderr


@pytest.mark.slow
def test_a_page_within_the_limit_is_written(tmp_path):
    table = _table(tmp_path, "x = naptime * 2")
    done = _run(tmp_path, table, "--cell-timeout", "60", "--set", "naptime=0")
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "out" / "sleepy.ipynb").exists()


@pytest.mark.slow
def test_a_page_with_a_tier_gets_it_in_its_title(tmp_path):
    """The sidebar names the quick and the subset page of a table apart: the runner appends the tier to the title."""
    params = nbformat.v4.new_code_cell('tier = "quick"')
    params.metadata["tags"] = ["parameters"]
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# Table I: accuracy\n\n## Overview"),
            params,
            nbformat.v4.new_code_cell("x = tier"),
        ]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "t1.ipynb")
    runs = {
        "runs": [
            {"name": "t1", "notebook": str(tmp_path / "t1.ipynb"), "tier": "subset", "parameters": {"tier": "subset"}}
        ]
    }
    (tmp_path / "runs.yaml").write_text(yaml.safe_dump(runs))
    done = _run(tmp_path, tmp_path / "runs.yaml", "--cell-timeout", "60")
    assert done.returncode == 0, done.stderr[-2000:]
    out = nbformat.read(tmp_path / "out" / "t1.ipynb", as_version=4)
    assert out.cells[0].source == "# Table I: accuracy (subset tier)\n\n## Overview"


@pytest.mark.slow
def test_a_parameter_whose_value_holds_an_equals_sign_is_injected_without_a_false_warning(tmp_path):
    """papermill cannot read ``partition = "C=2"`` and would call the parameter unknown; the runner checks names
    itself, so the log says nothing of it, and the page runs with the value given."""
    params = nbformat.v4.new_code_cell('partition = "C=2"  # two labels a client\nseed = 0')
    params.metadata["tags"] = ["parameters"]
    nb = nbformat.v4.new_notebook(cells=[params, nbformat.v4.new_code_cell("assert partition == 'Dir(0.1)'")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "eq.ipynb")
    runs = {"runs": [{"name": "eq", "notebook": str(tmp_path / "eq.ipynb"), "tier": "quick", "parameters": {}}]}
    (tmp_path / "runs.yaml").write_text(yaml.safe_dump(runs))
    done = _run(tmp_path, tmp_path / "runs.yaml", "--set", "partition=Dir(0.1)", "--set", "seed=1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "unknown parameter" not in done.stdout + done.stderr
    assert "Unable to parse" not in done.stdout + done.stderr
    wrong = _run(tmp_path, tmp_path / "runs.yaml", "--set", "partitions=Dir(0.1)")
    assert wrong.returncode != 0 and "unknown parameters ['partitions']" in wrong.stdout + wrong.stderr


@pytest.mark.slow
def test_an_entry_may_give_its_page_a_longer_cell_limit_and_a_bad_one_is_refused(tmp_path):
    table = _table(tmp_path, "import time\ntime.sleep(naptime)")
    runs = yaml.safe_load(table.read_text())
    runs["runs"][0]["cell_timeout"] = 60
    table.write_text(yaml.safe_dump(runs))
    done = _run(tmp_path, table, "--cell-timeout", "2", "--set", "naptime=4")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "TIMEOUT" not in done.stdout and (tmp_path / "out" / "sleepy.ipynb").exists()
    runs["runs"][0]["cell_timeout"] = "10 minutes"
    table.write_text(yaml.safe_dump(runs))
    refused = _run(tmp_path, table, "--list")
    assert refused.returncode != 0
    assert "entry 0 (sleepy): cell_timeout '10 minutes' is not a whole number of seconds >= 1" in refused.stderr
