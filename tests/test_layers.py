"""fedlib's layers and the reproduction above them: every module imports only from its own layer or below, no
imports go round in a circle, and the library knows nothing of the reproduction (``repro/``) or the repository.

Every ``import`` statement counts, at module level or inside a function (a lazy import is still a dependency).
A new module must be placed in a layer here.
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (ROOT / "fedlib", ROOT / "repro")

# Layers, lowest first: the subpackages in the order they may import each other; a module may import modules of
# its own layer and of the layers before it.
LAYERS = {
    "foundations": {"fedlib", "fedlib._validate", "fedlib.seeds"},
    "data": {"fedlib.data", "fedlib.data.*"},
    "selection": {"fedlib.selection", "fedlib.selection.*"},
    # the trainer builds algorithms and FedConcat trains with fedlib.training.local: one layer, no circle
    "training and algorithms": {"fedlib.training", "fedlib.training.*", "fedlib.algorithms", "fedlib.algorithms.*"},
    "label-only selection runs": {"fedlib.label_only", "fedlib.label_only.*"},
    "integrations": {"fedlib.flower", "fedlib.flower.*"},
    # the repository's application, run from the checkout: not part of the installed library
    "the paper's reproduction": {"repro", "repro.*"},
    "entry points": {"repro.cli", "repro.__main__", "fedlib.__main__", "repro.gpu_check"},
}


def _modules() -> dict:
    out = {}
    for path in (p for package in PACKAGES for p in package.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _layer(module: str) -> int:
    for i, members in enumerate(LAYERS.values()):
        if module in members or any(m.endswith(".*") and module.startswith(m[:-1]) for m in members):
            return i
    raise AssertionError(f"module {module} is in no layer of tests/test_layers.py: place it in one")


def _imports(module: str) -> set:
    """The fedlib modules ``module`` imports (a name imported from a package counts as its submodule if it is
    one, else as the package)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for name in targets:
            while name not in MODULES and "." in name:
                name = name.rpartition(".")[0]
            if name in MODULES and name != module:
                found.add(name)
    return found


GRAPH = {m: _imports(m) for m in MODULES}


def test_every_module_has_a_layer():
    for module in MODULES:
        _layer(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_from_a_higher_layer(module):
    layer = _layer(module)
    upward = sorted(d for d in GRAPH[module] if _layer(d) > layer)
    names = list(LAYERS)
    assert not upward, f"{module} ({names[layer]}) imports from higher layers: " + ", ".join(
        f"{d} ({names[_layer(d)]})" for d in upward
    )


def test_no_import_circle():
    # depth-first search for a back edge; the circle is reported as a path
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for d in sorted(GRAPH[m]):
            if state.get(d) == "open":
                raise AssertionError("import circle: " + " -> ".join(stack[stack.index(d) :] + [d]))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = "done"

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)


LIBRARY = sorted(m for m in MODULES if m.split(".")[0] == "fedlib" and m != "fedlib.__main__")
#: What only the reproduction may name: its package, the run table, the stored results, the book's notebooks.
_REPOSITORY = (re.compile(r"\brepro\b"), re.compile(r"runs\.yaml"), re.compile(r"[\"']results[/\"']"))


@pytest.mark.parametrize("module", LIBRARY)
def test_the_library_knows_nothing_of_the_reproduction_or_the_repository(module):
    """No fedlib module imports the reproduction, reaches into the repository (``Path(__file__).parents``), or
    names the run table or the stored-results folder (in code or docstring): the library installs and runs alone."""
    text = MODULES[module].read_text()
    assert not any(d.split(".")[0] == "repro" for d in GRAPH[module]), f"{module} imports the reproduction"
    assert ".parents[" not in text and ".parent.parent" not in text, f"{module} reaches into the repository"
    hits = [p.pattern for p in _REPOSITORY if p.search(text)]
    assert not hits, f"{module} names the repository's {hits}"


def test_the_repository_check_sees_a_library_module_that_names_the_reproduction():
    text = 'from repro import results\nX = "results/table1"\n'
    assert [p.pattern for p in _REPOSITORY if p.search(text)] == [_REPOSITORY[0].pattern, _REPOSITORY[2].pattern]


def test_the_checker_sees_lazy_imports():
    # repro.results imports the trainer inside a function only
    assert "fedlib.training.trainer" in GRAPH["repro.results"]
    assert (
        "fedlib.training.runs" in GRAPH["fedlib.training.trainer"]
        and "fedlib.training.trainer" not in GRAPH["fedlib.training.runs"]
    )
