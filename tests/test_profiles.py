"""Tests of fedlib.data.profiles: per-class label counts of the FedEntOpt paper's data sets (§V-A1)."""

from __future__ import annotations

import dataclasses
import os
import pathlib

import numpy as np
import pytest

from fedlib._validate import ParameterError
from fedlib.data.profiles import (
    CIFAR100_COARSE,
    CIFAR100_SUPERCLASS_NAMES,
    DATA_ROOT_ENV,
    PROFILES,
    UNAVAILABLE_PROFILES,
    LabelProfile,
    cifar100_to_superclass,
    get_profile,
    profile_labels,
    resolve_data_root,
)

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def shared_data_root() -> pathlib.Path:
    """The real data files: $FEDLIB_DATA_ROOT, else ../shared/data next to the repository."""
    env = os.environ.get(DATA_ROOT_ENV)
    return pathlib.Path(env) if env else REPO_ROOT.parent / "shared" / "data"


def require_file(name: str) -> pathlib.Path:
    path = shared_data_root() / name
    if not path.is_file():
        pytest.skip(f"{path} is absent (set {DATA_ROOT_ENV} to the folder holding {name})")
    return path


# ----------------------------------------------------------------------------- profile facts
EXPECTED_TOTALS = {  # name: (classes, train, test)
    "cifar10": (10, 50_000, 10_000),
    "cifar100-20": (20, 50_000, 10_000),
    "cinic10": (10, 90_000, 90_000),
    "pathmnist": (9, 89_996, 7_180),
    "brain-tumor-mri": (4, 5_712, 1_311),
    "mnist": (10, 60_000, 10_000),
}


def test_profile_names():
    assert set(PROFILES) == set(EXPECTED_TOTALS)
    assert "tissuemnist" in UNAVAILABLE_PROFILES


@pytest.mark.parametrize("name", sorted(EXPECTED_TOTALS))
def test_profile_totals(name):
    p = PROFILES[name]
    assert p.name == name
    assert (p.num_classes, p.num_train, p.num_test) == EXPECTED_TOTALS[name]


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_profile_is_well_formed(name):
    p = PROFILES[name]
    assert len(p.train_counts) == len(p.class_names) == p.num_classes
    assert all(isinstance(c, int) and c > 0 for c in p.train_counts + (p.test_counts or ()))
    assert len(set(p.class_names)) == p.num_classes
    assert len(p.source) > 40
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.name = "x"


def test_balanced_profiles_per_class():
    assert set(get_profile("cifar10").train_counts) == {5000}
    assert set(get_profile("cifar10").test_counts) == {1000}
    assert set(get_profile("cifar100-20").train_counts) == {2500}
    assert set(get_profile("cifar100-20").test_counts) == {500}
    assert set(get_profile("cinic10").train_counts) == set(get_profile("cinic10").test_counts) == {9000}


def test_medical_profile_counts():
    path = get_profile("pathmnist")
    assert path.train_counts == (9366, 9509, 10360, 10401, 8006, 12182, 7886, 9401, 12885)
    assert path.test_counts == (1338, 847, 339, 634, 1035, 592, 741, 421, 1233)
    # train + val equals the NCT-CRC-HE-100K class sizes (100,000 patches)
    val = np.array([1041, 1057, 1152, 1156, 890, 1354, 877, 1045, 1432])
    nct_crc_he_100k = [10407, 10566, 11512, 11557, 8896, 13536, 8763, 10446, 14317]
    assert (np.array(path.train_counts) + val).tolist() == nct_crc_he_100k
    brain = get_profile("brain-tumor-mri")
    assert brain.train_counts == (1321, 1339, 1595, 1457) and brain.test_counts == (300, 306, 405, 300)


def test_label_profile_checks_lengths():
    with pytest.raises(
        ValueError,
        match=r"^profile 'bad' parameter 'train_counts': got 2 entries; allowed: one entry per class "
        r"\(num_classes is 3\)\.$",
    ):
        LabelProfile("bad", 3, (1, 2), None, ("a", "b", "c"), "src")


# ----------------------------------------------------------------------------- CIFAR-100 superclasses
def test_cifar100_coarse_mapping_shape():
    assert len(CIFAR100_COARSE) == 100 and len(CIFAR100_SUPERCLASS_NAMES) == 20
    assert np.bincount(CIFAR100_COARSE, minlength=20).tolist() == [5] * 20


@pytest.mark.parametrize(
    "superclass,fine",
    [
        (0, [4, 30, 55, 72, 95]),  # aquatic_mammals: beaver, dolphin, otter, seal, whale
        (14, [2, 11, 35, 46, 98]),  # people: baby, boy, girl, man, woman
        (18, [8, 13, 48, 58, 90]),  # vehicles_1: bicycle, bus, motorcycle, pickup_truck, train
        (19, [41, 69, 81, 85, 89]),  # vehicles_2: lawn_mower, rocket, streetcar, tank, tractor
    ],
)
def test_cifar100_coarse_known_groups(superclass, fine):
    assert np.flatnonzero(np.array(CIFAR100_COARSE) == superclass).tolist() == fine


def test_cifar100_to_superclass():
    out = cifar100_to_superclass(np.array([0, 1, 99, 4]))
    assert out.dtype == np.int64 and out.tolist() == [4, 1, 13, 0]


@pytest.mark.parametrize(
    "bad,match",
    [
        ([100], r"got class id 100; allowed: .* in \[0, 100\) \(num_classes is 100\)"),
        ([-1], r"got class id -1; allowed: .* in \[0, 100\)"),
        ([[1]], r"got shape \(1, 1\); allowed: a non-empty 1-D array"),
        ([1.0], r"got dtype float64; allowed: a non-empty 1-D array of integer class ids"),
    ],
)
def test_cifar100_to_superclass_bad_input(bad, match):
    with pytest.raises(ParameterError, match=r"^parameter 'fine_labels': " + match):
        cifar100_to_superclass(bad)


# ----------------------------------------------------------------------------- lookup and label vectors
def test_get_profile_unknown_lists_names():
    with pytest.raises(
        ValueError, match=r"^get_profile parameter 'name': got 'imagenet'; allowed: 'cifar10', .*'mnist'\.$"
    ):
        get_profile("imagenet")


def test_get_profile_unavailable_says_why():
    with pytest.raises(
        ValueError,
        match=r"^get_profile parameter 'name': got 'tissuemnist'; allowed: 'cifar10', .* "
        r"'tissuemnist' is not available: .*could not be verified",
    ):
        get_profile("tissuemnist")


@pytest.mark.parametrize("name", sorted(PROFILES))
@pytest.mark.parametrize("split", ["train", "test"])
def test_profile_labels_match_counts(name, split):
    y = profile_labels(name, split)
    p = PROFILES[name]
    assert y.dtype == np.int64 and np.all(np.diff(y) >= 0)
    assert tuple(np.bincount(y, minlength=p.num_classes)) == getattr(p, f"{split}_counts")


def test_profile_labels_bad_split():
    with pytest.raises(ValueError, match=r"^parameter 'split': got 'val'; allowed: 'train', 'test'\.$"):
        profile_labels("cifar10", "val")


# ----------------------------------------------------------------------------- data root and files
def test_resolve_data_root_order(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_ROOT_ENV, str(tmp_path / "env"))
    assert resolve_data_root(tmp_path / "arg") == tmp_path / "arg"
    assert resolve_data_root() == tmp_path / "env"
    monkeypatch.delenv(DATA_ROOT_ENV)
    assert resolve_data_root() == pathlib.Path("data")


def test_real_cifar10_labels_match_profile():
    with np.load(require_file("cifar10-labels.npz")) as npz:
        y_train, y_test = npz["y_train"], npz["y_test"]
    p = get_profile("cifar10")
    assert y_train.shape == (50_000,) and y_test.shape == (10_000,)
    assert tuple(np.bincount(y_train, minlength=10)) == p.train_counts
    assert tuple(np.bincount(y_test, minlength=10)) == p.test_counts


def test_real_mnist_labels_match_profile():
    path = require_file("mnist-subset.npz")
    with np.load(path) as npz:
        y_train, y_test = npz["y_train_full"], npz["y_test"]
    p = get_profile("mnist")
    assert tuple(np.bincount(y_train, minlength=10)) == p.train_counts
    assert tuple(np.bincount(y_test, minlength=10)) == p.test_counts
