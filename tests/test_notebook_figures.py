"""Figures reach the notebooks whatever the caller's MPLBACKEND: executed the way `make notebooks` (papermill
through scripts/run_notebooks.py) and `make test` (a kernel started by the test process, as nbval does) run them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from repro.notebook import cell_images, draws_figure, missing_figures, shown_code_cells

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "scripts" / "run_notebooks.py"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def _code(source, outputs=(), tags=()):
    return {"cell_type": "code", "source": source, "metadata": {"tags": list(tags)}, "outputs": list(outputs)}


def _image_output():
    return {"output_type": "display_data", "data": {"image/png": PNG, "text/plain": "<Figure>"}, "metadata": {}}


def test_cell_images_counts_image_outputs_and_html_img_tags():
    slider = {"output_type": "display_data", "data": {"text/html": ['<div><img src="a.png">', "<IMG src='b'>"]}}
    assert cell_images(_code("x", [_image_output(), slider])) == 3
    assert cell_images(_code("x", [{"output_type": "stream", "text": "<img>"}])) == 0
    assert cell_images({"cell_type": "markdown", "source": "![a](b.png)"}) == 0


@pytest.mark.parametrize(
    "source, draws",
    [
        ("fig, ax = plt.subplots()\nplt.show()", True),
        ("FrameSlider(draw, {'a': [1, 2]})", True),
        ("display(fig)", True),
        ("summary.round(3)", False),
        ("widgets.interact(live, k=widgets.IntSlider())\n# live calls plt.show()", False),
        ("def f():\n    plt.show()\n\nwidgets.interact_manual(f)", False),
        ("interact(f, x=1)\nplt.show()", False),
    ],
)
def test_draws_figure_reads_the_source(source, draws):
    assert draws_figure(_code(source)) is draws


def test_missing_figures_names_the_cell_that_lost_its_figure():
    nb = {
        "cells": [
            {"cell_type": "markdown", "source": "# t"},
            _code("plt.plot([1])\nplt.show()", [_image_output()]),
            _code("fig = plt.figure()\nplt.show()", []),
            _code("x = 1", []),
        ]
    }
    assert missing_figures(nb) == ["cell 2: fig = plt.figure()"]
    nb["cells"][2]["tags"] = []
    nb["cells"][3]["metadata"]["tags"] = ["remove-cell"]
    assert [i for i, _ in shown_code_cells(nb)] == [1, 2]


def _images_per_figure_cell(path: Path) -> list[tuple[int, int]]:
    nb = json.loads(path.read_text())
    return [(i, cell_images(c)) for i, c in enumerate(nb["cells"]) if draws_figure(c)]


@pytest.mark.slow
def test_runner_stores_figures_when_the_caller_sets_mplbackend_agg(tmp_path):
    """`make notebooks` exports MPLBACKEND=Agg; the executed notebooks must still hold every figure."""
    env = {**os.environ, "MPLBACKEND": "Agg"}
    done = subprocess.run(
        [
            sys.executable,
            str(RUNNER),
            "--smoke",
            "--only",
            "entropy_trace",
            "--only",
            "communication_cost",
            "--out-dir",
            str(tmp_path),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for name, figures in (("entropy_trace", 2), ("communication_cost", 1)):
        per_cell = _images_per_figure_cell(tmp_path / f"{name}.ipynb")
        assert len(per_cell) == figures
        assert all(n >= 1 for _, n in per_cell), (name, per_cell)
        nb = json.loads((tmp_path / f"{name}.ipynb").read_text())
        assert missing_figures(nb) == []
        # the book shows the outputs with the code behind a toggle; the parameters cell stays visible
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        assert all("hide-input" in c["metadata"]["tags"] for c in code if "parameters" not in c["metadata"]["tags"])
        assert any("parameters" in c["metadata"]["tags"] and "hide-input" not in c["metadata"]["tags"] for c in code)


@pytest.mark.slow
def test_kernel_started_by_the_test_process_stores_figures_under_mplbackend_agg(tmp_path, monkeypatch):
    """`make test` runs the notebooks under nbval, whose kernel inherits pytest's environment (MPLBACKEND=Agg
    from the Makefile and .ci/run): repro.notebook.setup() must still put the figures into the outputs."""
    from nbclient import NotebookClient

    prepared = subprocess.run(
        [
            sys.executable,
            str(RUNNER),
            "--smoke",
            "--prepare-only",
            "--only",
            "entropy_trace",
            "--out-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(tmp_path / "entropy_trace.ipynb", as_version=4)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "notebooks")}}
    ).execute()
    assert missing_figures(nb) == []
    assert sum(cell_images(c) for c in nb.cells) >= 2


@pytest.mark.slow
def test_without_setup_agg_would_lose_the_figure(tmp_path, monkeypatch):
    """The failure this guards against, shown: a kernel with MPLBACKEND=Agg and no setup() stores no figure."""
    from nbclient import NotebookClient

    monkeypatch.setenv("MPLBACKEND", "Agg")
    cells = [nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()")]
    bare = nbformat.v4.new_notebook(cells=cells)
    NotebookClient(bare, timeout=120, kernel_name="python3").execute()
    assert missing_figures(bare) == ["cell 0: import matplotlib.pyplot as plt"]
    fixed = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("from repro.notebook import setup\nsetup()"),
            *[nbformat.v4.new_code_cell(c.source) for c in cells],
        ]
    )
    NotebookClient(fixed, timeout=120, kernel_name="python3").execute()
    assert missing_figures(fixed) == [] and cell_images(fixed.cells[1]) == 1
