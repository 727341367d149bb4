"""2x2 max-pooling with stride 2 whose forward pass without gradients is cheaper on the CPU.

PyTorch's CPU kernel for this pooling takes several times longer than three elementwise maxima over the four
strided views of the windows, which is what :func:`max_pool2x2` computes where no gradient is recorded (evaluation,
soft labels) on a CPU tensor with even sides. The values equal ``F.max_pool2d``'s (``==``, NaN where a window holds
one; of a zero and a negative zero tied as the maximum either may come out). Everywhere else, training included, it
calls ``F.max_pool2d``, so gradients are PyTorch's.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["MaxPool2x2", "max_pool2x2"]


def _elementwise(x: torch.Tensor) -> bool:
    """True where :func:`max_pool2x2` takes the elementwise path."""
    return (
        x.device.type == "cpu"
        and x.is_floating_point()
        and x.dim() >= 2
        and x.shape[-2] % 2 == 0
        and x.shape[-1] % 2 == 0
        and not (torch.is_grad_enabled() and x.requires_grad)
        and not torch.compiler.is_compiling()
        and not torch._C._functorch.is_functorch_wrapped_tensor(x)
    )


def max_pool2x2(x: torch.Tensor) -> torch.Tensor:
    """``F.max_pool2d(x, 2)`` of an ``(N, C, H, W)`` or ``(C, H, W)`` tensor (see the module docstring)."""
    if not _elementwise(x):
        return F.max_pool2d(x, 2)
    a, b = x[..., 0::2, 0::2], x[..., 0::2, 1::2]
    c, d = x[..., 1::2, 0::2], x[..., 1::2, 1::2]
    return torch.maximum(torch.maximum(a, b), torch.maximum(c, d))


class MaxPool2x2(nn.Module):
    """``nn.MaxPool2d(2)`` (kernel 2, stride 2) through :func:`max_pool2x2`."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return max_pool2x2(x)
