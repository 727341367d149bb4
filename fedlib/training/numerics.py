"""Floating-point settings of a CUDA run, set explicitly (``configure``) and stated (``describe``).

fedlib's equivalence claims (batched = reference engine, resumed = uninterrupted run) are exact on CPU; on CUDA
they need settings PyTorch does not use by default, which ``Experiment`` sets from ``engine_options``: TF32 off
(``tf32=False``; with it the engines differ far beyond the tests' 1e-5) and deterministic kernels
(``deterministic=True``: deterministic algorithms, cuDNN deterministic without benchmark, a cuBLAS workspace). The
backward of ``AdaptiveAvgPool2d`` (EfficientNet's global pooling) has no deterministic CUDA kernel, so EfficientNet
runs may differ in the last bits. Across GPUs, drivers or kernels the engines agree to a tolerance, not bit for
bit. On CPU nothing is changed.
"""

from __future__ import annotations

import os

from fedlib._validate import check_bool

__all__ = ["configure", "describe"]


def configure(device, *, tf32: bool = False, deterministic: bool = True) -> dict:
    """Set the process-wide CUDA numerics for a run on ``device`` (nothing on a CPU); returns :func:`describe`."""
    import torch

    check_bool("tf32", tf32)
    check_bool("deterministic", deterministic)
    if torch.device(device).type != "cuda":
        return describe()
    if deterministic:
        # read by cuBLAS when it creates its first handle; a later change has no effect (describe() reports it)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.deterministic = deterministic
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(deterministic, warn_only=True)
    return describe()


def describe() -> dict:
    """The current settings, e.g. for a benchmark record or a stored run's provenance."""
    import torch

    return {
        "cuda_matmul_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn_tf32": bool(torch.backends.cudnn.allow_tf32),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    }
