"""Tests for fedlib.algorithms.kmeans: seeded K-means with k-means++ seeding."""

import numpy as np
import pytest

from fedlib.algorithms.kmeans import kmeans, kmeans_plus_plus_init


def _blobs(seed=0, per=20):
    """Three well-separated Gaussian blobs (centres 10 apart, sd 0.3) in 2-D; true labels 0,1,2 in blocks."""
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    x = np.concatenate([c + 0.3 * rng.standard_normal((per, 2)) for c in centres])
    return x, np.repeat(np.arange(3), per)


# --- success cases -----------------------------------------------------------------------------------------


def test_recovers_well_separated_blobs():
    x, truth = _blobs()
    res = kmeans(x, 3, np.random.default_rng(0))
    # canonical numbering (first appearance) makes the labels equal the block labels exactly
    np.testing.assert_array_equal(res.labels, truth)
    np.testing.assert_allclose(res.centers, [[0, 0], [10, 0], [0, 10]], atol=0.3)


def test_same_seed_same_result():
    x, _ = _blobs(seed=1)
    x = np.concatenate([x, np.random.default_rng(5).uniform(-2, 12, size=(30, 2))])  # ambiguous points too
    a = kmeans(x, 4, np.random.default_rng(42))
    b = kmeans(x, 4, np.random.default_rng(42))
    np.testing.assert_array_equal(a.labels, b.labels)
    np.testing.assert_array_equal(a.centers, b.centers)
    assert a.inertia == b.inertia


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_blobs_recovered_for_several_seeds(seed):
    x, truth = _blobs()
    np.testing.assert_array_equal(kmeans(x, 3, np.random.default_rng(seed)).labels, truth)


def test_labels_are_canonical():
    x, _ = _blobs()
    labels = kmeans(x[::-1], 3, np.random.default_rng(0)).labels
    assert labels[0] == 0
    first_seen = list(dict.fromkeys(labels.tolist()))
    assert first_seen == sorted(first_seen)


def test_inertia_is_within_cluster_sum_of_squares():
    x, _ = _blobs()
    res = kmeans(x, 3, np.random.default_rng(0))
    expected = sum(((x[res.labels == j] - res.centers[j]) ** 2).sum() for j in range(3))
    assert res.inertia == pytest.approx(expected)


def test_one_cluster_is_the_mean():
    x, _ = _blobs()
    res = kmeans(x, 1, np.random.default_rng(0))
    assert set(res.labels.tolist()) == {0}
    np.testing.assert_allclose(res.centers[0], x.mean(0))


def test_k_equals_n_puts_every_point_alone():
    x = np.array([[0.0], [1.0], [5.0], [9.0]])
    res = kmeans(x, 4, np.random.default_rng(0))
    assert sorted(res.labels.tolist()) == [0, 1, 2, 3]
    assert res.inertia == pytest.approx(0.0)


def test_duplicates_fewer_distinct_points_than_k():
    x = np.array([[0.0, 0.0]] * 3 + [[1.0, 1.0]] * 3)
    res = kmeans(x, 3, np.random.default_rng(0))
    # two distinct points: the two groups end up in different clusters, inertia 0
    assert res.labels[0] != res.labels[3]
    assert res.inertia == pytest.approx(0.0)


def test_plus_plus_init_picks_distinct_input_rows():
    x, _ = _blobs()
    centres = kmeans_plus_plus_init(x, 3, np.random.default_rng(0))
    assert centres.shape == (3, 2)
    assert len({tuple(c) for c in centres}) == 3
    assert all(any(np.array_equal(c, row) for row in x) for c in centres)


# --- failure cases -----------------------------------------------------------------------------------------


def test_k_larger_than_points_is_an_error():
    with pytest.raises(ValueError, match=r"parameter 'k': got 3; allowed: an integer >= 1 and <= 2\."):
        kmeans(np.zeros((2, 2)), 3, np.random.default_rng(0))


def test_needs_explicit_generator():
    with pytest.raises(TypeError, match=r"parameter 'rng': got type int; allowed: a numpy\.random\.Generator"):
        kmeans(np.zeros((2, 2)), 1, 0)


def test_rejects_non_2d_and_nan():
    with pytest.raises(
        ValueError,
        match=r"parameter 'x': got shape \(3,\); allowed: a non-empty 2-D array \(num_points, num_features\)",
    ):
        kmeans(np.zeros(3), 1, np.random.default_rng(0))
    with pytest.raises(
        ValueError, match=r"parameter 'x': got nan for point 0, feature 0; allowed: .* of finite numbers\."
    ):
        kmeans(np.array([[np.nan, 0.0]]), 1, np.random.default_rng(0))
