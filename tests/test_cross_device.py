"""Tests of repro.cross_device and of label-only selection runs at cross-device scale."""

import numpy as np
import pytest
import scipy.sparse as sp

from fedlib.data.partition import client_label_counts, labels_from_counts
from fedlib.label_only.simulate import coverage_probability, run_selection
from fedlib.selection.metrics import entropy_bits
from fedlib.selection.selectors import FedEntOptSelector
from repro.cross_device import cross_device_study, dirichlet_counts, participation_gini


@pytest.mark.parametrize(
    ("k", "c", "per_client", "beta", "min_size"),
    [(50, 10, 40, 0.1, 0), (200, 7, 30, 0.5, 5), (1000, 100, 500, 0.1, 0), (30, 4, 20, 1.0, 10)],
)
def test_dirichlet_counts_equal_the_partitioner(k, c, per_client, beta, min_size):
    # Same rng stream and rules as fedlib.data.partition's Dir(beta) partitioner, without dealing sample indices
    # (the last case needs 6 redraws before every client holds 10 samples).
    labels = labels_from_counts([per_client * k // c] * c)
    expected = client_label_counts(
        labels, "dirichlet", k, seed=3, beta=beta, min_partition_size=min_size, max_redraws=300
    )
    dense = dirichlet_counts(
        k, c, seed=3, samples_per_client=per_client, beta=beta, min_partition_size=min_size, max_redraws=300
    )
    sparse = dirichlet_counts(
        k,
        c,
        seed=3,
        samples_per_client=per_client,
        beta=beta,
        min_partition_size=min_size,
        max_redraws=300,
        sparse=True,
    )
    np.testing.assert_array_equal(dense, expected)
    assert isinstance(sparse, sp.csr_array) and sparse.nnz == np.count_nonzero(expected)
    np.testing.assert_array_equal(sparse.toarray(), expected)


def test_dirichlet_counts_bad_input_raises():
    with pytest.raises(ValueError, match=r"^parameter 'num_clients': got 0; allowed: an integer >= 1\.$"):
        dirichlet_counts(0, 10, seed=0)
    with pytest.raises(ValueError, match=r"^parameter 'beta': got 0; allowed: a finite real number > 0\.0\.$"):
        dirichlet_counts(10, 10, seed=0, beta=0)
    with pytest.raises(
        ValueError,
        match=r"dirichlet_counts parameter 'min_partition_size': got 20; allowed: at most 10 \(100 samples over ",
    ):
        dirichlet_counts(10, 2, seed=0, samples_per_client=10, min_partition_size=20)
    with pytest.raises(
        ValueError, match=r"dirichlet_counts parameter 'min_partition_size': got 5; allowed: a size .* after 0 redraws"
    ):
        dirichlet_counts(1000, 10, seed=0, samples_per_client=20, beta=0.01, min_partition_size=5, max_redraws=0)


def test_participation_gini_hand_cases():
    assert participation_gini([5, 5, 5]) == 0.0
    assert participation_gini([0, 0, 0, 4]) == pytest.approx(0.75)  # (-3*0 - 0 + 0 + 3*4) / (4 * 4)
    assert participation_gini([1, 3]) == pytest.approx(0.25)  # (-1*1 + 1*3) / (2 * 4)
    with pytest.raises(
        ValueError, match=r"parameter 'times_picked': got \[0, 0\]; allowed: pick counts with at least one pick\."
    ):
        participation_gini([0, 0])


def test_run_selection_sparse_equals_dense():
    counts = dirichlet_counts(3000, 10, seed=1, sparse=True)
    for selector in (FedEntOptSelector(buffer_fraction=0.5), "random", "kl"):
        a = run_selection(counts, selector, 40, 4, seed=2)
        b = run_selection(counts.toarray(), selector, 40, 4, seed=2)
        np.testing.assert_array_equal(a.picked, b.picked)
        np.testing.assert_array_equal(a.entropy, b.entropy)
        np.testing.assert_array_equal(a.covers, b.covers)
        assert a.final_state == b.final_state
    dense = counts.toarray()
    np.testing.assert_allclose(a.entropy[0], entropy_bits(dense[a.picked[0]].sum(axis=0)), rtol=1e-12)


@pytest.mark.slow
def test_coverage_probability_sparse_and_chunked_equal_one_pass():
    # K = 20,000 makes the rounds come in chunks of 419; the keys are one stream, so the answer is that of a
    # single (rounds, K) draw, for dense and sparse counts alike.
    counts = dirichlet_counts(20_000, 10, seed=4, samples_per_client=5, sparse=True)
    rng = np.random.default_rng(9)
    subsets = np.argpartition(rng.random((600, 20_000)), 29, axis=1)[:, :30]
    holds = counts.toarray() > 0
    expected = float(holds[subsets].any(axis=1).all(axis=1).mean())
    assert 0.0 < expected < 1.0
    assert coverage_probability(counts, 30, 600, seed=9) == expected
    assert coverage_probability(counts.toarray(), 30, 600, seed=9) == expected


def test_cross_device_study_tables():
    methods = {"FedEntOpt": ("fedentopt", {"buffer_fraction": 0.5}), "random": ("random", {})}
    rounds, part = cross_device_study(
        pool_sizes=[2000], methods=methods, clients_per_round=20, num_rounds=30, seeds=[0, 1], num_classes=10
    )
    assert len(rounds) == 2 * 2 * 30 and len(part) == 2 * 2
    for _, row in part.iterrows():
        assert sum(row.times_hist.values()) == 2000
        assert sum(t * n for t, n in row.times_hist.items()) == 20 * 30
        assert row.never_picked_share == pytest.approx(row.times_hist.get(0, 0) / 2000)
    # Q = K/2 = 1,000 >= 600 picks: FedEntOpt never picks a client twice here; its rounds pool more entropy
    assert (part[part.method == "FedEntOpt"].max_times == 1).all()
    mean = rounds.groupby("method").entropy.mean()
    assert mean["FedEntOpt"] > mean["random"]
