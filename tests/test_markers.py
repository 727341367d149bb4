"""The slow marker: `make test-fast` skips the tests marked slow, `make test` runs every test."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _recipe(target: str) -> str:
    """The recipe lines of ``target`` in the Makefile, joined."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    match = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n)+)", text, flags=re.M)
    assert match, f"no target {target!r} in the Makefile"
    return match.group(1)


def test_the_slow_marker_is_registered():
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert any(m.startswith("slow:") for m in markers["markers"])


def _pytest_arguments(target: str) -> str:
    """What the recipe of ``target`` passes to pytest (after ``python -m pytest``)."""
    recipe = _recipe(target)
    assert "-m pytest " in recipe, recipe
    return recipe.split("-m pytest ", 1)[1]


def test_make_test_selects_no_marker_and_make_test_fast_deselects_slow():
    assert " -m " not in f" {_pytest_arguments('test')}"  # every test, the slow ones included
    assert '-m "not slow"' in _pytest_arguments("test-fast")
