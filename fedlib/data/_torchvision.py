"""The one place fedlib imports torchvision (it declares missing C++ op schemas first when needed).

The torchvision wheel at hand may be a CUDA build while torch is a CPU build. Its compiled extension then fails
to load, and ``import torchvision`` dies with ``operator torchvision::nms does not exist`` because the Python side
registers meta kernels for ``nms`` and ``qnms``. fedlib uses no torchvision C++ operator, so declaring the two
schemas (and nothing else) is safe. When the extension loads, it registers the real operators and nothing is
declared here.
"""
from __future__ import annotations

import importlib.util
import os

import torch

__all__ = ["import_torchvision"]

_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}
_declared: list = []  # keeps the torch.library.Library alive for the life of the process


def _extension_loads() -> bool:
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return False
    pkg = list(spec.submodule_search_locations)[0]
    for name in sorted(os.listdir(pkg)):
        if name.startswith("_C") and name.endswith((".so", ".pyd")):
            try:
                torch.ops.load_library(os.path.join(pkg, name))
                return True
            except (OSError, RuntimeError):
                return False
    return False


def import_torchvision():
    """Import and return torchvision, declaring the ``nms``/``qnms`` schemas when its extension cannot load."""
    if not _declared and not _extension_loads():
        lib = torch.library.Library("torchvision", "DEF")
        for schema in _SCHEMAS.values():
            lib.define(schema)
        _declared.append(lib)
    import torchvision

    return torchvision
