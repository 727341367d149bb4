"""What the same-process speed benchmarks share: their command line and the milliseconds of repeated calls."""

from __future__ import annotations

import argparse
import statistics
import time


def parse_args(description: str, size: str, size_default: int, argv=None) -> argparse.Namespace:
    """``--<size>`` (the work per call), ``--repeats``, ``--warmup``, ``--threads`` and ``--seed``, checked."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(f"--{size}", type=int, default=size_default)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for name in (size, "repeats", "threads"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name}: got {value}; allowed: an integer >= 1")
    return args


def per_call_ms(fn, warmup: int, repeats: int) -> list[float]:
    """Milliseconds of each of ``repeats`` calls of ``fn`` after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def report(rows: list[tuple[str, list[float]]], label: str) -> tuple[float, float]:
    """Print the best and median milliseconds of the ``(name, times)`` rows (baseline, then new); return the ratios
    baseline / new of the best and of the medians."""
    print(f"{label:<36}{'best ms':>10}{'median ms':>12}")
    for name, t in rows:
        print(f"{name:<36}{min(t):>10.2f}{statistics.median(t):>12.2f}")
    (_, base), (_, new) = rows
    best, median = min(base) / min(new), statistics.median(base) / statistics.median(new)
    return best, median
