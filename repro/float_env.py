"""What a run's floating-point numbers depend on, recorded with every stored run and compared before a retrain is
held to bit-for-bit equality.

The same configuration trained twice on one machine gives the same bits.  On another machine it need not: sums
of floats depend on the order and width of the machine's vector instructions, and training grows a difference in
the last digit into points of accuracy within a few rounds.  What chooses those kernels on a CPU:

- torch's own kernels: ``torch.backends.cpu.get_cpu_capability()`` (``DEFAULT``, ``AVX2``, ``AVX512`` on x86;
  settable below the CPU's own with the environment variable ``ATEN_CPU_CAPABILITY=default|avx2|avx512``);
- oneDNN's convolutions: the CPU's instruction set, capped by ``ONEDNN_MAX_CPU_ISA`` (e.g. ``AVX2``);
- MKL's matrix products: the CPU's vendor and instruction set (``MKL_ENABLE_INSTRUCTIONS``, ``MKL_CBWR`` cap it);
- the number of torch threads (how a reduction is split);
- the torch version, the device (and on a GPU its model).

:func:`current` records these as a flat dict (``float_env`` in a stored run's JSON); :func:`differences` names
the fields in which two records differ.  Where none differ, a retrain must equal the stored run bit for bit
(``scripts/reproduce_stored.py``); where some do, only float tolerance can be asked of it.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

__all__ = ["FIELDS", "current", "differences", "describe", "short", "cpu_isa", "cpu_vendor"]

#: The recorded fields, in the order :func:`describe` prints them.
FIELDS = (
    "torch",
    "device",
    "arch",
    "cpu_vendor",
    "cpu_isa",
    "cpu_capability",
    "onednn_max_cpu_isa",
    "mkl_instructions",
    "threads",
)

_ENV_CAPS = {
    "onednn_max_cpu_isa": ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"),
    "mkl_instructions": ("MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR"),
}


def _cpuinfo_line(name: str) -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.split(":")[0].strip() == name:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def cpu_vendor() -> str:
    """``GenuineIntel``, ``AuthenticAMD``, ... (x86, from /proc/cpuinfo); the processor string elsewhere."""
    return _cpuinfo_line("vendor_id") or platform.processor() or "unknown"


def cpu_isa() -> str:
    """The widest vector instruction set of the CPU itself (not capped by any variable): ``avx512``, ``avx2``,
    ``sse`` on x86; ``sve`` or ``neon`` on arm; ``unknown`` where /proc/cpuinfo cannot tell."""
    flags = set((_cpuinfo_line("flags") or _cpuinfo_line("Features")).split())
    for isa, needs in (
        ("avx512", {"avx512f"}),
        ("avx2", {"avx2", "fma"}),
        ("sse", {"sse4_2"}),
        ("sve", {"sve"}),
        ("neon", {"asimd"}),
    ):
        if needs <= flags:
            return isa
    return "unknown"


def current(device: str = "cpu", threads: int | None = None) -> dict:
    """The floating-point environment of this process for a run on ``device`` with ``threads`` torch threads
    (default: the number torch uses now)."""
    import torch

    on_cuda = str(device).startswith("cuda") and torch.cuda.is_available()
    env = {
        "torch": torch.__version__,
        "device": f"cuda: {torch.cuda.get_device_name(torch.device(device))}" if on_cuda else "cpu",
        "arch": platform.machine(),
        "cpu_vendor": cpu_vendor(),
        "cpu_isa": cpu_isa(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": int(threads if threads is not None else torch.get_num_threads()),
    }
    for field, names in _ENV_CAPS.items():
        env[field] = next((f"{n}={os.environ[n]}" for n in names if os.environ.get(n)), "native")
    return {k: env[k] for k in FIELDS}


def differences(stored: dict | None, here: dict) -> list[str]:
    """The fields in which ``stored`` and ``here`` differ (``["unrecorded"]`` when ``stored`` is None, i.e. the
    run was stored before the environment was recorded)."""
    if not stored:
        return ["unrecorded"]
    return [k for k in FIELDS if stored.get(k) != here.get(k)]


def describe(env: dict | None) -> str:
    """One line, e.g. ``cpu AVX512 (AuthenticAMD avx512, oneDNN native, MKL native), 2 threads, torch 2.13.0``; for a
    CUDA run its GPU, torch and host CPU."""
    if not env:
        return "not recorded"
    if str(env["device"]).startswith("cuda"):
        return f"{env['device']}, torch {env['torch']} (host: {env['cpu_vendor']} {env['cpu_isa']})"
    return (
        f"{env['device']} {env['cpu_capability']} ({env['cpu_vendor']} {env['cpu_isa']}, oneDNN "
        f"{env['onednn_max_cpu_isa']}, MKL {env['mkl_instructions']}), {env['threads']} "
        f"thread{'s' if env['threads'] != 1 else ''}, torch "
        f"{env['torch']}"
    )


def short(env: dict | None) -> str:
    """The kernel choices only, e.g. ``AVX2, oneDNN AVX2, 1 thread`` (caps that are not set are left out), or the
    GPU and torch for a CUDA run, e.g. ``CUDA NVIDIA H100 80GB HBM3, torch 2.11.0+cu130``."""
    if not env:
        return "not recorded"
    if str(env["device"]).startswith("cuda"):
        return f"CUDA {env['device'].split(': ', 1)[-1]}, torch {env['torch']}"
    parts = [env["cpu_capability"]]
    for field, label in (("onednn_max_cpu_isa", "oneDNN"), ("mkl_instructions", "MKL")):
        if env[field] != "native":
            parts.append(f"{label} {env[field].split('=', 1)[-1]}")
    parts.append(f"{env['threads']} thread{'s' if env['threads'] != 1 else ''}")
    return ", ".join(parts)
