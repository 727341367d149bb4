"""fedlib's public API: `import fedlib` gives the names a user needs, light; the API page lists them."""

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import fedlib

ROOT = Path(__file__).resolve().parents[1]


def test_all_is_sorted_and_every_name_resolves_to_its_module():
    assert fedlib.__all__ == sorted(fedlib.__all__) and "__version__" in fedlib.__all__
    for name in fedlib.__all__:
        value = getattr(fedlib, name)
        if name != "__version__":
            assert getattr(importlib.import_module(fedlib._API[name]), name) is value, name


def test_the_public_api_has_what_a_user_needs():
    for name in (
        "ExperimentConfig",
        "run_experiment",
        "make_selector",
        "FedEntOptSelector",
        "partition",
        "make_algorithm",
        "load_dataset",
        "run_selection",
        "ParameterError",
    ):
        assert name in fedlib.__all__, name
    assert fedlib.make_selector("fedentopt", buffer_size=2) == fedlib.FedEntOptSelector(buffer_size=2)


def test_import_fedlib_imports_no_torch_and_no_subpackage():
    code = "import sys, fedlib; print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('fedlib.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
def test_the_api_page_lists_every_public_name():
    from repro.notebook import api_markdown

    text = api_markdown(fedlib)
    for name in fedlib.__all__:
        assert f"### `fedlib.{name}" in text, name
    for package in ("data", "selection", "algorithms", "training", "label_only", "flower"):
        assert f"### `fedlib.{package}`" in text, package
    toc = (ROOT / "_toc.yml").read_text()
    assert "book/executed/api" in toc
    nb = json.loads((ROOT / "notebooks" / "api.ipynb").read_text())
    assert any("api_markdown(package)" in "".join(c["source"]) for c in nb["cells"])


@pytest.mark.slow
def test_the_api_page_lists_an_optional_extra_that_is_not_installed():
    # flwr made unimportable in a fresh interpreter: the page still lists fedlib.flower and its modules
    code = (
        "import sys; sys.modules['flwr'] = None\n"
        "import fedlib\n"
        "from repro.notebook import api_markdown\n"
        "text = api_markdown(fedlib)\n"
        "assert 'fedlib.flower' not in sys.modules\n"
        "print(text[text.index('### `fedlib.flower`'):])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "optional extra" in out.stdout.split("###")[1]
    assert "`fedlib.flower.strategy`" in out.stdout and "`fedlib.flower.apps`" in out.stdout


@pytest.mark.slow
def test_the_readmes_example_runs():
    text = (ROOT / "README.md").read_text()
    start = text.index("```python\nimport numpy as np\n\nimport fedlib\n") + len("```python\n")
    code = text[start : text.index("```", start)]
    namespace = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert list(namespace["picked"]) and namespace["result"].table["round"].tolist() == [0, 1, 2]
