"""fedlib.flower uses Flower's public API only: a private name of Flower can change in any release, silently.

The source of every module of ``fedlib/flower`` is parsed (no Flower needed) and may not

* import a name, or from a module, whose name (or a part of its dotted path) starts with an underscore from Flower
  (``from flwr.x import _y``, ``from flwr._x import y``, ``import flwr._x``);
* read, write or delete an attribute ``_name`` (one leading underscore, or two without two trailing ones) of
  anything but ``self``/``cls`` and names fedlib itself imports; on ``self``/``cls`` only names fedlib's own code
  defines (a ``def``, a class attribute or a ``self._name = ...`` in ``fedlib/flower``), so that a private method
  inherited from a Flower class (``self._construct_messages``) counts; ``super()._name`` always counts;
* do the same through ``getattr``/``setattr``/``hasattr``/``delattr`` with a constant name.

With Flower installed, fedlib's own private names on its Flower subclasses must not be names a Flower base class
defines either (overriding a private hook is relying on it too).
"""

import ast
import importlib
import inspect
import textwrap
from pathlib import Path

import pytest

FLOWER_DIR = Path(__file__).resolve().parents[1] / "fedlib" / "flower"
SOURCES = sorted(FLOWER_DIR.glob("*.py"))
ATTRIBUTE_FUNCTIONS = {"getattr", "setattr", "hasattr", "delattr"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_flower(module: str | None) -> bool:
    return module is not None and (module == "flwr" or module.startswith("flwr."))


def _own_names(tree: ast.AST) -> set[str]:
    """Private names fedlib's code defines on its classes: methods, class attributes, ``self._x = ...``."""
    own = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    own.add(item.name)
                elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                    targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                    own.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if (
                        isinstance(sub, ast.Attribute)
                        and isinstance(sub.value, ast.Name)
                        and sub.value.id in ("self", "cls")
                    ):
                        own.add(sub.attr)
    return {n for n in own if _private(n)}


def _fedlib_names(tree: ast.AST) -> set[str]:
    """Names bound to fedlib's own modules and objects (relative imports, ``import fedlib...``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").split(".")[0] == "fedlib"):
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == "fedlib")
    return names


def private_flower_uses(source: str, own: set[str] | None = None) -> list[str]:
    """Every use of a private Flower name in ``source`` (``line: what``); ``own``: fedlib's own private names
    (default: those ``source`` defines)."""
    tree = ast.parse(source)
    own = _own_names(tree) if own is None else own
    fedlib = _fedlib_names(tree)
    found = []

    def check_attribute(node, obj: ast.AST, name: str) -> None:
        if not _private(name):
            return
        if isinstance(obj, ast.Name) and obj.id in ("self", "cls"):
            if name not in own:
                found.append(f"{node.lineno}: {obj.id}.{name} (not defined by fedlib: inherited from Flower)")
        elif not (isinstance(obj, ast.Name) and obj.id in fedlib):
            found.append(f"{node.lineno}: {ast.unparse(obj)}.{name}")

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _is_flower(node.module):
            if any(_private(part) for part in node.module.split(".")):
                found.append(f"{node.lineno}: from {node.module} import (a private module)")
            found += [f"{node.lineno}: from {node.module} import {a.name}" for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Import):
            found += [
                f"{node.lineno}: import {a.name}"
                for a in node.names
                if _is_flower(a.name) and any(_private(part) for part in a.name.split("."))
            ]
        elif isinstance(node, ast.Attribute):
            check_attribute(node, node.value, node.attr)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ATTRIBUTE_FUNCTIONS
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            check_attribute(node, node.args[0], node.args[1].value)
    return found


def test_the_checked_modules_are_fedlib_flower():
    assert {p.name for p in SOURCES} >= {"__init__.py", "strategy.py", "apps.py"}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_fedlib_flower_uses_no_private_flower_name(path):
    found = private_flower_uses(path.read_text())
    assert not found, f"fedlib/flower/{path.name} uses private Flower API:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "snippet",
    [
        "class S(FedAvg):\n    def f(self):\n        return self._construct_messages(r, n, t)",
        "class S(FedAvg):\n    def f(self, replies):\n        return self._check_and_log_replies(replies, "
        "is_train=True)",
        "class S(FedAvg):\n    def f(self):\n        return super()._check_and_log_replies([], True)",
        "class S(FedAvg):\n    @classmethod\n    def f(cls):\n        return cls._hook",
        "class S(FedAvg):\n    def f(self):\n        return getattr(self, '_construct_messages')",
        "x = grid._driver",
        "TaskIdentity._run_id = 1",
        "del message._metadata",
        "hasattr(grid, '_run')",
        "setattr(TaskIdentity, '_run_id', 1)",
        "from flwr.serverapp.strategy.strategy_utils import _get_tree_nums",
        "from flwr._private import x",
        "from flwr.common._internal import x as y",
        "import flwr.common._internal",
        "import flwr.common._internal as internal",
        "def f(grid):\n    from flwr.supercore import _helper\n    return _helper(grid)",
    ],
)
def test_the_check_finds_private_flower_uses(snippet):
    assert private_flower_uses(snippet), snippet


@pytest.mark.parametrize(
    "snippet",
    [
        "class S(FedAvg):\n    def __init__(self):\n        super().__init__()\n        self._nodes = []\n"
        "    def f(self):\n        return self._nodes, self._g(), self.__class__, self.__dict__\n"
        "    def _g(self):\n        pass",
        "class S(FedAvg):\n    _cache = {}\n    @classmethod\n    def f(cls):\n        return cls._cache",
        "from flwr.app import Message\nfrom flwr.serverapp.strategy import FedAvg as _Base\nx = Message.__name__",
        "from .._validate import check_int\nfrom .. import seeds\nx = seeds._private_helper",
        "import fedlib._validate\nimport numpy as np\nx = fedlib._validate.check_int",
        "d = {}\nd.get('_x')\ngetattr(config, name)",
    ],
)
def test_the_check_passes_public_use_and_fedlib_own_names(snippet):
    assert private_flower_uses(snippet) == [], snippet


def _flower_private_names(cls) -> set[str]:
    """Private names a Flower class defines: its class attributes and what its methods assign to ``self._x``."""
    names = {n for n in vars(cls) if _private(n)}
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return names
    return names | _own_names(ast.parse(source))


def test_fedlib_private_names_do_not_override_flower_ones():
    pytest.importorskip("flwr", reason='Flower is an optional extra: pip install -e ".[flower]"')
    checked = 0
    for path in SOURCES:
        module = importlib.import_module("fedlib.flower" + ("" if path.stem == "__init__" else f".{path.stem}"))
        own = _own_names(ast.parse(path.read_text()))
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__:
                continue
            for base in cls.__mro__[1:]:
                if _is_flower(base.__module__):
                    checked += 1
                    clash = own & _flower_private_names(base)
                    assert not clash, (
                        f"{cls.__name__} defines {sorted(clash)}, private names of Flower's "
                        f"{base.__module__}.{base.__qualname__}"
                    )
    assert checked, "no fedlib class derives from a Flower class: the check checked nothing"
