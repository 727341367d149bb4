"""Tiny fake data sets written in each real on-disk format that ``fedlib.data.datasets`` reads.

The paper tier's dry run (``repro.paper_tier.dry_run``) trains every group for one round on these files, so
the loaders, partitions, models and algorithms run on the paths a real run takes, in seconds.  Pixels are random
(uint8); every class gets ``train_per_class`` training and ``test_per_class`` test images.

=================  ==========================================================================================
data set           files written under ``root`` (the format ``fedlib.data.datasets`` reads)
=================  ==========================================================================================
``cifar10``        ``cifar-10-batches-py/data_batch_1..5``, ``test_batch``, ``batches.meta`` (python pickles)
``cifar100-20``    ``cifar-100-python/train``, ``test``, ``meta`` (fine and coarse labels, pickles)
``cinic10``        ``cinic-10/{train,valid,test}/<class>/*.png`` (32 x 32 RGB)
``pathmnist``      ``medmnist/pathmnist[_<size>].npz`` (RGB, ``train/val/test_images`` and ``_labels``)
``tissuemnist``    ``medmnist/tissuemnist[_<size>].npz`` (grayscale)
``brain-tumor-mri`` ``brain-tumor-mri/{Training,Testing}/<class>/*.jpg`` (grayscale and RGB, mixed sizes)
``mnist``          ``MNIST/raw/*-ubyte`` (idx files)
=================  ==========================================================================================
"""

from __future__ import annotations

import pickle
import struct
from pathlib import Path

import numpy as np

from fedlib._validate import check_choice, check_int

__all__ = ["FAKE_FORMATS", "write_fake_dataset"]

_CIFAR10 = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


def _pickle(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        pickle.dump(obj, fh, protocol=2)


def _labels(num_classes: int, per_class: int, rng) -> np.ndarray:
    return rng.permutation(np.repeat(np.arange(num_classes), per_class))


def _cifar10(root: Path, train: int, test: int, rng, **_) -> None:
    base = root / "cifar-10-batches-py"
    y = _labels(10, train, rng)
    x = rng.integers(0, 256, (y.size, 3072), dtype=np.uint8)
    for i, idx in enumerate(np.array_split(np.arange(y.size), 5), start=1):
        _pickle(
            base / f"data_batch_{i}",
            {
                b"batch_label": f"batch {i}".encode(),
                b"data": x[idx],
                b"labels": [int(v) for v in y[idx]],
                b"filenames": [b"f.png"] * idx.size,
            },
        )
    yt = _labels(10, test, rng)
    _pickle(
        base / "test_batch",
        {b"data": rng.integers(0, 256, (yt.size, 3072), dtype=np.uint8), b"labels": [int(v) for v in yt]},
    )
    _pickle(base / "batches.meta", {b"label_names": [c.encode() for c in _CIFAR10], b"num_vis": 3072})


def _cifar100(root: Path, train: int, test: int, rng, **_) -> None:
    from fedlib.data.profiles import CIFAR100_COARSE

    coarse_of = np.asarray(CIFAR100_COARSE)
    fine_of = [np.flatnonzero(coarse_of == c) for c in range(20)]
    base = root / "cifar-100-python"
    for split, per in (("train", train), ("test", test)):
        coarse = _labels(20, per, rng)
        fine = np.array([fine_of[c][i % 5] for i, c in enumerate(coarse)])
        _pickle(
            base / split,
            {
                "data": rng.integers(0, 256, (coarse.size, 3072), dtype=np.uint8),
                "fine_labels": [int(v) for v in fine],
                "coarse_labels": [int(v) for v in coarse],
            },
        )
    _pickle(
        base / "meta",
        {"fine_label_names": [f"fine{i}" for i in range(100)], "coarse_label_names": [f"coarse{i}" for i in range(20)]},
    )


def _images(folder: Path, classes, per_class: int, rng, ext: str, sizes=((32, 32),), modes=("RGB",)) -> None:
    from PIL import Image

    for cls in classes:
        (folder / cls).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            w, h = sizes[i % len(sizes)]
            mode = modes[i % len(modes)]
            shape = (h, w, 3) if mode == "RGB" else (h, w)
            Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode).save(folder / cls / f"{i}{ext}")


def _cinic10(root: Path, train: int, test: int, rng, **_) -> None:
    base = root / "cinic-10"
    for split, per in (("train", train), ("valid", test), ("test", test)):
        _images(base / split, _CIFAR10, per, rng, ".png")


def _brain_tumor(root: Path, train: int, test: int, rng, **_) -> None:
    from fedlib.data.datasets import BRAIN_TUMOR_CLASSES

    base = root / "brain-tumor-mri"
    sizes, modes = ((48, 40), (40, 48), (44, 44)), ("L", "RGB")  # the real folders mix sizes and colour modes
    _images(base / "Training", BRAIN_TUMOR_CLASSES, train, rng, ".jpg", sizes, modes)
    _images(base / "Testing", BRAIN_TUMOR_CLASSES, test, rng, ".jpg", sizes, modes)


def _medmnist(flag: str, num_classes: int, rgb: bool):
    def write(root: Path, train: int, test: int, rng, *, size: int = 28) -> None:
        name = f"{flag}.npz" if size == 28 else f"{flag}_{size}.npz"
        path = root / "medmnist" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays = {}
        for split, per in (("train", train), ("val", test), ("test", test)):
            y = _labels(num_classes, per, rng)
            shape = (y.size, size, size, 3) if rgb else (y.size, size, size)
            arrays[f"{split}_images"] = rng.integers(0, 256, shape, dtype=np.uint8)
            arrays[f"{split}_labels"] = y.reshape(-1, 1).astype(np.uint8)
        np.savez(path, **arrays)

    return write


def _idx(path: Path, arr: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    header = struct.pack(">I", 0x0800 + arr.ndim) + b"".join(struct.pack(">I", d) for d in arr.shape)
    path.write_bytes(header + arr.astype(np.uint8).tobytes())


def _mnist(root: Path, train: int, test: int, rng, **_) -> None:
    raw = root / "MNIST" / "raw"
    for prefix, per in (("train", train), ("t10k", test)):
        y = _labels(10, per, rng)
        _idx(raw / f"{prefix}-images-idx3-ubyte", rng.integers(0, 256, (y.size, 28, 28)))
        _idx(raw / f"{prefix}-labels-idx1-ubyte", y)


#: Writer of each data set (see the module docstring).
FAKE_FORMATS = {
    "cifar10": _cifar10,
    "cifar100-20": _cifar100,
    "cinic10": _cinic10,
    "pathmnist": _medmnist("pathmnist", 9, True),
    "tissuemnist": _medmnist("tissuemnist", 8, False),
    "brain-tumor-mri": _brain_tumor,
    "mnist": _mnist,
}


def write_fake_dataset(
    name: str, root, *, train_per_class: int = 12, test_per_class: int = 2, seed: int = 0, size: int = 28
) -> Path:
    """Write fake data set ``name`` (a key of :data:`FAKE_FORMATS`) under ``root``; returns ``root``.

    ``size`` is the MedMNIST(+) resolution of the npz file (28, 64, 128 or 224; ignored by the other sets).

    Examples
    --------
    >>> import tempfile
    >>> from fedlib.data.datasets import load_dataset
    >>> root = write_fake_dataset("cifar10", tempfile.mkdtemp(), train_per_class=3)
    >>> ds = load_dataset("cifar10", data_root=root)
    >>> ds.x_train.shape, sorted(set(ds.y_train.tolist())) == list(range(10))
    ((30, 32, 32, 3), True)
    """
    check_choice("name", name, FAKE_FORMATS)
    train = check_int("train_per_class", train_per_class, low=1)
    test = check_int("test_per_class", test_per_class, low=1)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    FAKE_FORMATS[name](root, train, test, np.random.default_rng(seed), size=size)
    return root
