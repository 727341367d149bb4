"""Tests for fedlib.algorithms.fedentropy: soft labels, maximum entropy judgement (Algorithm 1), ε-greedy pools
(Algorithm 2)."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from fedlib.algorithms.base import Algorithm
from fedlib.algorithms.fedentropy import (
    DEFAULT_EPSILON,
    FedEntropy,
    aggregate_soft_label,
    epsilon_greedy_sample,
    max_entropy_judgement,
    model_soft_label,
    soft_label_entropy,
    update_pools,
)
from fedlib.training.local import model_state


def _h(*p):
    """Entropy in bits of the probability vector p (reference values below)."""
    return -sum(q * math.log2(q) for q in p if q > 0)


# --- soft labels (Eq. 2) -----------------------------------------------------------------------------------


def test_model_soft_label_is_eval_mode_mean_of_trained_params():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 3))
    params = model_state(model)
    x = torch.randn(10, 4)
    model.eval()
    expected = torch.softmax(model(x).double(), dim=1).mean(0).detach().numpy()
    model.train()
    got = model_soft_label(model, params, x, batch_size=3)
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert model.training  # mode restored


def test_model_soft_label_rejects_empty_client():
    model = nn.Linear(2, 2)
    with pytest.raises(ValueError, match=r"parameter 'x': got shape \(0, 2\); allowed: at least one sample"):
        model_soft_label(model, model_state(model), torch.zeros(0, 2))


def test_aggregate_and_entropy_eq4():
    # weights 3:1 -> [3/4, 1/4]; H = 0.8113 bits
    agg = aggregate_soft_label([[1.0, 0.0], [0.0, 1.0]], [3, 1])
    np.testing.assert_allclose(agg, [0.75, 0.25])
    assert soft_label_entropy([[1.0, 0.0], [0.0, 1.0]], [3, 1]) == pytest.approx(_h(0.75, 0.25))


# --- maximum entropy judgement (Algorithm 1) ---------------------------------------------------------------

# Hand-worked cases (C = 2, entropies in bits):
#
# (a) P = A[1/2,1/2], B[1/2,1/2], C[1,0]; L = 1,1,1.
#     all: [2/3,1/3] H=0.918.  -A: [3/4,1/4] 0.811; -B: 0.811; -C: [1/2,1/2] 1.000 > 0.918 -> drop C.
#     {A,B}: [1/2,1/2] H=1 (maximum); -A, -B: 1.000, not > 1 -> stop.  Kept A, B.
# (b) P = A[1,0], B[0,1], C[0,1]; L = 1,1,1.
#     all: [1/3,2/3] H=0.918.  -A: [0,1] 0; -B: [1/2,1/2] 1; -C: 1 (tie with B) -> first in order, B, dropped.
#     {A,C}: H=1 -> stop.  Kept A, C.  Reversing B and C in the input drops the other one.
# (c) P = A[1,0], B[0,1], C[1,0]; L = 1,1,2 (C holds twice the data).
#     all: [3/4,1/4] H=0.811.  -A: [2/3,1/3] 0.918; -B: [1,0] 0; -C: [1/2,1/2] 1 -> drop C (largest gain).
#     {A,B}: H=1 -> stop.  Kept A, B.
#     With equal weights L = 1,1,1: all [2/3,1/3] 0.918; -A: [1/2,1/2] 1; -C: 1 (tie) -> drop A.  Kept B, C.
# (d) P = A[1/2,1/2], C[1,0], D[1,0]; L = 1,1,1.
#     all: [5/6,1/6] H=0.650.  -A: [1,0] 0; -C: [3/4,1/4] 0.811; -D: 0.811 (tie) -> drop C.
#     {A,D}: [3/4,1/4] 0.811.  -A: 0; -D: [1/2,1/2] 1 -> drop D.  {A}: one client left -> stop.  Kept A only.
JUDGEMENT_CASES = [
    # soft labels                                   weights      kept
    ([[0.5, 0.5], [0.5, 0.5], [1.0, 0.0]], [1, 1, 1], [True, True, False]),  # (a)
    ([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]], [1, 1, 1], [True, False, True]),  # (b)
    ([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]], [1, 1, 2], [True, True, False]),  # (c) weighted
    ([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]], [1, 1, 1], [False, True, True]),  # (c) unweighted
    ([[0.5, 0.5], [1.0, 0.0], [1.0, 0.0]], [1, 1, 1], [True, False, False]),  # (d)
]


@pytest.mark.parametrize("soft_labels, weights, kept", JUDGEMENT_CASES)
def test_judgement_hand_cases(soft_labels, weights, kept):
    assert max_entropy_judgement(soft_labels, weights).tolist() == kept


def test_judgement_tie_drops_first_in_input_order():
    # case (b) with B and C swapped: now the client at position 1 is C, and it is the one dropped
    labels = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    assert max_entropy_judgement(labels[[0, 2, 1]], [1, 1, 1]).tolist() == [True, False, True]


def test_judgement_keeps_complementary_clients():
    # one-hot clients covering distinct classes with equal weight: uniform aggregate is already maximal
    assert max_entropy_judgement(np.eye(4), [5, 5, 5, 5]).all()


def test_judgement_identical_clients_kept_despite_rounding():
    # identical soft labels: removing one leaves the same aggregate; the tolerance keeps rounding from dropping it
    p = np.tile([0.1, 0.2, 0.3, 0.4], (7, 1))
    assert max_entropy_judgement(p, [3, 1, 4, 1, 5, 9, 2]).all()


def test_judgement_single_client_is_kept():
    assert max_entropy_judgement([[1.0, 0.0, 0.0]], [10]).tolist() == [True]


def test_judgement_never_drops_all_and_kept_set_is_a_local_maximum():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n, c = rng.integers(1, 9), rng.integers(2, 6)
        p = rng.dirichlet(np.full(c, 0.3), size=n)
        w = rng.integers(1, 50, size=n)
        kept = max_entropy_judgement(p, w)
        assert kept.any()
        idx = np.flatnonzero(kept)
        if idx.size > 1:  # stopping rule: no single further removal raises the entropy
            h = soft_label_entropy(p[idx], w[idx])
            for k in idx:
                rest = idx[idx != k]
                assert soft_label_entropy(p[rest], w[rest]) <= h + 1e-12


def test_judgement_errors_name_the_argument():
    with pytest.raises(
        ValueError,
        match=r"parameter 'weights': got 2 entries; allowed: one finite dataset size l_k > 0 per client \(1\)\.",
    ):
        max_entropy_judgement([[0.5, 0.5]], [1, 2])
    with pytest.raises(
        ValueError,
        match=r"parameter 'weights': got 0\.0 for client 0; allowed: one finite dataset size l_k > 0 per client",
    ):
        max_entropy_judgement([[0.5, 0.5]], [0])
    with pytest.raises(
        ValueError,
        match=r"parameter 'soft_labels': got shape \(2,\); allowed: a 2-D array \(num_clients, num_classes\)",
    ):
        max_entropy_judgement([0.5, 0.5], [1])
    with pytest.raises(ValueError, match=r"parameter 'tol': got -1\.0; allowed: a finite real number >= 0\.0\."):
        max_entropy_judgement([[0.5, 0.5]], [1], tol=-1.0)


# --- pools and the ε-greedy draw (§3.4, Algorithm 2) -------------------------------------------------------


def test_default_epsilon_is_the_papers():
    assert DEFAULT_EPSILON == 0.8  # FedEntropy §4.1: "we set the threshold ε to 0.8"
    assert FedEntropy().epsilon == 0.8


def test_epsilon_greedy_is_seeded_and_reproducible():
    pos = np.arange(20) % 3 != 0
    draws_a = [epsilon_greedy_sample(pos, 5, rng).tolist() for rng in [np.random.default_rng(7)] * 10]
    draws_b = [epsilon_greedy_sample(pos, 5, rng).tolist() for rng in [np.random.default_rng(7)] * 10]
    assert draws_a == draws_b
    assert len({tuple(d) for d in draws_a}) > 1  # the stream advances between rounds


def test_epsilon_greedy_distinct_clients():
    rng = np.random.default_rng(0)
    for _ in range(50):
        pos = rng.random(12) < 0.5
        picked = epsilon_greedy_sample(pos, 4, rng)
        assert len(set(picked.tolist())) == 4 and picked.min() >= 0 and picked.max() < 12


@pytest.mark.parametrize("epsilon, pool_expected", [(1.0, True), (0.0, False)])
def test_epsilon_extremes_pick_one_pool(epsilon, pool_expected):
    pos = np.array([True] * 5 + [False] * 5)
    for seed in range(10):
        picked = epsilon_greedy_sample(pos, 3, np.random.default_rng(seed), epsilon=epsilon)
        assert (pos[picked] == pool_expected).all()


def test_short_pool_is_taken_whole_and_filled_from_the_other():
    pos = np.array([True, False, False, False, False, False])  # one positive client
    picked = epsilon_greedy_sample(pos, 3, np.random.default_rng(0), epsilon=1.0)
    assert picked[0] == 0 and not pos[picked[1:]].any()
    # all positive, branch negative (ε = 0): the empty negative pool is filled from the positive one
    assert sorted(epsilon_greedy_sample([True] * 3, 3, np.random.default_rng(0), epsilon=0.0).tolist()) == [0, 1, 2]


def test_branch_frequency_matches_epsilon():
    pos = np.array([True] * 10 + [False] * 10)
    rng = np.random.default_rng(123)
    from_positive = np.mean([pos[epsilon_greedy_sample(pos, 2, rng)].all() for _ in range(4000)])
    assert from_positive == pytest.approx(0.8, abs=0.03)  # 4000 Bernoulli(0.8): sd 0.0063


def test_update_pools_moves_selected_to_their_verdict():
    assert update_pools([True, True, False, False], [0, 3], [False, True]).tolist() == [False, True, False, True]
    with pytest.raises(ValueError, match=r"parameter 'kept_mask': got 1 entries; allowed: one entry per selected "):
        update_pools([True, True], [0, 1], [True])
    with pytest.raises(ValueError, match=r"parameter 'selected': got indices from 0 to 2; allowed: client indices in"):
        update_pools([True, True], [0, 2], [True, True])


def test_sample_errors():
    with pytest.raises(ValueError, match=r"parameter 'clients_per_round': got 4; allowed: an integer >= 1 and <= 3\."):
        epsilon_greedy_sample([True] * 3, 4, np.random.default_rng(0))
    with pytest.raises(TypeError, match=r"parameter 'rng': got type NoneType; allowed: a numpy\.random\.Generator"):
        epsilon_greedy_sample([True] * 3, 1, None)
    with pytest.raises(
        ValueError, match=r"parameter 'epsilon': got 1\.5; allowed: a finite real number >= 0\.0 and <= 1\.0\."
    ):
        epsilon_greedy_sample([True] * 3, 1, np.random.default_rng(0), epsilon=1.5)
    with pytest.raises(ValueError, match="algorithm 'fedentropy' parameter 'epsilon': got 1.5; allowed: a finite "):
        FedEntropy(epsilon=1.5)


# --- the algorithm object and Fig. 1's re-selection entropy -----------------------------------------------


def test_fedentropy_round_state():
    algo = FedEntropy()
    state = algo.init_server_state({}, num_clients=6)
    assert state["positive"].dtype == torch.bool and state["positive"].all()
    picked = algo.sample(state, 3, np.random.default_rng(0))
    soft = np.array([[0.5, 0.5], [0.5, 0.5], [1.0, 0.0]])  # case (a): third client dropped
    kept, new_state = algo.judge(picked, soft, [1, 1, 1], state)
    assert kept.tolist() == [True, True, False]
    expected = np.ones(6, dtype=bool)
    expected[picked[2]] = False
    assert new_state["positive"].numpy().tolist() == expected.tolist()
    assert state["positive"].all()  # input state untouched


def test_fedentropy_without_pools_keeps_everyone_positive():
    algo = FedEntropy(use_pools=False)
    state = algo.init_server_state({}, num_clients=3)
    kept, new_state = algo.judge([0, 1, 2], [[0.5, 0.5], [0.5, 0.5], [1.0, 0.0]], [1, 1, 1], state)
    assert kept.tolist() == [True, True, False] and new_state["positive"].all()


def test_registry_builds_fedentropy():
    from fedlib.algorithms import make_algorithm

    algo = make_algorithm("fedentropy", epsilon=0.5)
    assert isinstance(algo, FedEntropy) and algo.epsilon == 0.5
    assert type(algo).keep is not Algorithm.keep  # its own round shape (the judgement)
