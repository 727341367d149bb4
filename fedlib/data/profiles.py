"""Per-class label counts of the FedEntOpt paper's data sets (§V-A1), so label-only experiments need no images."""

from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass

import numpy as np

from fedlib._validate import ParameterError, check_choice, check_label_vector, parameter_checks

__all__ = [
    "LabelProfile",
    "PROFILES",
    "UNAVAILABLE_PROFILES",
    "CIFAR100_COARSE",
    "CIFAR100_SUPERCLASS_NAMES",
    "DATA_ROOT_ENV",
    "cifar100_to_superclass",
    "get_profile",
    "profile_labels",
    "resolve_data_root",
]

#: Environment variable naming the folder that holds fedlib's data files.
DATA_ROOT_ENV = "FEDLIB_DATA_ROOT"


@dataclass(frozen=True)
class LabelProfile:
    """Per-class sample counts of one data set's training (and, where known, test) split."""

    name: str
    num_classes: int
    train_counts: tuple[int, ...]
    test_counts: tuple[int, ...] | None
    class_names: tuple[str, ...]
    source: str

    def __post_init__(self):
        for field, value in (
            ("train_counts", self.train_counts),
            ("test_counts", self.test_counts),
            ("class_names", self.class_names),
        ):
            if value is not None and len(value) != self.num_classes:
                allowed = f"one entry per class (num_classes is {self.num_classes})"
                raise ParameterError(f"profile {self.name!r}", field, value, allowed, got=f"{len(value)} entries")

    @property
    def num_train(self) -> int:
        return int(sum(self.train_counts))

    @property
    def num_test(self) -> int | None:
        return None if self.test_counts is None else int(sum(self.test_counts))


#: CIFAR-100 fine label (0..99) -> superclass (0..19): the ``coarse_labels`` of its python pickles (Krizhevsky 2009).
# fmt: off
CIFAR100_COARSE: tuple[int, ...] = (
    4, 1, 14, 8, 0, 6, 7, 7, 18, 3,
    3, 14, 9, 18, 7, 11, 3, 9, 7, 11,
    6, 11, 5, 10, 7, 6, 13, 15, 3, 15,
    0, 11, 1, 10, 12, 14, 16, 9, 11, 5,
    5, 19, 8, 8, 15, 13, 14, 17, 18, 10,
    16, 4, 17, 4, 2, 0, 17, 4, 18, 17,
    10, 3, 2, 12, 12, 16, 12, 1, 9, 19,
    2, 10, 0, 1, 16, 12, 9, 13, 15, 13,
    16, 19, 2, 4, 6, 19, 5, 5, 8, 19,
    18, 1, 2, 15, 6, 0, 17, 8, 14, 13,
)

#: Names of the 20 CIFAR-100 superclasses, in coarse-label order (CIFAR-100 ``meta``).
CIFAR100_SUPERCLASS_NAMES: tuple[str, ...] = (
    "aquatic_mammals", "fish", "flowers", "food_containers", "fruit_and_vegetables", "household_electrical_devices",
    "household_furniture", "insects", "large_carnivores", "large_man-made_outdoor_things",
    "large_natural_outdoor_scenes", "large_omnivores_and_herbivores", "medium_mammals", "non-insect_invertebrates",
    "people", "reptiles", "small_mammals", "trees", "vehicles_1", "vehicles_2",
)
# fmt: on


def cifar100_to_superclass(fine_labels) -> np.ndarray:
    """CIFAR-100 fine labels (0..99) mapped to their 20 superclasses (:data:`CIFAR100_COARSE`), as int64."""
    fine = check_label_vector("fine_labels", fine_labels, num_classes=100)
    return np.asarray(CIFAR100_COARSE, dtype=np.int64)[fine]


_CIFAR10_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
# fmt: off
_PATHMNIST_NAMES = (
    "adipose", "background", "debris", "lymphocytes", "mucus", "smooth muscle", "normal colon mucosa",
    "cancer-associated stroma", "colorectal adenocarcinoma epithelium",
)
_SUPER_SIZES = np.bincount(CIFAR100_COARSE, minlength=20)  # 5 fine classes per superclass

_PROFILE_LIST = (
    LabelProfile(
        "cifar10", 10, (5000,) * 10, (1000,) * 10, _CIFAR10_NAMES,
        "Krizhevsky (2009), CIFAR-10: 5,000 training and 1,000 test images per class; matches the full "
        "label vectors y_train/y_test of cifar10-labels.npz (tests/test_profiles.py checks it).",
    ),
    LabelProfile(
        "cifar100-20", 20, tuple(int(n) * 500 for n in _SUPER_SIZES), tuple(int(n) * 100 for n in _SUPER_SIZES),
        CIFAR100_SUPERCLASS_NAMES,
        "Krizhevsky (2009), CIFAR-100: 500 training and 100 test images per fine class; each of the 20 "
        "superclasses (CIFAR100_COARSE) groups 5 fine classes, hence 2,500 training and 500 test images.",
    ),
    LabelProfile(
        "cinic10", 10, (9000,) * 10, (9000,) * 10, _CIFAR10_NAMES,
        "Darlow et al. (2018), 'CINIC-10 is not ImageNet or CIFAR-10' (arXiv:1810.03505): 270,000 images "
        "in train/valid/test splits of 90,000 each, 9,000 per class per split; only 'train' is partitioned.",
    ),
    LabelProfile(
        "pathmnist", 9,
        (9366, 9509, 10360, 10401, 8006, 12182, 7886, 9401, 12885), (1338, 847, 339, 634, 1035, 592, 741, 421, 1233),
        _PATHMNIST_NAMES,
        "MedMNIST v2 (Yang et al., Sci. Data 2023), PathMNIST: train 89,996 / val 10,004 (9:1 split of "
        "NCT-CRC-HE-100K) / test 7,180 (CRC-VAL-HE-7K), class names from MedMNIST's INFO dict. Per-class "
        "train counts as computed from pathmnist.npz in public MedMNIST user code (two independent GitHub "
        "repositories agree); they sum to 89,996 and, added to the val counts listed there (1041, 1057, "
        "1152, 1156, 890, 1354, 877, 1045, 1432; sum 10,004), give the NCT-CRC-HE-100K class sizes "
        "(Kather et al. 2019). Test counts are the CRC-VAL-HE-7K class sizes (public code, sum 7,180).",
    ),
    LabelProfile(
        "brain-tumor-mri", 4, (1321, 1339, 1595, 1457), (300, 306, 405, 300),
        ("glioma", "meningioma", "notumor", "pituitary"),
        "M. Nickparvar, 'Brain Tumor MRI Dataset', Kaggle 2021 (paper ref. [27]): Training/ and Testing/ "
        "folders, 5,712 and 1,311 images; per-class counts as listed by several independent public "
        "projects using the data set (class folders in alphabetical order, as torchvision's ImageFolder).",
    ),
    LabelProfile(
        "mnist", 10, (5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949),
        (980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009), tuple(str(d) for d in range(10)),
        "LeCun et al. (1998), MNIST: 60,000 training / 10,000 test digits; counts of the full label "
        "vectors y_train_full/y_test in mnist-subset.npz (tests/test_profiles.py checks them).",
    ),
)
# fmt: on

#: Label profiles by name.
PROFILES: dict[str, LabelProfile] = {p.name: p for p in _PROFILE_LIST}

#: Data sets of the paper left out of :data:`PROFILES`, with the reason.
UNAVAILABLE_PROFILES: dict[str, str] = {
    "tissuemnist": (
        "MedMNIST v2 TissueMNIST (8 classes, train 165,466 / val 23,640 / test 47,280): its per-class "
        "counts could not be verified from a public source, so no profile is provided; compute them "
        "with np.bincount(np.load('tissuemnist.npz')['train_labels'].ravel()) when the file is at hand."
    ),
}


def get_profile(name: str) -> LabelProfile:
    """The :class:`LabelProfile` called ``name``; the error lists the known names."""
    if name in UNAVAILABLE_PROFILES:
        allowed = ", ".join(map(repr, PROFILES))
        hint = f"Profile {name!r} is not available: {UNAVAILABLE_PROFILES[name]}"
        raise ParameterError("get_profile", "name", name, allowed, hint=hint)
    with parameter_checks("get_profile"):
        check_choice("name", name, PROFILES)
    return PROFILES[name]


def profile_labels(name: str, split: str = "train") -> np.ndarray:
    """The sorted int64 label vector ``np.repeat(arange(C), counts)`` of profile ``name``'s ``split``."""
    profile = get_profile(name)
    check_choice("split", split, ("train", "test"))
    counts = profile.train_counts if split == "train" else profile.test_counts
    if counts is None:
        raise ParameterError(None, "split", split, f"'train' (profile {name!r} records no test counts)")
    return np.repeat(np.arange(profile.num_classes, dtype=np.int64), counts)


def resolve_data_root(data_root=None) -> pathlib.Path:
    """Folder holding fedlib's data files: ``data_root`` if given, else ``$FEDLIB_DATA_ROOT``, else ``./data``."""
    if data_root is not None:
        return pathlib.Path(data_root).expanduser()
    env = os.environ.get(DATA_ROOT_ENV)
    return pathlib.Path(env).expanduser() if env else pathlib.Path("data")
