"""repro.greedy_steps: hand-checked traces of Algorithm 1's steps."""

import numpy as np
import pytest

from fedlib.label_only.simulate import SelectionTrace, run_selection
from fedlib.selection.selectors import make_selector
from repro.greedy_steps import (
    entropy_rise_share,
    lowering_by_step,
    missing_label_steps,
    prefix_entropies,
    repeated_subset_share,
    replay_share,
)


def trace(picked, num_clients):
    picked = np.asarray(picked)
    return SelectionTrace(picked, np.zeros(len(picked)), np.zeros(len(picked), dtype=bool), num_clients)


def test_prefix_entropies_of_one_round():
    counts = np.array([[2, 0], [0, 2], [1, 1]])
    assert prefix_entropies(counts, np.array([0, 1])) == pytest.approx([0.0, 1.0])
    assert prefix_entropies(counts, np.array([2, 0])) == pytest.approx([1.0, 0.8112781245])  # [3, 1]


def test_a_step_that_lowers_the_entropy_is_counted():
    counts = np.array([[1, 1], [2, 0], [0, 2]])
    assert entropy_rise_share(counts, trace([[0, 1]], 3)) == 0.0  # [1, 1] -> [3, 1]: lower
    assert entropy_rise_share(counts, trace([[1, 0]], 3)) == 1.0  # [2, 0] -> [3, 1]: higher
    assert entropy_rise_share(counts, trace([[1, 2, 0], [0, 1, 2]], 3)) == 0.75  # [2,0] [2,2] [3,3]; [1,1] [3,1] [3,3]
    # by step: the 2nd pick lowered the entropy in one round of two, the 3rd in none
    assert lowering_by_step(counts, trace([[1, 2, 0], [0, 1, 2]], 3)).tolist() == [0.5, 0.0]
    assert np.isnan(lowering_by_step(counts, trace([[1, 0, -1]], 3))[1])  # no round has a 3rd pick


def test_missing_labels_against_a_uniform_pick():
    counts = np.array([[1, 0, 0], [0, 1, 0], [1, 0, 0], [0, 0, 1]])
    # Q = 0: after client 0, clients 1 and 3 add a class of 1, 2, 3 selectable: the pick (3) adds one, chance 2/3;
    # after 0 and 3, only client 1 adds one of 1, 2 selectable: the pick (2) does not, chance 1/2.
    share, chance, steps = missing_label_steps(counts, trace([[0, 3, 2]], 4), buffer_size=0)
    assert (share, chance, steps) == (0.5, pytest.approx((2 / 3 + 1 / 2) / 2), 2)
    # Q = 3 over two rounds: round 2 starts with 0, 3, 2 buffered, so client 1 is its first pick; that pick evicts
    # client 0, the only selectable client after it: it adds a missing class, with chance 1.
    share2, chance2, steps2 = missing_label_steps(counts, trace([[0, 3, 2], [1, 0, -1]], 4), buffer_size=3)
    assert steps2 == 3 and share2 == pytest.approx(2 / 3)
    assert chance2 == pytest.approx((2 / 3 + 1 / 2 + 1.0) / 3)  # round 2: after 1 only client 0 is free: chance 1


def test_the_replay_repeats_fedentopt_and_catches_a_selector_that_draws_again():
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 20, size=(30, 5)) * (rng.random((30, 5)) < 0.4)
    fedentopt = make_selector("fedentopt", buffer_size=12)
    recorded = run_selection(counts, fedentopt, 6, 25, seed=3)
    assert replay_share(counts, recorded, fedentopt) == 1.0
    drawn = run_selection(counts, "random", 6, 25, seed=3)
    assert replay_share(counts, drawn, make_selector("random")) < 0.5


def test_repeated_subsets_are_sets():
    assert repeated_subset_share(trace([[0, 1], [1, 0], [2, 3], [0, 1]], 4)) == 0.5
    assert repeated_subset_share(trace([[0, 1], [0, 2], [1, 2]], 4)) == 0.0
