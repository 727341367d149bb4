"""Floating-point settings of a CUDA run, set explicitly (``configure``) and stated (``describe``).

fedlib's equivalence claims -- the batched engine gives the reference path's numbers, a resumed run equals an
uninterrupted one -- are exact (bit for bit) on CPU. On CUDA they hold only under settings that PyTorch does not
use by default, so a run on CUDA sets them itself (``fedlib.training.trainer.Experiment`` calls :func:`configure` with
the configuration's ``engine_options``):

* **TF32 off** (``tf32=False``, the default): cuDNN runs fp32 convolutions in TF32 (10-bit mantissa) unless
  ``torch.backends.cudnn.allow_tf32`` is False, and cuBLAS matmuls do so when
  ``torch.backends.cuda.matmul.allow_tf32`` is True. With TF32 on, the batched and the reference engine can
  differ by ~1e-3 relative per step instead of ~1e-6, and the tests' 1e-5 tolerances do not hold.
  ``tf32=True`` is faster on Ampere and newer GPUs (a documented choice, not the paper's fp32).
* **Deterministic kernels** (``deterministic=True``, the default): ``torch.use_deterministic_algorithms(True,
  warn_only=True)``, ``cudnn.deterministic = True``, ``cudnn.benchmark = False`` and
  ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` (set before cuBLAS starts). cuDNN's weight gradients and ``index_add_``
  (the torch scorer, ``fedlib.selection._torch_scoring``) then take deterministic algorithms, so two runs of the same
  configuration on the same GPU and software give the same bits, and a resumed run equals an uninterrupted one.

What cannot be made deterministic on CUDA (PyTorch 2.x, ``NONDETERMINISTIC_ON_CUDA``): the backward of
``AdaptiveAvgPool2d`` (EfficientNet-B0/B3's global pooling) has no deterministic CUDA kernel; with
``warn_only=True`` PyTorch warns once and runs it, so EfficientNet runs on CUDA may differ between a resumed and
an uninterrupted run, and between two runs, in the last bits. LeNet-5 and VGG-11 use no such op. Across GPU
models, drivers, cuDNN versions or batched-vs-reference kernels (grouped vs separate convolutions) the bits
differ anyway: the equivalence of the engines on CUDA is a tolerance (1e-5 relative, TF32 off), not equality.

On CPU nothing is changed: CPU numerics (oneDNN, fp32) are deterministic for a fixed number of threads.
"""

from __future__ import annotations

import os

from fedlib._validate import check_bool

__all__ = ["NONDETERMINISTIC_ON_CUDA", "configure", "describe", "snapshot", "restore"]

#: Ops of fedlib's models that PyTorch cannot run deterministically on CUDA (see the module docstring).
NONDETERMINISTIC_ON_CUDA = {
    "efficientnet-b0": "AdaptiveAvgPool2d backward (global pooling)",
    "efficientnet-b3": "AdaptiveAvgPool2d backward (global pooling)",
}


def configure(device, *, tf32: bool = False, deterministic: bool = True) -> dict:
    """Set the process-wide CUDA numerics for a run on ``device``; returns :func:`describe`'s dict.

    On a CPU device nothing is changed.  The settings are global to the process (PyTorch keeps them so), which
    is what a run needs: a worker process trains one run at a time."""
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


def snapshot() -> tuple:
    """The process-wide settings :func:`configure` changes, for :func:`restore` (tests restore them so that a
    CUDA test leaves later CPU tests as they were)."""
    import torch

    return (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )


def restore(state: tuple) -> None:
    """Put back what :func:`snapshot` returned."""
    import torch

    (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
        mode,
        warn_only,
    ) = state
    torch.use_deterministic_algorithms(mode, warn_only=warn_only)
