"""Tests of repro.best_subset: the exact search equals brute force, swap search, a round's candidates."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedlib.selection.metrics import entropy_bits
from fedlib.selection.selectors import FedEntOptSelector
from repro.best_subset import (
    GAP_TOL,
    best_subset,
    brute_force_subset,
    round_candidates,
    subset_entropy,
    swap_search,
)


@st.composite
def problems(draw, max_clients=9, max_classes=4):
    """A count matrix with duplicated and all-zero rows mixed in, M, and optionally a candidate subset."""
    num_clients = draw(st.integers(2, max_clients))
    num_classes = draw(st.integers(1, max_classes))
    cell = st.sampled_from([0, 0, 1, 2, 3, 5, 8])
    rows = [draw(st.lists(cell, min_size=num_classes, max_size=num_classes)) for _ in range(num_clients)]
    for k in range(1, num_clients):  # duplicates (ties) and empty clients
        kind = draw(st.sampled_from(["own", "own", "copy", "zero"]))
        rows[k] = (
            list(rows[draw(st.integers(0, k - 1))])
            if kind == "copy"
            else [0] * num_classes
            if kind == "zero"
            else rows[k]
        )
    counts = np.array(rows, dtype=float)
    candidates = None
    if draw(st.booleans()):
        candidates = np.array(sorted(draw(st.sets(st.integers(0, num_clients - 1), min_size=1))))
    pool = num_clients if candidates is None else candidates.size
    return counts, draw(st.integers(1, pool)), candidates


# --------------------------------------------------------------------------- the exact search against brute force


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(problems())
def test_best_subset_equals_brute_force(problem):
    counts, m, candidates = problem
    best, ties = brute_force_subset(counts, m, candidates=candidates)
    result = best_subset(counts, m, candidates=candidates)
    assert result.optimal
    assert result.entropy == pytest.approx(best, abs=GAP_TOL)
    assert tuple(result.subset.tolist()) in ties


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(problems(max_clients=11), st.randoms(use_true_random=False))
def test_best_subset_from_a_poor_start_still_finds_the_best(problem, rnd):
    """Started from the worst subset (so that the branch and bound, not the start, must find the best)."""
    counts, m, candidates = problem
    pool = np.arange(counts.shape[0]) if candidates is None else candidates
    subsets = list(itertools.combinations(pool.tolist(), m))
    worst = min(subsets, key=lambda s: (entropy_bits(counts[list(s)].sum(axis=0)), rnd.random()))
    best, ties = brute_force_subset(counts, m, candidates=candidates)
    result = best_subset(counts, m, candidates=candidates, start=np.array(worst), bound_steps=1 + rnd.randrange(3))
    assert result.optimal and tuple(result.subset.tolist()) in ties
    assert result.entropy == pytest.approx(best, abs=GAP_TOL)


def test_best_subset_on_a_paper_sized_dirichlet_pool_equals_brute_force():
    """40 Dir(0.1)-like clients, M = 4 (91,390 subsets): the search visits far fewer nodes than subsets."""
    rng = np.random.default_rng(3)
    counts = np.floor(rng.dirichlet(np.full(10, 0.1), size=40) * rng.integers(50, 1500, size=(40, 1)))
    best, ties = brute_force_subset(counts, 4)
    result = best_subset(counts, 4, start=np.arange(4))
    assert result.optimal and tuple(result.subset.tolist()) in ties
    assert result.nodes < math.comb(40, 4) / 10


def test_hand_example():
    # [4,0,0], [3,1,0], [0,0,4], [0,4,0], [2,2,0]: {0, 2, 3} pools [4, 4, 4], log2 3 bits, the most 3 classes hold;
    # no other triple pools three equal classes (by hand).
    counts = [[4, 0, 0], [3, 1, 0], [0, 0, 4], [0, 4, 0], [2, 2, 0]]
    result = best_subset(counts, 3, start=[0, 1, 4])
    assert result.subset.tolist() == [0, 2, 3] and result.entropy == pytest.approx(math.log2(3))


def test_every_client_picked_when_m_equals_the_pool():
    counts = np.array([[1, 0], [0, 3], [2, 2]])
    result = best_subset(counts, 3)
    assert result.subset.tolist() == [0, 1, 2] and result.entropy == pytest.approx(entropy_bits([3, 5]))


def test_node_limit_returns_the_best_found_unproven():
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 20, size=(30, 6)) * (rng.random((30, 6)) < 0.3)
    limited = best_subset(counts, 6, node_limit=1, start=np.arange(6))
    assert not limited.optimal and limited.nodes == 2
    assert limited.entropy >= subset_entropy(counts, np.arange(6))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"clients_per_round": 0}, r"parameter 'clients_per_round': got 0; allowed: an integer >= 1\."),
        (
            {"clients_per_round": 4},
            r"parameter 'clients_per_round': got 4; allowed: an integer >= 1 and <= the 3 candidates\.",
        ),
        (
            {"clients_per_round": 2, "candidates": [0, 0]},
            r"parameter 'candidates': got \[0, 0\]; allowed: .* distinct ",
        ),
        ({"clients_per_round": 1, "candidates": [3]}, r"parameter 'candidates': got \[3\]; allowed: .* in \[0, 2\]\."),
        ({"clients_per_round": 2, "node_limit": 0}, r"parameter 'node_limit': got 0; allowed: an integer >= 1\."),
        (
            {"clients_per_round": 2, "start": [0]},
            r"parameter 'start': got \[0\]; allowed: a 1-D array of 2 distinct client ",
        ),
        (
            {"clients_per_round": 2, "start": [0, 0]},
            r"parameter 'start': got \[0, 0\]; allowed: a 1-D array of 2 distinct ",
        ),
    ],
)
def test_best_subset_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match="^" + match):
        best_subset([[1, 0], [0, 1], [1, 1]], **kwargs)


def test_negative_counts_are_rejected():
    with pytest.raises(
        ValueError, match=r"^parameter 'counts': got -1\.0 for client 0, class 1; allowed: .* non-negative "
    ):
        best_subset([[1, -1], [0, 1]], 1)


def test_brute_force_refuses_too_many_subsets():
    with pytest.raises(
        ValueError,
        match=r"^parameter 'max_subsets': got 10; allowed: an integer >= C\(10, 5\) = 252, the number of subsets ",
    ):
        brute_force_subset(np.ones((10, 2)), 5, max_subsets=10)


# --------------------------------------------------------------------------- swap search


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(problems(), st.randoms(use_true_random=False))
def test_swap_search_is_a_lower_bound_never_below_its_start(problem, rnd):
    counts, m, candidates = problem
    pool = list(range(counts.shape[0])) if candidates is None else candidates.tolist()
    start = np.array(sorted(rnd.sample(pool, m)))
    best, _ = brute_force_subset(counts, m, candidates=candidates)
    result = swap_search(counts, start, candidates=candidates)
    assert subset_entropy(counts, start) - GAP_TOL <= result.entropy <= best + GAP_TOL
    assert set(result.subset.tolist()) <= set(pool) and result.subset.size == m
    assert result.entropy == pytest.approx(subset_entropy(counts, result.subset))


def test_swap_search_stops_where_no_single_swap_helps():
    # From {0, 1} (pooled [7, 1, 0], 0.544 bits) the best swap is 0 -> 2 ([3, 1, 4], 1.406 bits); from {1, 2} every
    # swap lowers the entropy (by hand: [4, 0, 4], [0, 4, 4] 1 bit; [7, 1, 0]; [3, 5, 0] 0.954 bits).
    result = swap_search([[4, 0, 0], [3, 1, 0], [0, 0, 4], [0, 4, 0]], [0, 1])
    assert result.subset.tolist() == [1, 2] and result.nodes == 1 and not result.optimal


def test_swap_search_max_swaps_zero_keeps_the_start():
    result = swap_search([[4, 0, 0], [3, 1, 0], [0, 0, 4], [0, 4, 0]], [0, 1], max_swaps=0)
    assert result.subset.tolist() == [0, 1] and result.nodes == 0


def test_swap_search_rejects_a_start_outside_the_candidates():
    with pytest.raises(
        ValueError,
        match=r"^parameter 'start': got \[0, 3\]; allowed: a 1-D array of 2 distinct client indices among the",
    ):
        swap_search(np.eye(4), [0, 3], candidates=[0, 1, 2])


# --------------------------------------------------------------------------- a round's candidates


def test_round_candidates_without_buffer_are_all_clients():
    assert round_candidates((), 5, 2, 0).tolist() == [0, 1, 2, 3, 4]


def test_round_candidates_of_a_filling_buffer():
    # Q = 5, |B| = 3, M = 3: e = max(0, 3 + 3 - 1 - 5) = 0 evicted before the last pick.
    assert round_candidates((0, 1, 2), 10, 3, 5).tolist() == [3, 4, 5, 6, 7, 8, 9]
    # |B| = 5 (full): the two oldest (0 and 1) are evicted by the first two picks.
    assert round_candidates((0, 1, 2, 3, 4), 10, 3, 5).tolist() == [0, 1, 5, 6, 7, 8, 9]


@pytest.mark.parametrize("buffer_size", [0, 3, 6])
def test_fedentopt_picks_lie_among_the_round_candidates(buffer_size):
    """Over 30 rounds the selector's picks are always M of the candidates computed from its buffer."""
    rng = np.random.default_rng(1)
    counts = rng.integers(0, 9, size=(12, 4))
    selector, state, gen = FedEntOptSelector(buffer_size=buffer_size), (), np.random.default_rng(2)
    for _ in range(30):
        candidates = set(round_candidates(state, 12, 4, buffer_size).tolist())
        picked, state = selector.select(counts, 4, state, gen)
        assert set(picked.tolist()) <= candidates


def test_round_candidates_reject_a_buffer_larger_than_q():
    with pytest.raises(
        ValueError,
        match=r"^parameter 'buffer': got \(0, 1\); allowed: at most buffer_size=1 distinct client indices in \[0, 4\]",
    ):
        round_candidates((0, 1), 5, 2, 1)
