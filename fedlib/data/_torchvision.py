"""The one place fedlib imports torchvision.

A CUDA build of torchvision beside a CPU build of torch cannot load its extension, and ``import torchvision`` then
fails on the missing ``nms``/``qnms`` schemas; fedlib uses no torchvision operator, so it declares those two.
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
