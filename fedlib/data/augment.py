"""Batched, device-side preprocessing of the paper (colour jitter, flip, random grayscale, standardisation)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Sequence

import torch
import torch.nn.functional as F

from fedlib._validate import ParameterError, check_float, check_int, check_parameter_names

__all__ = [
    "LUMA_WEIGHTS",
    "to_unit_float",
    "resize_batch",
    "rgb_to_grayscale",
    "adjust_brightness",
    "adjust_contrast",
    "adjust_saturation",
    "adjust_hue",
    "augment_batch",
    "augment_with_uniforms",
    "Preprocessor",
]

LUMA_WEIGHTS = (0.299, 0.587, 0.114)  # ITU-R BT.601 luma (torchvision rounds the first to 0.2989)
_LUMA: dict = {}  # (dtype, device) -> LUMA_WEIGHTS as a (3, 1, 1) tensor


def _flat(x: torch.Tensor, name: str = "x") -> torch.Tensor:
    """View ``x`` (..., C, H, W) as (N, C, H, W); C must be 1 or 3."""
    allowed = "a tensor of shape (..., C, H, W) with C = 1 or 3 channels"
    if not isinstance(x, torch.Tensor):
        raise ParameterError(None, name, x, allowed, got=f"type {type(x).__name__}")
    if x.dim() < 3 or x.shape[-3] not in (1, 3):
        raise ParameterError(None, name, x, allowed, got=f"shape {tuple(x.shape)}")
    return x.reshape(-1, *x.shape[-3:])


def _per_image(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Per-image factors (N,) as a (N, 1, 1, 1) tensor on ``like``'s device and dtype."""
    return values.to(device=like.device, dtype=like.dtype).view(-1, 1, 1, 1)


def to_unit_float(x: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """uint8 images -> ``dtype`` in [0, 1]; floating input is returned unchanged."""
    if x.dtype == torch.uint8:
        return x.to(dtype).div_(255.0)
    if not x.is_floating_point():
        raise ParameterError(None, "x", x, "uint8 or floating-point images", got=f"dtype {x.dtype}")
    return x


def resize_batch(x: torch.Tensor, size: int) -> torch.Tensor:
    """Resize (..., C, H, W) to (..., C, size, size): bilinear, antialiased, clamped to [0, 1]."""
    size = check_int("size", size, low=1)
    if tuple(x.shape[-2:]) == (size, size):
        return x
    flat = x.reshape(-1, *x.shape[-3:])
    out = F.interpolate(flat, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
    return out.clamp_(0.0, 1.0).reshape(*x.shape[:-2], size, size)


def rgb_to_grayscale(x: torch.Tensor) -> torch.Tensor:
    """Luma (ITU-R 601 weights) of (N, 3, H, W) as (N, 1, H, W); 1-channel input is returned as is."""
    if x.shape[-3] == 1:
        return x
    key = (x.dtype, x.device)
    w = _LUMA.get(key)
    if w is None:  # built once per dtype and device: no host-to-device copy per batch
        w = _LUMA[key] = torch.tensor(LUMA_WEIGHTS, dtype=x.dtype, device=x.device).view(3, 1, 1)
    return (x * w).sum(dim=-3, keepdim=True)


def _blend_(x: torch.Tensor, f: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """``x`` <- clamp(f * x + (1 - f) * other, 0, 1), in place."""
    return x.mul_(f).add_((1 - f) * other).clamp_(0.0, 1.0)


def _brightness_(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    return x.mul_(f).clamp_(0.0, 1.0)


def _contrast_(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    return _blend_(x, f, rgb_to_grayscale(x).mean(dim=(-3, -2, -1), keepdim=True))


def _saturation_(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    return x if x.shape[-3] == 1 else _blend_(x, f, rgb_to_grayscale(x))


def adjust_brightness(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """Scale each image of (N, C, H, W) by its factor (N,), clamped to [0, 1]."""
    return _brightness_(x.clone(), _per_image(factor, x))


def adjust_contrast(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """Blend each image with the mean of its grayscale version (torchvision's contrast)."""
    return _contrast_(x.clone(), _per_image(factor, x))


def adjust_saturation(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """Blend each RGB image with its grayscale version; a no-op for 1 channel."""
    return _saturation_(x.clone(), _per_image(factor, x))


def _rgb_to_hsv(x: torch.Tensor):
    r, g, b = x.unbind(dim=-3)
    maxc, minc = x.amax(dim=-3), x.amin(dim=-3)
    flat = maxc == minc
    ones = torch.ones_like(maxc)
    span = maxc - minc
    s = span / torch.where(flat, ones, maxc)
    span = torch.where(flat, ones, span)
    rc, gc, bc = (maxc - r) / span, (maxc - g) / span, (maxc - b) / span
    h = (
        (maxc == r) * (bc - gc)
        + ((maxc == g) & (maxc != r)) * (2.0 + rc - bc)
        + ((maxc != g) & (maxc != r)) * (4.0 + gc - rc)
    )
    return torch.fmod(h / 6.0 + 1.0, 1.0), s, maxc


def _hsv_to_rgb(h: torch.Tensor, s: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    i = torch.floor(h * 6.0)
    f = h * 6.0 - i
    i = i.to(torch.int64) % 6
    p = (v * (1.0 - s)).clamp(0.0, 1.0)
    q = (v * (1.0 - s * f)).clamp(0.0, 1.0)
    t = (v * (1.0 - s * (1.0 - f))).clamp(0.0, 1.0)
    sector = (i.unsqueeze(-3) == torch.arange(6, device=i.device).view(-1, 1, 1)).to(v.dtype)
    table = torch.stack(
        [torch.stack(c, dim=-3) for c in ((v, q, p, p, t, v), (t, v, v, q, p, p), (p, p, t, v, v, q))], dim=-4
    )
    return torch.einsum("...ijk,...xijk->...xjk", sector, table)


def adjust_hue(x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """Rotate the hue of each RGB image by its shift (N,) in [-0.5, 0.5] turns; no-op for 1 channel."""
    if x.shape[-3] == 1:
        return x
    h, s, v = _rgb_to_hsv(x)
    h = torch.remainder(h + shift.to(device=x.device, dtype=x.dtype).view(-1, 1, 1), 1.0)
    return _hsv_to_rgb(h, s, v)


def _factor(u: torch.Tensor, strength: float, apply: torch.Tensor) -> torch.Tensor:
    """ColorJitter-style factor uniform in [max(0, 1 - strength), 1 + strength]; 1 where not applied."""
    low = max(0.0, 1.0 - strength)
    return torch.where(apply, low + (1.0 + strength - low) * u, torch.ones_like(u))


def _check_aug(brightness, contrast, saturation, hue, jitter_p, flip_p, grayscale_p, sync_free=None) -> None:
    if sync_free is not None and not isinstance(sync_free, bool):
        raise ParameterError(None, "sync_free", sync_free, "None (by device), True or False")
    for name, value in (("brightness", brightness), ("contrast", contrast), ("saturation", saturation)):
        check_float(name, value, low=0.0)
    check_float("hue", hue, low=0.0, high=0.5)
    for name, value in (("jitter_p", jitter_p), ("flip_p", flip_p), ("grayscale_p", grayscale_p)):
        check_float(name, value, low=0.0, high=1.0)


def augment_batch(x: torch.Tensor, *, generator: torch.Generator, **options) -> torch.Tensor:
    """Colour jitter, horizontal flip and random grayscale, per image, of floating images in [0, 1] (..., C, H, W):
    one (N, 7) uniform draw from ``generator`` (N images), then :func:`augment_with_uniforms` with ``options``."""
    names = [p for p in inspect.signature(augment_with_uniforms).parameters if p not in ("x", "u")]
    check_parameter_names("augment_batch", options, names)  # before the draw: a bad call leaves the generator as it was
    num_images = _flat(x).shape[0] if x.is_floating_point() else 0
    return augment_with_uniforms(x, _uniforms(generator, num_images), **options)


def _uniforms(generator: torch.Generator, num_images: int) -> torch.Tensor:
    """The (N, 7) draw of :func:`augment_batch` from ``generator``."""
    if not isinstance(generator, torch.Generator):
        allowed = "a torch.Generator, e.g. torch.Generator().manual_seed(0)"
        raise ParameterError(None, "generator", generator, allowed, got=f"type {type(generator).__name__}")
    return torch.rand((num_images, 7), generator=generator, device=generator.device)


def augment_with_uniforms(
    x: torch.Tensor,
    u: torch.Tensor,
    *,
    brightness: float = 0.4,
    contrast: float = 0.4,
    saturation: float = 0.4,
    hue: float = 0.0,
    jitter_p: float = 1.0,
    flip_p: float = 0.5,
    grayscale_p: float = 0.1,
    sync_free: bool | None = None,
) -> torch.Tensor:
    """The augmentation of :func:`augment_batch` with its draws given: one row of ``u`` per image, columns jitter
    on/off, brightness, contrast, saturation, hue, flip, grayscale (a batched trainer draws them per client).

    Jitter strengths s give factors uniform in [max(0, 1 - s), 1 + s] (the paper gives none; 0.4 is common), ``hue``
    a shift in [-hue, hue]; ``jitter_p`` is the probability that an image is jittered at all; ``flip_p`` and
    ``grayscale_p`` are the paper's 0.5 and 0.1. The order is fixed (brightness, contrast, saturation, hue, flip,
    grayscale), unlike torchvision's. ``sync_free`` says how the flipped and grayed images are written: by boolean
    indexing, which touches only those images but synchronises with the host (False), or by ``torch.where`` over
    the batch (True); None, the default, takes True on an accelerator and False on the CPU. The values are the same.
    """
    if not x.is_floating_point():
        allowed = "floating-point images in [0, 1] (see to_unit_float)"
        raise ParameterError(None, "x", x, allowed, got=f"dtype {x.dtype}")
    _check_aug(brightness, contrast, saturation, hue, jitter_p, flip_p, grayscale_p, sync_free)
    flat = _flat(x)
    out = _augment_(
        flat.clone(),
        _checked_uniforms(u, flat),
        brightness=brightness,
        contrast=contrast,
        saturation=saturation,
        hue=hue,
        jitter_p=jitter_p,
        flip_p=flip_p,
        grayscale_p=grayscale_p,
        sync_free=sync_free,
    )
    return out.reshape(x.shape)


def _checked_uniforms(u: torch.Tensor, flat: torch.Tensor) -> torch.Tensor:
    """``u`` on ``flat``'s device, once its shape is checked: one row of 7 per image of ``flat`` (N, C, H, W)."""
    if not isinstance(u, torch.Tensor) or tuple(u.shape) != (flat.shape[0], 7):
        allowed = f"a tensor of shape ({flat.shape[0]}, 7), one row per image"
        got = f"shape {tuple(u.shape)}" if isinstance(u, torch.Tensor) else f"type {type(u).__name__}"
        raise ParameterError(None, "u", u, allowed, got=got)
    return u.to(flat.device)


def _augment_(out, u, *, brightness, contrast, saturation, hue, jitter_p, flip_p, grayscale_p, sync_free):
    """:func:`augment_with_uniforms` of checked arguments on images (N, C, H, W) of the caller's own: changes ``out``
    in place where it can and returns the result."""
    apply = u[:, 0] < jitter_p
    if brightness > 0:
        out = _brightness_(out, _per_image(_factor(u[:, 1], brightness, apply), out))
    if contrast > 0:
        out = _contrast_(out, _per_image(_factor(u[:, 2], contrast, apply), out))
    if saturation > 0:
        out = _saturation_(out, _per_image(_factor(u[:, 3], saturation, apply), out))
    if hue > 0:
        out = adjust_hue(out, torch.where(apply, (2.0 * u[:, 4] - 1.0) * hue, torch.zeros_like(u[:, 4])))
    out = _replace_images(out, u[:, 5] < flip_p, lambda v: v.flip(-1), sync_free)
    if out.shape[1] == 3:
        out = _replace_images(out, u[:, 6] < grayscale_p, lambda v: rgb_to_grayscale(v).expand_as(v), sync_free)
    return out


def _replace_images(out: torch.Tensor, mask: torch.Tensor, make, sync_free: bool | None) -> torch.Tensor:
    """The images ``mask`` (N,) of ``out`` (N, C, H, W) replaced by ``make`` of them: in place by boolean indexing
    (``sync_free`` False), or by ``torch.where`` over the whole batch (True); None: True off the CPU."""
    if sync_free is None:
        sync_free = out.device.type != "cpu"
    if sync_free:
        return torch.where(mask.view(-1, 1, 1, 1), make(out), out)
    rows = mask.nonzero().flatten()
    out[rows] = make(out[rows])
    return out


@dataclass
class Preprocessor:
    """The paper's input pipeline for batches (..., C, H, W), uint8 or floating in [0, 1]: scale to [0, 1], resize
    (``image_size``), augment (:meth:`train` only, :func:`augment_batch`'s options), standardise with the training
    set's ``mean`` and ``std``; ``gray_to_rgb`` repeats 1-channel batches to 3 channels first; ``sync_free`` as in
    :func:`augment_with_uniforms`.
    """

    mean: Sequence[float]
    std: Sequence[float]
    augment: bool = True
    brightness: float = 0.4
    contrast: float = 0.4
    saturation: float = 0.4
    hue: float = 0.0
    jitter_p: float = 1.0
    flip_p: float = 0.5
    grayscale_p: float = 0.1
    image_size: int | None = None
    gray_to_rgb: bool = False
    sync_free: bool | None = None
    _stats: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):
        self.mean = tuple(float(m) for m in self.mean)
        self.std = tuple(float(s) for s in self.std)
        if len(self.mean) != len(self.std) or len(self.mean) not in (1, 3):
            allowed = f"1 or 3 entries, as many as mean has ({len(self.mean)})"
            raise ParameterError(None, "std", self.std, allowed)
        for s in self.std:
            check_float("std", s, low=0.0, low_open=True)
        _check_aug(**self._aug_params())
        if self.image_size is not None:
            self.image_size = check_int("image_size", self.image_size, low=1)

    @classmethod
    def from_dataset(cls, dataset, **kwargs) -> "Preprocessor":
        """Build one with ``dataset.channel_stats()`` (an ``ArrayDataset``) and the given options."""
        mean, std = dataset.channel_stats()
        return cls(mean=mean, std=std, **kwargs)

    def _standardize(self, x: torch.Tensor) -> torch.Tensor:
        key = (x.device, x.dtype)
        if key not in self._stats:  # cache the (C, 1, 1) tensors per device and dtype
            self._stats[key] = tuple(
                torch.tensor(v, dtype=x.dtype, device=x.device).view(-1, 1, 1) for v in (self.mean, self.std)
            )
        mean, std = self._stats[key]
        if x.shape[-3] != mean.shape[0]:
            allowed = f"images with as many channels as mean/std have ({mean.shape[0]})"
            raise ParameterError(None, "x", x, allowed, got=f"{x.shape[-3]} channels")
        return x.sub_(mean).div_(std)

    def _prepare(self, x: torch.Tensor) -> torch.Tensor:
        """Scaled (and resized) images in a tensor of their own: the train and test paths change it in place."""
        source = x
        if self.gray_to_rgb and x.shape[-3] == 1:  # contiguous, so every later op sees the 3-channel layout
            x = x.expand(*x.shape[:-3], 3, *x.shape[-2:]).contiguous()
        x = to_unit_float(x)
        x = x if self.image_size is None else resize_batch(x, self.image_size)
        return x.clone() if x.data_ptr() == source.data_ptr() else x

    def train(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Training batch (..., C, H, W), uint8 or [0, 1] float: augment, then standardise."""
        x = self._prepare(x)
        if self.augment:
            flat = _flat(x)
            x = _augment_(flat, _uniforms(generator, flat.shape[0]), **self._aug_params()).reshape(x.shape)
        return self._standardize(x)

    def train_with_uniforms(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """:meth:`train` with the augmentation's uniforms given (see :func:`augment_with_uniforms`)."""
        x = self._prepare(x)
        if self.augment:
            flat = _flat(x)
            x = _augment_(flat, _checked_uniforms(u, flat), **self._aug_params()).reshape(x.shape)
        return self._standardize(x)

    def _aug_params(self) -> dict:
        return {
            k: getattr(self, k)
            for k in ("brightness", "contrast", "saturation", "hue", "jitter_p", "flip_p", "grayscale_p", "sync_free")
        }

    def test(self, x: torch.Tensor) -> torch.Tensor:
        """Evaluation batch: no augmentation, only scaling, resize and standardisation."""
        return self._standardize(self._prepare(x))
