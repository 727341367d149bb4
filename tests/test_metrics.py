"""Tests of fedlib.selection.metrics: entropy (eq. 5), coverage, H_norm (§V-E), communication cost (Table V) of
FedEntOpt v2."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fedlib.selection.metrics import (
    covers_all_classes,
    entropy_bits,
    pooled_entropy,
    selection_entropy_norm,
)
from repro.communication import communication_cost

count_vectors = hnp.arrays(np.int64, st.integers(1, 12), elements=st.integers(0, 1000))


# ----------------------------------------------------------------------------- success cases


@pytest.mark.parametrize("num_classes", [1, 2, 3, 10, 20, 100])
def test_entropy_of_uniform_counts_is_log2_c(num_classes):
    # H(uniform over C) = log2 C by definition of Shannon entropy.
    assert entropy_bits(np.full(num_classes, 7)) == pytest.approx(math.log2(num_classes), abs=1e-12)


def test_entropy_hand_cases():
    # [3, 1] -> p = (3/4, 1/4): H = 0.75*log2(4/3) + 0.25*2 = 0.811278... bits (hand computation).
    assert entropy_bits([3, 1]) == pytest.approx(0.75 * math.log2(4 / 3) + 0.5, abs=1e-12)
    assert entropy_bits([5, 0, 0]) == 0.0  # 0 log 0 = 0
    assert entropy_bits([0, 0, 0]) == 0.0  # documented: an all-zero vector has entropy 0


def test_entropy_batched_axis():
    counts = np.array([[1, 1], [4, 0], [0, 0]])
    np.testing.assert_allclose(entropy_bits(counts), [1.0, 0.0, 0.0])
    np.testing.assert_allclose(entropy_bits(counts.T, axis=0), [1.0, 0.0, 0.0])


def test_pooled_entropy_and_coverage_hand_case():
    counts = np.array([[4, 0, 0], [0, 4, 0], [0, 0, 4], [2, 2, 0]])
    assert pooled_entropy(counts, [0, 1, 2]) == pytest.approx(math.log2(3))
    assert pooled_entropy(counts, [3]) == pytest.approx(1.0)
    assert covers_all_classes(counts, [0, 1, 2])
    assert not covers_all_classes(counts, [0, 3])
    assert pooled_entropy(counts, []) == 0.0 and not covers_all_classes(counts, [])


def test_h_norm_uniform_and_skewed():
    # Every client picked equally often -> p uniform -> H_norm = 1 (§V-E definition).
    assert selection_entropy_norm([[0, 1], [2, 3], [0, 2], [1, 3]], 4) == pytest.approx(1.0)
    # Only 2 of 4 clients ever picked, equally often: H = 1 bit, log2 4 = 2 -> 0.5.
    assert selection_entropy_norm(np.array([[0, 1]] * 5), 4) == pytest.approx(0.5)


def test_h_norm_ignores_padding():
    assert selection_entropy_norm([[0, 1], [2, -1], [3, -1], [2, 3]], 4) == pytest.approx(
        selection_entropy_norm([[0, 1], [2], [3], [2, 3]], 4)
    )


def test_communication_cost_table_v():
    # Table V (v2): CIFAR-10, K=100: labels 4*10*100 = 4000 B = 0.0040 MB; LeNet-5 0.247 MB = 4p -> p = 61,750,
    # ratio 61.75x. CIFAR-100 (20 classes): labels 0.0080 MB, LeNet-5 0.250 MB -> 31.25x.
    assert communication_cost(10, 100, 61_750) == {
        "label_bytes": 4000,
        "model_bytes": 247_000,
        "model_to_label_ratio": 61.75,
    }
    assert communication_cost(20, 100, 62_500)["model_to_label_ratio"] == pytest.approx(31.25)
    # VGG-11 on CIFAR-10: 36.800 MB / 0.0040 MB = 9.200e3 (Table V).
    assert communication_cost(10, 100, 9_200_000)["model_to_label_ratio"] == pytest.approx(9200.0)


# ----------------------------------------------------------------------------- invariants


@given(count_vectors)
def test_entropy_between_zero_and_log2_c(counts):
    h = entropy_bits(counts)
    assert -1e-12 <= h <= math.log2(counts.size) + 1e-9


@given(count_vectors, st.integers(1, 50))
def test_entropy_is_scale_invariant(counts, factor):
    assert entropy_bits(counts * factor) == pytest.approx(entropy_bits(counts), abs=1e-9)


@settings(max_examples=50)
@given(hnp.arrays(np.int64, st.tuples(st.integers(1, 5), st.integers(1, 6)), elements=st.integers(0, 50)))
def test_batched_entropy_equals_rowwise(counts):
    np.testing.assert_allclose(entropy_bits(counts), [entropy_bits(row) for row in counts], atol=1e-12)


@given(st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=5), min_size=1, max_size=20))
def test_h_norm_in_unit_interval(history):
    assert 0.0 <= selection_entropy_norm(history, 10) <= 1.0 + 1e-12


# ----------------------------------------------------------------------------- failure cases


def test_entropy_rejects_negative_counts():
    with pytest.raises(ValueError, match=r"^parameter 'counts': got -1\.0 at index 1; allowed: finite, non-negative "):
        entropy_bits([3, -1])


def test_entropy_rejects_nan_and_empty():
    with pytest.raises(
        ValueError, match=r"^parameter 'counts': got nan at index 1; allowed: finite, non-negative label counts\.$"
    ):
        entropy_bits([1.0, np.nan])
    with pytest.raises(
        ValueError,
        match=r"^parameter 'counts': got shape \(2, 0\); allowed: .* with at least one class along axis -1\.$",
    ):
        entropy_bits(np.zeros((2, 0)))


def test_pooled_metrics_reject_bad_input():
    counts = np.ones((3, 2))
    with pytest.raises(
        ValueError, match=r"^parameter 'picked': got indices from 0 to 3; allowed: .* client indices in \[0, 2\]\.$"
    ):
        pooled_entropy(counts, [0, 3])
    with pytest.raises(ValueError, match=r"parameter 'picked': got dtype float64; allowed: a 1-D sequence of integer"):
        pooled_entropy(counts, [0.0, 1.0])
    with pytest.raises(
        ValueError, match=r"^parameter 'counts': got shape \(3,\); allowed: a 2-D array \(num_clients, num_classes\)"
    ):
        covers_all_classes(np.ones(3), [0])
    with pytest.raises(
        ValueError, match=r"^parameter 'counts': got -2\.0 for client 0, class 1; allowed: .* non-negative numbers\.$"
    ):
        pooled_entropy([[1, -2], [0, 1]], [0])


def test_h_norm_rejects_bad_input():
    with pytest.raises(ValueError, match=r"^parameter 'num_clients': got 1; allowed: an integer >= 2\.$"):
        selection_entropy_norm([[0]], 1)
    with pytest.raises(
        ValueError,
        match=r"^parameter 'picked_history': got no picked client; allowed: rounds of client indices with at least ",
    ):
        selection_entropy_norm([[-1]], 3)
    with pytest.raises(
        ValueError, match=r"^parameter 'picked_history': got indices from 0 to 5; allowed: .* in \[0, 2\]\.$"
    ):
        selection_entropy_norm([[0, 5]], 3)


def test_communication_cost_rejects_bad_input():
    with pytest.raises(ValueError, match=r"^parameter 'num_params': got 0; allowed: an integer >= 1\.$"):
        communication_cost(10, 100, 0)
    with pytest.raises(TypeError, match=r"^parameter 'num_classes': got 10\.5; allowed: an integer >= 1\.$"):
        communication_cost(10.5, 100, 10)
