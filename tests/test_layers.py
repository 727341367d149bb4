"""fedlib's layers: every module imports only from its own layer or below, and no imports go round in a circle.

Every ``import`` statement counts, at module level or inside a function (a lazy import is still a dependency).
A new module must be placed in a layer here.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fedlib"

# Layers, lowest first: the subpackages in the order they may import each other; a module may import modules of
# its own layer and of the layers before it.
LAYERS = {
    "foundations": {"fedlib", "fedlib._validate", "fedlib.seeds"},
    "data": {"fedlib.data", "fedlib.data.*"},
    "selection": {"fedlib.selection", "fedlib.selection.*"},
    # the trainer builds algorithms and FedConcat trains with fedlib.training.local: one layer, no circle
    "training and algorithms": {"fedlib.training", "fedlib.training.*", "fedlib.algorithms", "fedlib.algorithms.*"},
    "label-only studies": {"fedlib.label_only", "fedlib.label_only.*"},
    "the paper's reproduction": {"fedlib.reproduction", "fedlib.reproduction.*"},
    "integrations": {"fedlib.flower", "fedlib.flower.*"},
    "entry points": {"fedlib.cli", "fedlib.__main__", "fedlib.gpu_check"},
}


def _modules() -> dict:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
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


def test_the_checker_sees_lazy_imports():
    # fedlib.reproduction.results imports the trainer inside a function only
    assert "fedlib.training.trainer" in GRAPH["fedlib.reproduction.results"]
    assert (
        "fedlib.training.runs" in GRAPH["fedlib.training.trainer"]
        and "fedlib.training.trainer" not in GRAPH["fedlib.training.runs"]
    )
