"""Shared test helpers: tiny data sets written in the npz format that fedlib's "npz" loader reads.

The reproduction (``repro/``) runs from the checkout and is not installed, so the processes the tests start
(notebook kernels, the book's smoke notebooks, command lines) get the checkout on their ``PYTHONPATH``, as
``make lab`` and ``scripts/run_notebooks.py`` give it to theirs."""

import os
from pathlib import Path

import numpy as np

ROOT = str(Path(__file__).resolve().parents[1])
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)


def write_tiny_npz(
    directory, *, seed: int, num_samples: int, num_train: int, num_classes: int = 4, signal: bool = False
) -> str:
    """Write random 16x16 RGB images with labels to ``directory/tiny.npz``; return the path as a string.

    With ``signal`` the red channel encodes the label (label * 60), so a model can learn something in a few steps.
    """
    rng = np.random.default_rng(seed)
    y = rng.integers(0, num_classes, size=num_samples)
    x = rng.integers(0, 256, size=(num_samples, 16, 16, 3), dtype=np.uint8)
    if signal:
        x[..., 0] = (y[:, None, None] * 60).astype(np.uint8)
    path = directory / "tiny.npz"
    np.savez(path, x_train=x[:num_train], y_train=y[:num_train], x_test=x[num_train:], y_test=y[num_train:])
    return str(path)
