"""Tests for fedlib.training.models: hand-checked parameter counts, output shapes, functional_call/vmap use, errors."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.func import functional_call, vmap  # noqa: E402

from fedlib.training.models import (  # noqa: E402
    MODEL_NAMES,
    VGG11,
    LeNet5,
    count_parameters,
    count_state_scalars,
    efficientnet,
    make_model,
)


# ---------------------------------------------------------------- LeNet-5 parameter counts (hand arithmetic)
# 3 channels, 32x32, 10 classes:
#   conv1 3*6*25+6 = 456; conv2 6*16*25+16 = 2416; feature map 16*5*5 = 400
#   fc1 400*120+120 = 48120; fc2 120*84+84 = 10164; fc3 84*10+10 = 850
#   total 456+2416+48120+10164+850 = 62006
# 20 classes: fc3 84*20+20 = 1700 -> 62006 - 850 + 1700 = 62856
# 1 channel, 28x28, 10 classes: conv1 1*6*25+6 = 156; conv2 2416; feature map 16*4*4 = 256
#   fc1 256*120+120 = 30840; fc2 10164; fc3 850 -> 156+2416+30840+10164+850 = 44426
# 1 channel, 32x32, 10 classes (the count behind the paper's Table V): 156+2416+48120+10164+850 = 61706
@pytest.mark.parametrize(
    "num_classes, in_channels, image_size, expected",
    [(10, 3, 32, 62006), (20, 3, 32, 62856), (10, 1, 28, 44426), (10, 1, 32, 61706)],
)
def test_lenet5_parameter_count(num_classes, in_channels, image_size, expected):
    model = LeNet5(num_classes, in_channels=in_channels, image_size=image_size)
    assert count_parameters(model) == expected
    assert count_state_scalars(model) == expected  # no buffers
    x = torch.zeros(2, in_channels, image_size, image_size)
    assert model(x).shape == (2, num_classes)


def test_lenet5_rejects_too_small_images():
    with pytest.raises(ValueError, match=r"^parameter 'image_size': got 13; allowed: an integer >= 14\.$"):
        LeNet5(10, image_size=13)


# ---------------------------------------------------------------- VGG-11
def test_vgg11_structure_and_count():
    model = VGG11(10)
    assert isinstance(model.classifier, nn.Linear)
    assert model.classifier.in_features == 512
    assert [m for m in model.modules() if isinstance(m, nn.Linear)] == [model.classifier]
    assert not any(isinstance(m, nn.BatchNorm2d) for m in model.modules())
    # conv (cin*cout*9 + cout): 3->64 1792; 64->128 73856; 128->256 295168; 256->256 590080;
    # 256->512 1180160; 512->512 2359808 (x3) -> 9220480; linear 512*10+10 = 5130 -> 9225610
    assert count_parameters(model) == 9_225_610
    assert count_state_scalars(model) == 9_225_610
    assert count_parameters(VGG11(20)) == 9_225_610 + 513 * 10


# ---------------------------------------------------------------- output shapes
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n.startswith("efficientnet") else n for n in MODEL_NAMES]
)
def test_output_shape_batch_of_two(name):
    torch.manual_seed(0)
    model = make_model(name, 7).eval()
    with torch.no_grad():
        out = model(torch.randn(2, 3, 32, 32))
    assert out.shape == (2, 7)
    assert torch.isfinite(out).all()


def test_efficientnet_head_and_in_channels():
    torch.manual_seed(0)
    model = efficientnet("b0", 9, in_channels=1).eval()
    assert model.classifier[-1].in_features == 1280
    assert model.classifier[-1].out_features == 9
    assert model.features[0][0].in_channels == 1
    assert not any(getattr(m, "inplace", False) for m in model.modules())
    # torchvision B0 with its 1000-class head has 5,288,548 parameters; its head is 1280*1000+1000 = 1,281,000.
    # A 9-class head has 1280*9+9 = 11,529; a 1-channel stem has 32*1*9 = 288 weights instead of 864.
    assert count_parameters(model) == 5_288_548 - 1_281_000 + 11_529 - (864 - 288)
    # BatchNorm buffers (running mean/var) are state but not trainable
    assert count_state_scalars(model) > count_parameters(model)
    with torch.no_grad():
        assert model(torch.randn(2, 1, 32, 32)).shape == (2, 9)


# ---------------------------------------------------------------- torch.func use
@pytest.mark.parametrize("name", ["lenet5", "vgg11", "efficientnet-b0"])
def test_functional_call_matches_module(name):
    torch.manual_seed(0)
    model = make_model(name, 5).eval()
    state = {k: v.detach().clone() for k, v in model.named_parameters()}
    state.update({k: v.detach().clone() for k, v in model.named_buffers()})
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        expected = model(x)
        got = functional_call(model, state, (x,))
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_vmap_over_stacked_lenet_parameters():
    torch.manual_seed(0)
    models = [LeNet5(4) for _ in range(3)]
    names = [k for k, _ in models[0].named_parameters()]
    stacked = {k: torch.stack([dict(m.named_parameters())[k].detach() for m in models]) for k in names}
    x = torch.randn(2, 3, 32, 32)

    def run(params):
        return functional_call(models[0], params, (x,))

    with torch.no_grad():
        out = vmap(run)(stacked)
        for i, m in enumerate(models):
            torch.testing.assert_close(out[i], m(x))


# ---------------------------------------------------------------- errors
def test_make_model_unknown_name_lists_names():
    with pytest.raises(
        ValueError,
        match=r"^parameter 'name': got 'resnet18'; allowed: 'lenet5', 'vgg11', 'efficientnet-b0', 'efficientnet-b3'\.$",
    ):
        make_model("resnet18", 10)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_make_model_rejects_num_classes_below_one(name):
    with pytest.raises(ValueError, match=r"^parameter 'num_classes': got 0; allowed: an integer >= 1\.$"):
        make_model(name, 0)


def test_make_model_rejects_non_integer_num_classes():
    with pytest.raises(TypeError, match=r"^parameter 'num_classes': got 2\.5; allowed: an integer >= 1\.$"):
        make_model("lenet5", 2.5)


def test_make_model_vgg11_needs_32px():
    with pytest.raises(
        ValueError,
        match=r"^parameter 'image_size': got 28; allowed: 32 for 'vgg11' \(its classifier takes 512 inputs\)\.$",
    ):
        make_model("vgg11", 10, image_size=28)


def test_efficientnet_unknown_variant():
    with pytest.raises(ValueError, match=r"^parameter 'variant': got 'b7'; allowed: 'b0', 'b3'\.$"):
        efficientnet("b7", 10)
