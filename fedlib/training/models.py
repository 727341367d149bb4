"""The paper's client models (§V-A3): LeNet-5 and VGG-11 for CIFAR-style data, EfficientNet-B0/B3 for medical images."""

from __future__ import annotations

import torch
from torch import nn

from fedlib._validate import ParameterError, check_choice, check_int
from fedlib.training.pooling import MaxPool2x2

__all__ = ["MODEL_NAMES", "LeNet5", "VGG11", "efficientnet", "make_model", "count_parameters", "count_state_scalars"]

#: Names accepted by :func:`make_model`.
MODEL_NAMES = ("lenet5", "vgg11", "efficientnet-b0", "efficientnet-b3")

# CIFAR VGG-11: numbers are 3x3 conv widths (padding 1), "M" is a 2x2 max-pool.
_VGG11_CFG = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")


class LeNet5(nn.Module):
    """LeNet-5 as in federated-learning benchmarks for CIFAR (ReLU, max-pooling, no BatchNorm): conv 6@5x5, pool,
    conv 16@5x5, pool, fc 120, fc 84, fc ``num_classes``; no padding, so ``image_size`` >= 14 (62,006 parameters
    for 3x32x32 inputs and 10 classes).
    """

    def __init__(self, num_classes: int, in_channels: int = 3, image_size: int = 32):
        super().__init__()
        num_classes = check_int("num_classes", num_classes, low=1)
        in_channels = check_int("in_channels", in_channels, low=1)
        image_size = check_int("image_size", image_size, low=14)
        side = ((image_size - 4) // 2 - 4) // 2  # after conv5, pool2, conv5, pool2
        self.num_classes = num_classes
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 6, kernel_size=5),
            nn.ReLU(),
            MaxPool2x2(),
            nn.Conv2d(6, 16, kernel_size=5),
            nn.ReLU(),
            MaxPool2x2(),
        )
        self.classifier = nn.Sequential(
            nn.Linear(16 * side * side, 120),
            nn.ReLU(),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


class VGG11(nn.Module):
    """CIFAR VGG-11: eight 3x3 conv layers (cfg 64,M,128,M,256,256,M,512,512,M,512,512,M) and one Linear(512, C), for
    32x32 inputs. No BatchNorm (no running statistics, vmappable): the paper does not say which variant it used, and
    its Table V size (9.200M parameters) is closer to this one's 9,225,610 than to the BatchNorm one's.
    """

    def __init__(self, num_classes: int, in_channels: int = 3):
        super().__init__()
        num_classes = check_int("num_classes", num_classes, low=1)
        in_channels = check_int("in_channels", in_channels, low=1)
        self.num_classes = num_classes
        layers: list[nn.Module] = []
        channels = in_channels
        for item in _VGG11_CFG:
            if item == "M":
                layers.append(MaxPool2x2())
                continue
            layers += [nn.Conv2d(channels, item, kernel_size=3, padding=1), nn.ReLU()]
            channels = item
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


def efficientnet(variant: str, num_classes: int, in_channels: int = 3) -> nn.Module:
    """torchvision's EfficientNet-B0 or -B3 (``variant`` "b0"/"b3"), randomly initialised, with a
    ``Dropout -> Linear(d, num_classes)`` head and a new stem for ``in_channels != 3``; ``inplace`` flags are
    switched off for ``functional_call``. Its BatchNorm statistics and stochastic depth keep it off the batched
    engine.
    """
    variant = check_choice("variant", variant, ("b0", "b3"))
    num_classes = check_int("num_classes", num_classes, low=1)
    in_channels = check_int("in_channels", in_channels, low=1)
    from fedlib.data._torchvision import import_torchvision

    tv = import_torchvision()
    builder = {"b0": tv.models.efficientnet_b0, "b3": tv.models.efficientnet_b3}[variant]
    model = builder(weights=None)
    old_dropout, old_linear = model.classifier[0], model.classifier[1]
    head = nn.Linear(old_linear.in_features, num_classes)
    # Same initialisation torchvision gives its own head.
    init_range = 1.0 / head.out_features**0.5
    nn.init.uniform_(head.weight, -init_range, init_range)
    nn.init.zeros_(head.bias)
    model.classifier = nn.Sequential(nn.Dropout(p=old_dropout.p), head)
    if in_channels != 3:
        old = model.features[0][0]
        stem = nn.Conv2d(
            in_channels,
            old.out_channels,
            kernel_size=old.kernel_size,
            stride=old.stride,
            padding=old.padding,
            bias=old.bias is not None,
        )
        nn.init.kaiming_normal_(stem.weight, mode="fan_out")
        model.features[0][0] = stem
    for module in model.modules():
        if getattr(module, "inplace", False):
            module.inplace = False
    model.num_classes = num_classes
    return model


def make_model(name: str, num_classes: int, *, in_channels: int = 3, image_size: int = 32) -> nn.Module:
    """One of :data:`MODEL_NAMES`; ``image_size`` shapes LeNet-5's first linear layer, VGG-11 needs 32 and
    EfficientNet pools adaptively (the paper uses 224 for the medical data)."""
    name = check_choice("name", name, MODEL_NAMES)
    num_classes = check_int("num_classes", num_classes, low=1)
    in_channels = check_int("in_channels", in_channels, low=1)
    image_size = check_int("image_size", image_size, low=1)
    if name == "lenet5":
        return LeNet5(num_classes, in_channels=in_channels, image_size=image_size)
    if name == "vgg11":
        if image_size != 32:
            raise ParameterError(None, "image_size", image_size, "32 for 'vgg11' (its classifier takes 512 inputs)")
        return VGG11(num_classes, in_channels=in_channels)
    return efficientnet(name.split("-")[1], num_classes, in_channels=in_channels)


def count_parameters(model: nn.Module) -> int:
    """Trainable scalars of ``model``: the ``p`` of the paper's communication cost ``4p`` bytes."""
    return int(sum(p.numel() for p in model.parameters() if p.requires_grad))


def count_state_scalars(model: nn.Module) -> int:
    """Floating-point scalars of ``model.state_dict()`` (parameters and BatchNorm statistics): a full state upload."""
    return int(sum(t.numel() for t in model.state_dict().values() if torch.is_floating_point(t)))
