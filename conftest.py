"""Every test session (tests/ and the book's smoke notebooks): the reproduction (``repro/``) runs from the checkout
and is not installed, so the processes the tests start (notebook kernels, command lines) get the checkout on their
``PYTHONPATH``, as ``make lab`` and ``scripts/run_notebooks.py`` give it to theirs."""

import os
from pathlib import Path

ROOT = str(Path(__file__).resolve().parent)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
