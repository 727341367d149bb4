"""Tests of fedlib.training.pooling: max_pool2x2 gives F.max_pool2d's values (elementwise path without gradients)
and F.max_pool2d itself wherever a gradient is recorded."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from fedlib.training.models import VGG11, LeNet5  # noqa: E402
from fedlib.training.pooling import MaxPool2x2, max_pool2x2  # noqa: E402


def _tied(shape, seed: int, nan: bool = False) -> torch.Tensor:
    """Small integers (many ties, zeros of both signs), some NaN."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-2, 3, shape, generator=g).float()
    x[x == -2] = -0.0
    if nan:
        x[torch.rand(shape, generator=g) < 0.1] = float("nan")
    return x


@pytest.mark.parametrize("shape", [(3, 4, 6, 8), (5, 2, 2), (1, 1, 28, 28)])
@pytest.mark.parametrize("nan", [False, True])
def test_values_without_gradients_are_max_pool2d_s(shape, nan):
    for seed in range(20):
        x = _tied(shape, seed, nan)
        with torch.no_grad():
            got, want = max_pool2x2(x), F.max_pool2d(x, 2)
        assert got.shape == want.shape
        assert torch.equal(torch.isnan(got), torch.isnan(want))
        assert torch.equal(torch.nan_to_num(got), torch.nan_to_num(want))  # == (a zero's sign may differ)


def test_odd_sides_floor_as_max_pool2d_does():
    x = torch.randn(2, 3, 7, 9)
    with torch.no_grad():
        assert torch.equal(max_pool2x2(x), F.max_pool2d(x, 2))
    assert max_pool2x2(x).shape == (2, 3, 3, 4)


def test_training_path_is_max_pool2d_with_its_gradient():
    x = _tied((3, 4, 6, 8), 0)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = max_pool2x2(a), F.max_pool2d(b, 2)
    g = torch.randn(ya.shape, generator=torch.Generator().manual_seed(1))
    ya.backward(g)
    yb.backward(g)
    assert torch.equal(ya.detach(), yb.detach())
    assert torch.equal(a.grad.view(torch.int32), b.grad.view(torch.int32))  # the first maximum of a tie


def test_under_vmap_and_grad():
    from torch.func import grad, vmap

    x = torch.randn(4, 2, 3, 6, 6)
    f = lambda t: max_pool2x2(t).square().sum()  # noqa: E731
    ref = lambda t: F.max_pool2d(t, 2).square().sum()  # noqa: E731
    assert torch.equal(vmap(grad(f))(x), vmap(grad(ref))(x))


@pytest.mark.parametrize("net_cls", [LeNet5, VGG11])
def test_models_evaluate_to_nn_maxpool2d_s_logits(net_cls):
    torch.manual_seed(0)
    net = net_cls(10).eval()
    twin = net_cls(10).eval()
    twin.load_state_dict(net.state_dict())
    for name, module in list(twin.features.named_children()):
        if isinstance(module, MaxPool2x2):
            twin.features[int(name)] = nn.MaxPool2d(2)
    x = torch.randn(8, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(net(x), twin(x))
