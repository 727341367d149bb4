"""Tests of fedlib.label_only.simulate: label-only selection runs (Fig. 1, Table VI of FedEntOpt v2) and coverage (v1
§V-B5)."""

import math

import numpy as np
import pytest

from fedlib.label_only.simulate import SelectionTrace, coverage_probability, run_selection, trace_frame
from fedlib.selection.metrics import covers_all_classes, pooled_entropy
from fedlib.selection.privacy import laplace_counts
from fedlib.selection.selectors import DCSelector, FedEntOptSelector, KLSelector, RandomSelector

COUNTS = np.random.default_rng(0).integers(0, 15, size=(20, 4))


# ----------------------------------------------------------------------------- success cases


def test_trace_shapes_and_measurements():
    trace = run_selection(COUNTS, FedEntOptSelector(buffer_size=8), 4, 12, seed=1)
    assert isinstance(trace, SelectionTrace)
    assert trace.picked.shape == (12, 4) and trace.picked.dtype == np.int64
    assert trace.entropy.shape == (12,) and trace.covers.shape == (12,)
    for r in range(12):
        assert trace.entropy[r] == pytest.approx(pooled_entropy(COUNTS, trace.picked[r]))
        assert trace.covers[r] == covers_all_classes(COUNTS, trace.picked[r])
    assert trace.selection_counts.sum() == 48 and trace.selection_counts.shape == (20,)
    assert 0 < trace.h_norm <= 1


def test_trace_is_immutable():
    trace = run_selection(COUNTS, "random", 3, 2, seed=0)
    with pytest.raises(ValueError, match="read-only"):
        trace.picked[0, 0] = 5


def test_same_seed_same_trace():
    a = run_selection(COUNTS, FedEntOptSelector(buffer_fraction=0.5), 5, 10, seed=3)
    b = run_selection(COUNTS, FedEntOptSelector(buffer_fraction=0.5), 5, 10, seed=3)
    np.testing.assert_array_equal(a.picked, b.picked)
    assert a.final_state == b.final_state


def test_dc_rounds_are_padded_with_minus_one():
    # Every client is perfectly balanced, so DC never improves on its random pick and returns 1 client per round.
    trace = run_selection(np.ones((6, 3)), DCSelector(1, 2), 3, 5, seed=0)
    assert (trace.picked[:, 1:] == -1).all() and (trace.picked[:, 0] >= 0).all()
    assert trace.selection_counts.sum() == 5


def test_server_counts_drive_selection_true_counts_measure_it():
    # The server sees the rows of the true matrix reversed: KL then picks the reverse-index of what it picks on
    # the true counts, and the entropy reported is that of the true counts of the clients actually picked.
    true = np.array([[9, 0, 0], [0, 9, 0], [3, 3, 3], [1, 0, 0]])
    trace = run_selection(true, KLSelector(), 1, 2, seed=0, server_counts=true[::-1])
    assert trace.picked[:, 0].tolist() == [1, 1]  # server row 1 = true row 2 reversed -> client index 1
    assert trace.entropy.tolist() == [0.0, 0.0]  # true counts of client 1 are [0, 9, 0]


def test_dp_noised_server_counts_run():
    noisy = laplace_counts(COUNTS, 0.5, rng=np.random.default_rng(0), negative="keep")
    trace = run_selection(COUNTS, FedEntOptSelector(buffer_size=5), 4, 5, seed=0, server_counts=noisy)
    assert (trace.entropy >= 0).all()


def test_h_norm_near_one_for_random_selection():
    # Uniform picks over many rounds: c_k ~ equal, so H_norm -> 1 (§V-E). 2000 picks of 20 clients: the
    # plug-in entropy deficit is about (K-1)/(2 n ln 2) / log2 K ~ 0.003, so 0.99 is a safe bound.
    trace = run_selection(COUNTS, RandomSelector(), 4, 500, seed=0)
    assert trace.h_norm > 0.99


def test_fedentopt_beats_random_on_quantity_skew():
    # Fig. 1 (v2): with C = 2 classes per client (CIFAR-10, K = 100, M = 10), FedEntOpt's pooled entropy exceeds
    # log2(9) = 3.17 bits (all ten classes covered) in every round, above random selection on average.
    partition = pytest.importorskip("fedlib.data.partition")
    counts = partition.client_label_counts("cifar10", "quantity", 100, seed=0, classes_per_client=2)
    fe = run_selection(counts, FedEntOptSelector(buffer_fraction=0.7), 10, 50, seed=0)
    rnd = run_selection(counts, RandomSelector(), 10, 50, seed=0)
    assert fe.entropy.min() > math.log2(9)
    assert fe.covers.all()
    assert fe.entropy.mean() > rnd.entropy.mean()


def test_kl_repeats_and_has_lowest_h_norm():
    # The KL baseline "consistently produces the same subset" (v2 §II): its H_norm is log2 M / log2 K.
    trace = run_selection(COUNTS, KLSelector(), 4, 30, seed=0)
    assert (trace.picked == trace.picked[0]).all()
    assert trace.h_norm == pytest.approx(math.log2(4) / math.log2(20))


def test_coverage_probability_exact_cases():
    # Class 1 is held by client 0 only: P(cover) = P(client 0 among M of K) = M / K = 0.3. With 20,000 rounds the
    # binomial sd is sqrt(0.21 / 20000) = 0.0032; tolerance 0.02 is > 6 sd.
    counts = np.array([[1, 1]] + [[1, 0]] * 9)
    assert coverage_probability(counts, 3, 20_000, seed=0) == pytest.approx(0.3, abs=0.02)
    assert coverage_probability(counts, 10, 50, seed=0) == 1.0
    assert coverage_probability(np.array([[1, 0], [1, 0]]), 2, 10, seed=0) == 0.0


def test_coverage_probability_reproducible():
    counts = np.random.default_rng(5).integers(0, 2, size=(30, 6))
    assert coverage_probability(counts, 4, 500, seed=1) == coverage_probability(counts, 4, 500, seed=1)


def test_trace_frame_columns():
    pytest.importorskip("pandas")
    trace = run_selection(COUNTS, "random", 3, 4, seed=0)
    frame = trace_frame(trace, method="random", seed=0)
    assert list(frame.columns) == ["round", "entropy", "covers", "num_picked", "method", "seed"]
    assert frame["round"].tolist() == [1, 2, 3, 4] and (frame["num_picked"] == 3).all()


# ----------------------------------------------------------------------------- failure cases


def test_run_selection_bad_input_raises():
    with pytest.raises(
        ValueError, match=r"^parameter 'counts': got -1\.0 for client 0, class 1; allowed: .* non-negative numbers\.$"
    ):
        run_selection([[1, -1], [2, 2]], "random", 1, 1, seed=0)
    with pytest.raises(
        ValueError,
        match=r"^parameter 'server_counts': got shape \(20, 3\); allowed: a matrix of the shape of counts \(20, 4\)\.$",
    ):
        run_selection(COUNTS, "random", 1, 1, seed=0, server_counts=np.ones((20, 3)))
    with pytest.raises(ValueError, match=r"^parameter 'num_rounds': got 0; allowed: an integer >= 1\.$"):
        run_selection(COUNTS, "random", 1, 0, seed=0)
    with pytest.raises(
        ValueError, match=r"^parameter 'clients_per_round': got 21; allowed: .* <= the number of clients K=20"
    ):
        run_selection(COUNTS, "random", 21, 1, seed=0)
    with pytest.raises(
        TypeError, match=r"^parameter 'selector': got type int; allowed: a fedlib\.selection\.selectors\.Selector or a "
    ):
        run_selection(COUNTS, 3, 1, 1, seed=0)
    with pytest.raises(ValueError, match="selector parameter 'name': got 'best'; allowed: "):
        run_selection(COUNTS, "best", 1, 1, seed=0)


def test_coverage_probability_bad_input_raises():
    with pytest.raises(
        ValueError, match=r"^parameter 'clients_per_round': got 21; allowed: .* <= the number of clients K=20"
    ):
        coverage_probability(COUNTS, 21, 10, seed=0)
    with pytest.raises(ValueError, match=r"^parameter 'num_rounds': got 0; allowed: an integer >= 1\.$"):
        coverage_probability(COUNTS, 2, 0, seed=0)
    with pytest.raises(
        ValueError, match=r"^parameter 'counts': got shape \(5,\); allowed: a 2-D array \(num_clients, num_classes\)"
    ):
        coverage_probability(np.ones(5), 2, 10, seed=0)
