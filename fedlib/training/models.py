"""The paper's client models (§V-A3): LeNet-5 and VGG-11 for CIFAR-style data, EfficientNet-B0/B3 for medical images."""

from __future__ import annotations

import torch
from torch import nn

from fedlib._validate import ParameterError, check_bool, check_choice, check_int

__all__ = [
    "MODEL_NAMES",
    "LeNet5",
    "VGG11",
    "efficientnet",
    "make_model",
    "count_parameters",
    "count_state_scalars",
]

#: Names accepted by :func:`make_model`.
MODEL_NAMES = ("lenet5", "vgg11", "efficientnet-b0", "efficientnet-b3")

# CIFAR VGG-11: numbers are 3x3 conv widths (padding 1), "M" is a 2x2 max-pool.
_VGG11_CFG = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")


def _lenet_feature_size(image_size: int) -> int:
    """Side length after conv5 -> pool2 -> conv5 -> pool2 (no padding, floor pooling)."""
    return ((image_size - 4) // 2 - 4) // 2


class LeNet5(nn.Module):
    """LeNet-5 as used in federated-learning benchmarks for CIFAR (ReLU and max-pooling, no BatchNorm).

    conv 6@5x5 -> ReLU -> maxpool 2 -> conv 16@5x5 -> ReLU -> maxpool 2 -> fc 120 -> ReLU -> fc 84 -> ReLU
    -> fc ``num_classes``. No padding, so a 32x32 input gives a 16x5x5 = 400 feature vector and a 28x28 input a
    16x4x4 = 256 one. With 3 input channels, 32x32 input and 10 classes it has 62,006 parameters.

    Parameters
    ----------
    num_classes : int
        Number of output logits (>= 1).
    in_channels : int, default 3
        Input image channels (>= 1).
    image_size : int, default 32
        Side length of the square input images (>= 14, the smallest size leaving a 1x1 feature map).
    """

    def __init__(self, num_classes: int, in_channels: int = 3, image_size: int = 32):
        super().__init__()
        num_classes = check_int("num_classes", num_classes, low=1)
        in_channels = check_int("in_channels", in_channels, low=1)
        image_size = check_int("image_size", image_size, low=14)
        side = _lenet_feature_size(image_size)
        self.num_classes = num_classes
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 6, kernel_size=5),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(6, 16, kernel_size=5),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Linear(16 * side * side, 120),
            nn.ReLU(),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return logits of shape ``(batch, num_classes)`` for images of shape ``(batch, C, H, W)``."""
        return self.classifier(torch.flatten(self.features(x), 1))


class VGG11(nn.Module):
    """CIFAR VGG-11: eight 3x3 conv layers (cfg 64,M,128,M,256,256,M,512,512,M,512,512,M) and one Linear(512, C).

    By default there is **no BatchNorm**: the model then holds no running statistics (nothing but parameters to
    average in federated learning, and it can be vmapped with ``torch.func`` in training mode). The paper does not
    say which variant it used; its Table V gives 36.800 MB = 9.200M parameters for 10 classes. Without BatchNorm
    this model has 9,225,610 parameters (36.902 MB); with BatchNorm it has 9,231,114 trainable parameters plus
    5,504 running-statistic scalars (36.924 MB / 36.946 MB), so the BatchNorm-free variant is the closer one.

    Parameters
    ----------
    num_classes : int
        Number of output logits (>= 1).
    in_channels : int, default 3
        Input image channels (>= 1).
    batch_norm : bool, default False
        Insert ``BatchNorm2d`` after every convolution (adds running statistics to the state dict).

    Notes
    -----
    The five max-pools reduce a 32x32 input to 1x1, so the flattened feature has 512 entries; inputs must be
    32x32 (other sizes would change the classifier's input size and raise a shape error).
    """

    def __init__(self, num_classes: int, in_channels: int = 3, *, batch_norm: bool = False):
        super().__init__()
        num_classes = check_int("num_classes", num_classes, low=1)
        in_channels = check_int("in_channels", in_channels, low=1)
        check_bool("batch_norm", batch_norm)
        self.num_classes = num_classes
        layers: list[nn.Module] = []
        channels = in_channels
        for item in _VGG11_CFG:
            if item == "M":
                layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
                continue
            layers.append(nn.Conv2d(channels, item, kernel_size=3, padding=1))
            if batch_norm:
                layers.append(nn.BatchNorm2d(item))
            layers.append(nn.ReLU())
            channels = item
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return logits of shape ``(batch, num_classes)`` for images of shape ``(batch, C, 32, 32)``."""
        return self.classifier(torch.flatten(self.features(x), 1))


def efficientnet(variant: str, num_classes: int, in_channels: int = 3) -> nn.Module:
    """Return torchvision's EfficientNet-B0 or -B3, randomly initialised, with a ``num_classes`` head.

    The model is built with ``weights=None``; the classifier becomes ``Dropout(p) -> Linear(d, num_classes)``
    (p and d of the variant: 0.2/1280 for B0, 0.3/1536 for B3) and, when ``in_channels != 3``, the stem
    convolution is replaced by one with ``in_channels`` inputs. Every ``inplace`` flag (SiLU, Dropout) is switched
    off so the model can run under ``torch.func.functional_call``/``vmap``.

    Parameters
    ----------
    variant : {"b0", "b3"}
        Which EfficientNet.
    num_classes : int
        Number of output logits (>= 1).
    in_channels : int, default 3
        Input image channels (>= 1).

    Returns
    -------
    torch.nn.Module

    Notes
    -----
    EfficientNet contains BatchNorm layers with running statistics (they are in the state dict and are averaged
    like any other entry by FedAvg-style code), and stochastic depth draws random masks in training mode. Under
    ``torch.func.vmap`` in training mode, BatchNorm running-stat updates need
    ``torch.func.replace_all_batch_norm_modules_`` (or eval mode) and the random masks need
    ``randomness="different"``.
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
    """Build one of the paper's models by name.

    Parameters
    ----------
    name : {"lenet5", "vgg11", "efficientnet-b0", "efficientnet-b3"}
        Which model.
    num_classes : int
        Number of output logits (>= 1).
    in_channels : int, default 3
        Input image channels (>= 1).
    image_size : int, default 32
        Side length of the square inputs; it shapes LeNet-5's first linear layer. VGG-11 needs 32; EfficientNet
        pools adaptively and accepts any size (the paper uses 224 for the medical data).

    Returns
    -------
    torch.nn.Module

    Raises
    ------
    ParameterError
        For an unknown ``name`` (the message lists :data:`MODEL_NAMES`), ``num_classes`` or ``in_channels`` < 1,
        or ``image_size`` != 32 for VGG-11.
    """
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
    """Return the number of trainable scalars (``requires_grad`` parameters) of ``model``.

    This is the ``p`` of the paper's communication cost ``4p`` bytes when only parameters are uploaded.
    """
    return int(sum(p.numel() for p in model.parameters() if p.requires_grad))


def count_state_scalars(model: nn.Module) -> int:
    """Return the number of floating-point scalars in ``model.state_dict()``.

    Counts parameters and floating buffers (BatchNorm running mean/var); integer buffers such as
    ``num_batches_tracked`` are left out. This is what a client uploads when it sends its full state dict.
    """
    return int(sum(t.numel() for t in model.state_dict().values() if torch.is_floating_point(t)))
