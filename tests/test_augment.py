"""Tests of fedlib.data.augment: determinism, each op's definition, ranges, shapes and the test path."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fedlib.data.augment import (  # noqa: E402
    LUMA_WEIGHTS,
    Preprocessor,
    adjust_brightness,
    adjust_contrast,
    adjust_hue,
    adjust_saturation,
    augment_batch,
    augment_with_uniforms,
    resize_batch,
)
from fedlib.data.datasets import ArrayDataset  # noqa: E402

OFF = dict(brightness=0.0, contrast=0.0, saturation=0.0, hue=0.0, flip_p=0.0, grayscale_p=0.0)


def _batch(shape=(8, 3, 6, 7), seed=0, dtype=torch.float32):
    return torch.rand(shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _gen(seed=1):
    return torch.Generator().manual_seed(seed)


def test_same_seed_same_output_other_seed_differs():
    x = _batch()
    a = augment_batch(x, generator=_gen(5), hue=0.1)
    b = augment_batch(x, generator=_gen(5), hue=0.1)
    c = augment_batch(x, generator=_gen(6), hue=0.1)
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_all_off_is_identity():
    x = _batch()
    assert torch.equal(augment_batch(x, generator=_gen(), **OFF), x)
    assert torch.equal(augment_batch(x, generator=_gen(), jitter_p=0.0, flip_p=0.0, grayscale_p=0.0), x)


def test_flip_p1_equals_torch_flip():
    x = _batch()
    out = augment_batch(x, generator=_gen(), **{**OFF, "flip_p": 1.0})
    assert torch.equal(out, torch.flip(x, dims=[-1]))


def test_grayscale_p1_gives_equal_channels_with_601_weights():
    x = _batch()
    out = augment_batch(x, generator=_gen(), **{**OFF, "grayscale_p": 1.0})
    luma = 0.299 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2]
    assert LUMA_WEIGHTS == (0.299, 0.587, 0.114)
    for c in range(3):
        torch.testing.assert_close(out[:, c], luma)


def test_flip_and_grayscale_rates_are_per_image():
    x = _batch((4000, 3, 2, 2))
    out = augment_batch(x, generator=_gen(), **{**OFF, "flip_p": 0.5, "grayscale_p": 0.1})
    flipped = (out[..., 0] == x[..., 1]).all(dim=(1, 2)) & ~(out == x).all(dim=(1, 2, 3))
    gray = (out[:, 0] == out[:, 1]).all(dim=(1, 2)) & (out[:, 1] == out[:, 2]).all(dim=(1, 2))
    assert 0.45 < flipped.float().mean() < 0.55 and 0.08 < gray.float().mean() < 0.12


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_range_shape_dtype_kept(dtype):
    x = _batch(dtype=dtype)
    out = augment_batch(x, generator=_gen(), brightness=0.9, contrast=0.9, saturation=0.9, hue=0.5)
    assert out.shape == x.shape and out.dtype == dtype
    assert float(out.min()) >= 0.0 and float(out.max()) <= 1.0


def test_leading_client_dimension_matches_flattened():
    x = _batch((3, 4, 3, 5, 5))
    out = augment_batch(x, generator=_gen(9), hue=0.2)
    flat = augment_batch(x.reshape(12, 3, 5, 5), generator=_gen(9), hue=0.2)
    assert out.shape == x.shape and torch.equal(out.reshape(12, 3, 5, 5), flat)
    single = augment_batch(x[0, 0], generator=_gen(), **OFF)
    assert torch.equal(single, x[0, 0])


def test_one_channel_images():
    x = _batch((5, 1, 6, 6))
    out = augment_batch(x, generator=_gen(), saturation=0.9, hue=0.3, grayscale_p=1.0)
    assert out.shape == x.shape and float(out.min()) >= 0 and float(out.max()) <= 1
    assert torch.equal(augment_batch(x, generator=_gen(), **{**OFF, "grayscale_p": 1.0}), x)


def test_ops_agree_with_torchvision_functional():
    from fedlib.data._torchvision import import_torchvision

    TF = import_torchvision().transforms.functional
    x = _batch((4, 3, 5, 6))
    f = torch.tensor([0.6, 1.0, 1.3, 1.4])
    shift = torch.tensor([-0.4, -0.1, 0.0, 0.25])
    for i in range(4):
        v = float(f[i])
        torch.testing.assert_close(adjust_brightness(x, f)[i], TF.adjust_brightness(x[i], v))
        torch.testing.assert_close(adjust_contrast(x, f)[i], TF.adjust_contrast(x[i], v), atol=1e-3, rtol=0)
        torch.testing.assert_close(adjust_saturation(x, f)[i], TF.adjust_saturation(x[i], v), atol=1e-3, rtol=0)
        torch.testing.assert_close(adjust_hue(x, shift)[i], TF.adjust_hue(x[i], float(shift[i])), atol=1e-5, rtol=0)


def _composed(x, u, strength=0.4, flip_p=0.5, grayscale_p=0.1):
    """The augmentation written out, out of place (jitter always on, hue off)."""
    low, high = 1.0 - strength, 1.0 + strength
    f = [(low + (high - low) * u[:, c]).view(-1, 1, 1, 1) for c in (1, 2, 3)]

    def gray(v):
        return (v * torch.tensor(LUMA_WEIGHTS).view(3, 1, 1)).sum(dim=1, keepdim=True)

    x = (x * f[0]).clamp(0.0, 1.0)
    x = (f[1] * x + (1 - f[1]) * gray(x).mean(dim=(1, 2, 3), keepdim=True)).clamp(0.0, 1.0)
    x = (f[2] * x + (1 - f[2]) * gray(x)).clamp(0.0, 1.0)
    x = torch.where((u[:, 5] < flip_p).view(-1, 1, 1, 1), x.flip(-1), x)
    return torch.where((u[:, 6] < grayscale_p).view(-1, 1, 1, 1), gray(x).expand_as(x), x)


def test_in_place_pipeline_equals_the_arithmetic_written_out():
    x, u = _batch((64, 3, 5, 6), seed=3), torch.rand((64, 7), generator=_gen(4))
    u[:, 0] = 0.0  # every image jittered
    assert torch.equal(augment_with_uniforms(x, u), _composed(x, u))
    pre = Preprocessor(mean=(0.5, 0.4, 0.3), std=(0.2, 0.25, 0.3))
    images = (x * 255).round().to(torch.uint8)
    mean, std = torch.tensor([0.5, 0.4, 0.3]).view(3, 1, 1), torch.tensor([0.2, 0.25, 0.3]).view(3, 1, 1)
    expected = (_composed(images.float() / 255, u) - mean) / std
    assert torch.equal(pre.train_with_uniforms(images, u), expected)


@pytest.mark.parametrize("channels", [1, 3])
def test_image_replacement_by_index_equals_by_where(channels):
    from fedlib.data.augment import _replace_images

    x, mask = _batch((40, channels, 4, 5), seed=8), torch.rand(40, generator=_gen(2)) < 0.3
    by_where = _replace_images(x.clone(), mask, lambda v: v.flip(-1) * 2, True)
    by_index = _replace_images(x.clone(), mask, lambda v: v.flip(-1) * 2, False)
    assert torch.equal(by_where, by_index)
    assert torch.equal(by_index[mask], x[mask].flip(-1) * 2) and torch.equal(by_index[~mask], x[~mask])
    u = torch.rand((40, 7), generator=_gen(5))
    assert torch.equal(augment_with_uniforms(x, u, sync_free=True), augment_with_uniforms(x, u, sync_free=False))
    with pytest.raises(ValueError, match="sync_free.*'yes'.*None \\(by device\\), True or False"):
        Preprocessor(mean=(0.5,) * channels, std=(0.2,) * channels, sync_free="yes")


def test_callers_images_are_left_unchanged():
    x = _batch((6, 3, 5, 5), seed=11)
    kept, u, f = x.clone(), torch.rand((6, 7), generator=_gen(3)), torch.full((6,), 1.3)
    pre = Preprocessor(mean=(0.5, 0.5, 0.5), std=(0.2, 0.2, 0.2))
    for out in (
        adjust_brightness(x, f),
        adjust_contrast(x, f),
        adjust_saturation(x, f),
        augment_with_uniforms(x, u),
        augment_batch(x, generator=_gen()),
        pre.train_with_uniforms(x, u),
        pre.train(x, _gen()),
        pre.test(x),
    ):
        assert out.data_ptr() != x.data_ptr()
    assert torch.equal(x, kept)


def test_jitter_factors_within_strength():
    x = torch.full((500, 1, 2, 2), 0.5)
    out = augment_batch(x, generator=_gen(), **{**OFF, "brightness": 0.4})
    factors = out[:, 0, 0, 0] / 0.5
    assert 0.6 - 1e-6 <= float(factors.min()) < 0.65 and 1.35 < float(factors.max()) <= 1.4 + 1e-6


def test_argument_errors_name_parameter():
    x = _batch()
    with pytest.raises(
        TypeError, match=r"^parameter 'generator': got type Generator; allowed: a torch\.Generator, e\.g\. "
    ):
        augment_batch(x, generator=np.random.default_rng(0))
    with pytest.raises(
        ValueError, match=r"parameter 'flip_p': got 1\.5; allowed: a finite real number >= 0\.0 and <= 1\.0\."
    ):
        augment_batch(x, generator=_gen(), flip_p=1.5)
    with pytest.raises(
        ValueError, match=r"parameter 'hue': got 0\.7; allowed: a finite real number >= 0\.0 and <= 0\.5\."
    ):
        augment_batch(x, generator=_gen(), hue=0.7)
    with pytest.raises(
        TypeError, match=r"^parameter 'x': got dtype torch\.uint8; allowed: floating-point images in \[0, 1\]"
    ):
        augment_batch((x * 255).to(torch.uint8), generator=_gen())
    with pytest.raises(
        ValueError,
        match=r"^parameter 'x': got shape \(2, 4, 3, 3\); allowed: a tensor of shape \(\.\.\., C, H, W\) with C = 1 or",
    ):
        augment_batch(_batch((2, 4, 3, 3)), generator=_gen())
    g = _gen()
    state = g.get_state()
    with pytest.raises(
        TypeError, match=r"^augment_batch unknown parameter 'brightnes': got 0\.1; allowed: the parameters brightn"
    ):
        augment_batch(x, generator=g, brightnes=0.1)
    assert torch.equal(g.get_state(), state)  # refused before the draw


def test_standardize_with_own_stats_gives_zero_mean_unit_std():
    rng = np.random.default_rng(0)
    x = (rng.beta(2, 5, (64, 8, 8, 3)) * 255).astype(np.uint8)
    ds = ArrayDataset(x, np.zeros(64, np.int64), x[:2], np.zeros(2, np.int64), num_classes=1)
    mean, std = ds.channel_stats()
    z = Preprocessor(mean=mean, std=std).test(ds.to_tensors("cpu", torch.float64).x_train)
    torch.testing.assert_close(z.mean(dim=(0, 2, 3)), torch.zeros(3, dtype=torch.float64), atol=1e-9, rtol=0)
    torch.testing.assert_close(z.std(dim=(0, 2, 3), correction=0), torch.ones(3, dtype=torch.float64))


def test_preprocessor_test_path_is_standardize_only():
    x = _batch()
    pre = Preprocessor(mean=(0.5, 0.4, 0.3), std=(0.2, 0.25, 0.3))
    mean, std = torch.tensor(pre.mean).view(3, 1, 1), torch.tensor(pre.std).view(3, 1, 1)
    torch.testing.assert_close(pre.test(x), (x - mean) / std)
    raw = (x * 255).round().to(torch.uint8)
    torch.testing.assert_close(pre.test(raw), (raw.float() / 255 - mean) / std)
    off = Preprocessor(mean=pre.mean, std=pre.std, augment=False)
    torch.testing.assert_close(off.train(x, _gen()), pre.test(x))


def test_preprocessor_train_deterministic_and_resizes():
    x = _batch((2, 3, 3, 8, 8))
    pre = Preprocessor(mean=[0.5] * 3, std=[0.25] * 3, image_size=16)
    a, b = pre.train(x, _gen(3)), pre.train(x, _gen(3))
    assert a.shape == (2, 3, 3, 16, 16) and torch.equal(a, b)
    assert pre.test(x).shape == (2, 3, 3, 16, 16)
    torch.testing.assert_close(resize_batch(x, 8), x)
    with pytest.raises(ValueError, match=r"parameter 'std': got 0\.0; allowed: a finite real number > 0\.0\."):
        Preprocessor(mean=[0.5], std=[0.0])


def test_preprocessor_from_dataset():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (10, 4, 4, 1), dtype=np.uint8)
    ds = ArrayDataset(x, np.zeros(10, np.int64), x[:1], np.zeros(1, np.int64), num_classes=1)
    pre = Preprocessor.from_dataset(ds, grayscale_p=0.0)
    np.testing.assert_allclose(pre.mean, ds.channel_stats()[0])
    assert pre.train(torch.from_numpy(x).permute(0, 3, 1, 2), _gen()).shape == (10, 1, 4, 4)
