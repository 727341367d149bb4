"""Tests of repro.adversarial (threat models, the FIFO buffer's participation bound) and
fedlib.selection.defence."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedlib._validate import ParameterError
from fedlib.label_only.simulate import run_selection
from fedlib.selection.defence import cap_totals, over_allowance, share_allowance
from fedlib.selection.selectors import FedEntOptSelector
from fedlib.training.config import ExperimentConfig
from repro.adversarial import (
    LiarSpec,
    choose_liars,
    flip_labels,
    greedy_liar_rounds,
    liar_counts,
    liar_data_counts,
    liar_labels,
    liar_shares,
    participation_bound,
    rarest_report,
    scaled_report,
    uniform_report,
)


class FirstFree(np.random.Generator):
    """A generator whose ``integers(n)`` is always 0: FedEntOpt's random first pick is the lowest free client."""

    def integers(self, *args, **kwargs):
        return 0


class LastFree(np.random.Generator):
    """``integers(n)`` is always n - 1: the random first pick is the highest free client."""

    def integers(self, n, *args, **kwargs):
        return n - 1


def _picks_of(selector, counts, clients_per_round, num_rounds, rng):
    state = selector.initial_state(counts.shape[0])
    rounds = []
    for _ in range(num_rounds):
        picked, state = selector.select(counts, clients_per_round, state, rng)
        rounds.append(picked.tolist())
    return rounds


def _worst_case_federation(num_clients, clients_per_round):
    """Client 0 reports a flat vector of huge mass; the others hold one class each of C = M + 1 classes, so that
    no M - 1 honest clients plus one more cover all classes: client 0 is the strict best candidate whenever free."""
    c = clients_per_round + 1
    counts = np.zeros((num_clients, c), dtype=np.int64)
    for k in range(1, num_clients):
        counts[k, k % c] = 3 + k % 4
    counts[0] = uniform_report(10**6 * c, c)
    return counts


# ----------------------------------------------------------------------------- the bound, by hand


def test_bound_hand_values():
    # K = 100, M = 10, R = 500: Q = 0 -> every round; Q = 10 -> ceil(5000 / 11) = 455; Q = 50 -> ceil(5000 / 51) = 99
    assert [participation_bound(500, 10, q) for q in (0, 10, 50)] == [500, 455, 99]
    # Q + 1 <= M: one pick per round is the only limit
    assert participation_bound(20, 5, 4) == 20
    # M = 3, Q = 3: picks 0, 4, 8, 12, 16, 20 of the 21 picks of 7 rounds -> rounds 0, 1, 2, 4, 5, 6
    assert participation_bound(7, 3, 3) == 6
    assert participation_bound(0, 3, 3) == 0
    assert participation_bound(1, 1, 0) == 1


def test_greedy_liar_hand_values():
    # M = 3, Q = 3, never the random first pick: picks 1, 5, then free at 9 = step 0 of round 3 -> 10, then 14;
    # free again at 18, beyond the 15 picks of 5 rounds: 4 rounds, as many as the bound ceil(15 / 4) = 4
    assert greedy_liar_rounds(5, 3, 3) == 4 == participation_bound(5, 3, 3)
    # R = 6 (18 picks): the bound ceil(18 / 4) = 5 (picks 0, 4, 8, 12, 16) but the greedy liar stays at 4
    assert (greedy_liar_rounds(6, 3, 3), participation_bound(6, 3, 3)) == (4, 5)
    assert greedy_liar_rounds(500, 10, 10) == 450 and greedy_liar_rounds(500, 10, 50) == 98


@pytest.mark.parametrize("bad", [{"num_rounds": -1}, {"clients_per_round": 0}, {"buffer_size": -2}])
def test_bound_rejects_bad_arguments(bad):
    args = {"num_rounds": 5, "clients_per_round": 2, "buffer_size": 1, **bad}
    name, value = next(iter(bad.items()))
    with pytest.raises(ValueError, match=rf"parameter '{name}': got {value}; allowed: an integer >= "):
        participation_bound(**args)


# ----------------------------------------------------------------------------- the bound, exactly, on the selector


@pytest.mark.parametrize(
    "num_clients,clients_per_round,q,num_rounds",
    [
        (12, 3, 0, 20),
        (12, 3, 1, 20),
        (12, 3, 2, 20),
        (12, 3, 3, 20),
        (12, 3, 4, 19),
        (12, 3, 6, 20),
        (12, 3, 9, 20),
        (30, 4, 11, 25),
        (30, 4, 26, 13),
        (40, 5, 20, 31),
    ],
)
def test_worst_case_liar_meets_the_bound(num_clients, clients_per_round, q, num_rounds):
    # A client that is the best candidate whenever it is free, and the random first pick whenever it is free at
    # step 0 (FirstFree: it is client 0), is picked at every pick it may take: exactly min(R, ceil(R M / (Q + 1))).
    counts = _worst_case_federation(num_clients, clients_per_round)
    rounds = _picks_of(
        FedEntOptSelector(buffer_size=q), counts, clients_per_round, num_rounds, FirstFree(np.random.PCG64(0))
    )
    assert sum(0 in r for r in rounds) == participation_bound(num_rounds, clients_per_round, q)


@pytest.mark.parametrize(
    "num_clients,clients_per_round,q,num_rounds",
    [
        (12, 3, 0, 20),
        (12, 3, 1, 20),
        (12, 3, 3, 20),
        (12, 3, 4, 19),
        (12, 3, 6, 20),
        (30, 4, 11, 25),
        (40, 5, 20, 31),
        pytest.param(100, 10, 10, 60, marks=pytest.mark.slow),
        pytest.param(100, 10, 50, 120, marks=pytest.mark.slow),
    ],
)
def test_greedy_liar_count(num_clients, clients_per_round, q, num_rounds):
    # Never the random first pick (LastFree picks the highest free client, never client 0): picked at the first
    # greedy step after it leaves the buffer, greedy_liar_rounds times.
    counts = _worst_case_federation(num_clients, clients_per_round)
    rounds = _picks_of(
        FedEntOptSelector(buffer_size=q), counts, clients_per_round, num_rounds, LastFree(np.random.PCG64(0))
    )
    assert sum(0 in r for r in rounds) == greedy_liar_rounds(num_rounds, clients_per_round, q)


@pytest.mark.slow
@pytest.mark.parametrize(
    "clients_per_round,q,num_rounds", [(3, 1, 20), (3, 2, 20), (3, 5, 18), (4, 7, 20), (5, 14, 21)]
)
def test_greedy_liar_meets_the_bound_when_m_divides_q_plus_1(clients_per_round, q, num_rounds):
    # Q < M, or M | Q + 1 and (Q + 1) / M | R: the liar needs no help from the random first pick, any seed.
    counts = _worst_case_federation(40, clients_per_round)
    for seed in range(5):
        rounds = _picks_of(
            FedEntOptSelector(buffer_size=q), counts, clients_per_round, num_rounds, np.random.default_rng(seed)
        )
        assert sum(0 in r for r in rounds) == participation_bound(num_rounds, clients_per_round, q)


@st.composite
def selection_runs(draw):
    k = draw(st.integers(2, 10))
    c = draw(st.integers(1, 4))
    counts = np.array(draw(st.lists(st.lists(st.integers(0, 9), min_size=c, max_size=c), min_size=k, max_size=k)))
    for row in draw(st.lists(st.integers(0, k - 1), max_size=2)):  # some liars with huge flat reports
        counts[row] = 10**5
    m = draw(st.integers(1, k))
    q = draw(st.integers(0, k - m))
    return counts, m, q, draw(st.integers(1, 25)), draw(st.integers(0, 2**32 - 1))


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(selection_runs())
def test_no_client_exceeds_the_bound_in_any_window(run):
    counts, m, q, num_rounds, seed = run
    trace = run_selection(counts, FedEntOptSelector(buffer_size=q), m, num_rounds, seed=seed)
    picked = trace.picked
    # the lemma: two picks of one client are at least Q + 1 pick indices apart
    for k in range(counts.shape[0]):
        idx = np.flatnonzero(picked.ravel() == k)
        assert np.all(np.diff(idx) >= q + 1)
    # the bound, for every window of w consecutive rounds
    per_round = np.zeros((num_rounds, counts.shape[0]), dtype=int)
    for r in range(num_rounds):
        per_round[r, picked[r]] = 1
    csum = np.vstack([np.zeros((1, counts.shape[0]), dtype=int), np.cumsum(per_round, axis=0)])
    for w in range(1, num_rounds + 1):
        most = (csum[w:] - csum[:-w]).max()
        assert most <= participation_bound(w, m, q)


def test_liar_shares_at_paper_scale_respect_the_bound():
    from repro.label_studies import federation_counts

    counts = federation_counts("cifar10", "dirichlet", 100, 0, beta=0.1)
    for q in (0, 10, 50):
        # any liar: no client beats the buffer's bound, and every round picks M clients
        f = liar_shares(
            counts, LiarSpec(1, "uniform", 10.0), clients_per_round=10, num_rounds=100, buffer_size=q, seed=0
        )
        assert f["rounds"].max() <= participation_bound(100, 10, q)
        assert f["rounds"].sum() == 100 * 10
        # a flat report that outweighs any real pool is the best candidate whenever it is free, so it is picked
        # at least greedy_liar_rounds times (a small liar at 10x need not be: seed 0's holds 68 images)
        f = liar_shares(
            counts, LiarSpec(1, "uniform", 100.0), clients_per_round=10, num_rounds=100, buffer_size=q, seed=0
        )
        assert f.loc[f["liar"], "rounds"].iloc[0] >= greedy_liar_rounds(100, 10, q)


# ----------------------------------------------------------------------------- threat models, by hand


def test_uniform_report_hand():
    assert uniform_report(23, 5).tolist() == [5, 5, 5, 4, 4]
    assert uniform_report(0, 3).tolist() == [0, 0, 0]


def test_rarest_report_hand():
    # pool (6, 2, 0, 0), total 8 -> base (6, 2, 0, 0); level h with (h - 2) + 2h = 8: h = 10/3 -> (0, 4/3, 10/3,
    # 10/3); floors (0, 1, 3, 3) leave one sample for the largest remainder (1/3 each; lowest class: 1)
    assert rarest_report([6, 2, 0, 0], 8).tolist() == [0, 2, 3, 3]
    # pool (1, 3), total 4 -> base (1, 3); h = 2 fills class 0 only? (h - 1) = 4 -> h = 5 > 3, so both:
    # (h - 1) + (h - 3) = 4 -> h = 4 -> (3, 1)
    assert rarest_report([1, 3], 4).tolist() == [3, 1]
    # pool (10, 0, 0), total 6: base (6, 0, 0); h = 3 over classes 1, 2 -> (0, 3, 3)
    assert rarest_report([10, 0, 0], 6).tolist() == [0, 3, 3]
    assert rarest_report([0, 0], 5).tolist() == [3, 2]  # empty pool: uniform


@given(st.lists(st.integers(0, 50), min_size=1, max_size=8), st.integers(0, 200))
def test_rarest_report_sums_to_total_and_levels_the_pool(pool, total):
    rep = rarest_report(pool, total)
    assert rep.sum() == total and rep.min() >= 0
    t = np.asarray(pool, float)
    if t.sum() > 0 and total > 0:
        level = total * t / t.sum() + rep
        filled = rep > 0
        # every filled class ends within one sample of the same level, and no unfilled class lies below it
        assert np.ptp(level[filled]) <= 1 + 1e-9 if filled.any() else True
        assert np.all(level[~filled] >= level[filled].min() - 1 - 1e-9) if filled.any() else True


def test_scaled_report_and_data_kinds_hand():
    assert scaled_report([3, 0, 1], 2.5).tolist() == [8, 0, 2]  # rint(7.5) = 8, rint(2.5) = 2 (half to even)
    assert flip_labels([0, 1, 9], 10).tolist() == [9, 8, 0]
    assert liar_labels([2, 1, 1, 2], "single", 3).tolist() == [1, 1, 1, 1]  # tie 2-2: lowest class
    assert liar_labels([0, 2], "flipped", 3).tolist() == [2, 0]
    assert liar_data_counts([1, 4, 0, 2], "flipped").tolist() == [2, 0, 4, 1]
    assert liar_data_counts([1, 4, 0, 2], "single").tolist() == [0, 7, 0, 0]
    assert liar_data_counts([1, 4, 0, 2], "honest").tolist() == [1, 4, 0, 2]


def test_liar_counts_hand():
    true = [[4, 0, 0], [0, 2, 0], [1, 1, 0], [0, 0, 1]]
    data, rep = liar_counts(true, LiarSpec(1, "uniform", 3, "flipped"), [0])
    assert data.tolist() == [[0, 0, 4], [0, 2, 0], [1, 1, 0], [0, 0, 1]]
    assert rep.tolist() == [[4, 4, 4], [0, 2, 0], [1, 1, 0], [0, 0, 1]]  # 3 x 4 = 12 over 3 classes
    # rarest: honest pool (1, 3, 1), total 2 x 4 = 8 -> base (1.6, 4.8, 1.6); h = 4.8 exactly fills classes 0, 2
    data, rep = liar_counts(true, LiarSpec(1, "rarest", 2, "honest"), [0])
    assert rep[0].tolist() == [4, 0, 4]
    data, rep = liar_counts(true, LiarSpec(2, "scaled", 2, "single"), [1, 2])
    assert data[1:3].tolist() == [[0, 2, 0], [2, 0, 0]] and rep[1:3].tolist() == [[0, 4, 0], [4, 0, 0]]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"num_liars": -1}, r"parameter 'num_liars': got -1; allowed: an integer >= 0\."),
        ({"report": "loud"}, r"parameter 'report': got 'loud'; allowed: 'uniform', 'rarest', 'scaled'\."),
        ({"inflation": 0.5}, r"parameter 'inflation': got 0\.5; allowed: a finite real number >= 1\.0\."),
        ({"data": "poisoned"}, r"parameter 'data': got 'poisoned'; allowed: 'honest', 'single', 'flipped'\."),
    ],
)
def test_liar_spec_errors_name_parameter_and_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LiarSpec(**kwargs)


def test_choose_liars_is_seeded_and_checked():
    assert choose_liars(10, 3, 4).tolist() == choose_liars(10, 3, 4).tolist()
    assert len(set(choose_liars(10, 10, 0).tolist())) == 10
    with pytest.raises(ValueError, match=r"parameter 'num_liars': got 11; allowed: an integer >= 0 and <= 10\."):
        choose_liars(10, 11, 0)


# ----------------------------------------------------------------------------- the defence


def test_cap_totals_hand():
    counts = np.array([[2, 2], [1, 3], [10, 10], [0, 4]])  # totals 4, 4, 20, 4: median 4
    np.testing.assert_array_equal(cap_totals(counts, 0.5, 1.0), [[2, 2], [1, 3], [2, 2], [0, 4]])
    np.testing.assert_array_equal(cap_totals(counts, 0.5, 2.5), [[2, 2], [1, 3], [5, 5], [0, 4]])
    np.testing.assert_array_equal(cap_totals(counts, 1.0, 1.0), counts)  # the maximum caps nothing


def test_share_allowance_hand():
    # f = 1.5, M / K = 0.1: 0.15 t rounded up -> t = 1..6: 1 (0.9 -> 1), t = 7: 1.05 -> 2; 0.1 * 30 = 3 exactly
    assert [share_allowance(1.5, 10, 100, t) for t in (1, 6, 7, 20)] == [1, 1, 2, 3]
    assert share_allowance(1.0, 10, 100, 30) == 3
    assert over_allowance([0, 1, 2, 1], 1.0, 1, 4).tolist() == [False, True, True, True]


def test_share_cap_hand_case():
    # 4 clients, M = 1, Q = 0, share_cap 1: allowance ceil(t / 4). Client 0 (flat, huge) would win every round
    # (FirstFree: the random first pick is the lowest eligible client), but it may only take rounds 1, 5, 9;
    # in the others the lowest client under its allowance gets the round.
    counts = np.array([[100, 100], [1, 0], [0, 1], [1, 1]])
    sel = FedEntOptSelector(buffer_size=0, share_cap=1.0)
    rounds = _picks_of(sel, counts, 1, 9, FirstFree(np.random.PCG64(0)))
    assert rounds == [[0], [1], [2], [3], [0], [1], [2], [3], [0]]


def test_share_cap_bounds_every_client_at_paper_scale():
    from repro.label_studies import federation_counts

    counts = federation_counts("cifar10", "dirichlet", 100, 1, beta=0.1)
    data, rep = liar_counts(counts, LiarSpec(10, "uniform", 10.0), choose_liars(100, 10, 1))
    sel = FedEntOptSelector(buffer_size=10, share_cap=1.5)
    state, rng = sel.initial_state(100), np.random.default_rng(0)
    picks = np.zeros(100, dtype=int)
    for t in range(1, 101):
        picked, state = sel.select(rep, 10, state, rng)
        picks[picked] += 1
        assert picks.max() <= share_allowance(1.5, 10, 100, t)
        assert state[1] == t and list(state[2]) == picks.tolist()


def test_defence_off_is_algorithm_1_bit_for_bit():
    counts = np.random.default_rng(3).integers(0, 20, size=(30, 6))
    counts[4] = 500
    plain = FedEntOptSelector(buffer_size=7)
    explicit = FedEntOptSelector(buffer_size=7, total_cap_quantile=None, total_cap_factor=1.0, share_cap=None)
    loose = FedEntOptSelector(buffer_size=7, total_cap_quantile=1.0, share_cap=30.0)  # caps that never bind
    ref = _picks_of(plain, counts, 4, 40, np.random.default_rng(9))
    assert _picks_of(explicit, counts, 4, 40, np.random.default_rng(9)) == ref
    assert _picks_of(loose, counts, 4, 40, np.random.default_rng(9)) == ref
    assert repr(plain) == "FedEntOptSelector(buffer_size=7, buffer_fraction=None)"


@settings(max_examples=60, deadline=None)
@given(selection_runs(), st.sampled_from([0.25, 0.5, 0.9]), st.sampled_from([0.5, 1.0, 3.0]))
def test_total_cap_is_selection_on_the_capped_counts(run, quantile, factor):
    # the option changes nothing but the counts the selector scores: same picks as the plain selector on
    # cap_totals(counts), with the same generator
    counts, m, q, num_rounds, seed = run
    with_cap = FedEntOptSelector(buffer_size=q, total_cap_quantile=quantile, total_cap_factor=factor)
    plain = FedEntOptSelector(buffer_size=q)
    capped = cap_totals(counts, quantile, factor)
    a = _picks_of(with_cap, counts, m, num_rounds, np.random.default_rng(seed))
    assert a == _picks_of(plain, capped, m, num_rounds, np.random.default_rng(seed))


@pytest.mark.parametrize(
    "params,match",
    [
        (
            {"total_cap_quantile": 0.0},
            r"selector 'fedentopt' parameter 'total_cap_quantile': got 0.0; allowed: a finite real number > 0.0 and "
            r"<= 1.0",
        ),
        (
            {"total_cap_quantile": 1.5},
            r"selector 'fedentopt' parameter 'total_cap_quantile': got 1.5; allowed: a finite real number > 0.0 and "
            r"<= 1.0",
        ),
        (
            {"total_cap_factor": -1.0},
            r"selector 'fedentopt' parameter 'total_cap_factor': got -1.0; allowed: a finite real number > 0.0",
        ),
        (
            {"share_cap": 0.5},
            r"selector 'fedentopt' parameter 'share_cap': got 0.5; allowed: a finite real number >= 1.0",
        ),
    ],
)
def test_defence_errors_name_parameter_and_value(params, match):
    with pytest.raises(ValueError, match=match):
        FedEntOptSelector(buffer_size=1, **params)
    cfg = ExperimentConfig(
        num_clients=10, clients_per_round=2, selector="fedentopt", selector_params={"buffer_fraction": 0.5, **params}
    )
    with pytest.raises(ParameterError, match=match):  # the selector's own error, raised by validate()
        cfg.validate()


def test_share_cap_state_is_checked():
    sel = FedEntOptSelector(buffer_size=1, share_cap=1.0)
    counts = np.ones((4, 2))
    with pytest.raises(
        ValueError,
        match=r"^parameter 'picks \(state\[2\]\)': got \(0, 0\); allowed: one non-negative int per client, 4 in all\.$",
    ):
        sel.select(counts, 1, ((), 0, (0, 0)), np.random.default_rng(0))
    with pytest.raises(
        ValueError, match=r"^parameter 'state': got \(1,\); allowed: \(\) or \(buffer, rounds_done, picks\) "
    ):
        sel.select(counts, 1, (1,), np.random.default_rng(0))
    picked, state = sel.select(counts, 1, (), np.random.default_rng(0))
    assert state == ((int(picked[0]),), 1, tuple(int(k == picked[0]) for k in range(4)))
