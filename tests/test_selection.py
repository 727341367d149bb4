"""Tests of fedlib.selection.selectors: FedEntOpt (Algorithm 1, eq. 5 of v2), random, KL and DC (Düsing & Cimiano)
selectors."""

import importlib.util
import re
from collections import Counter, deque
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import fedlib.selection.scoring as scoring
import fedlib.selection.selectors as selection
from fedlib._validate import ParameterError
from fedlib.data.partition import client_label_counts, labels_from_counts
from fedlib.label_only.simulate import run_selection
from fedlib.selection.metrics import entropy_bits
from fedlib.selection.privacy import laplace_counts
from fedlib.selection.scoring import IncrementalScorer, fast_scorer
from fedlib.selection.selectors import (
    ENTROPY_TIE_TOL,
    LABEL_BASED_SELECTORS,
    SELECTORS,
    DCSelector,
    FedEntOptSelector,
    KLSelector,
    RandomSelector,
    Selector,
    buffer_size_from_fraction,
    fedentopt_round,
    make_selector,
    register_selector,
)
from fedlib.training.config import ExperimentConfig

# Hand example used below (4 clients, 3 classes):
#   c0 = [4,0,0], c1 = [0,4,0], c2 = [2,2,0], c3 = [0,0,2]
# Greedy second pick given the random first pick k0 (entropies in bits, worked out by hand):
#   k0=0: L=[4,0,0]; +c1 -> [4,4,0] H=1; +c2 -> [6,2,0] H=0.811; +c3 -> [4,0,2] H=0.918  => 1
#   k0=1: L=[0,4,0]; +c0 -> [4,4,0] H=1; +c2 -> [2,6,0] H=0.811; +c3 -> [0,4,2] H=0.918  => 0
#   k0=2: L=[2,2,0]; +c0 -> [6,2,0] 0.811; +c1 -> [2,6,0] 0.811; +c3 -> [2,2,2] H=log2 3 => 3
#   k0=3: L=[0,0,2]; +c0 -> [4,0,2] 0.918; +c1 -> [0,4,2] 0.918 (tie -> lowest index); +c2 -> [2,2,2] => 2
# Third pick after (0, 1): L=[4,4,0]; +c2 -> [6,6,0] H=1; +c3 -> [4,4,2] H=1.522  => 3
HAND = np.array([[4, 0, 0], [0, 4, 0], [2, 2, 0], [0, 0, 2]])
HAND_SECOND = {0: 1, 1: 0, 2: 3, 3: 2}


def _first_picks_seen(selector, counts, clients_per_round, seeds=range(40)):
    out = {}
    for seed in seeds:
        picked, _ = selector.select(counts, clients_per_round, (), np.random.default_rng(seed))
        out.setdefault(int(picked[0]), picked.tolist())
    return out


def reference_fedentopt(counts, clients_per_round, buffer, q, rng):
    """Algorithm 1 read literally: per-candidate entropies one at a time with fedlib.selection.metrics.entropy_bits.

    Negative counts (DP noise kept) are scored as H(max(L + l^(m), 0)), as fedlib.selection.privacy documents.
    """
    counts = np.asarray(counts, dtype=float)
    big_l, chosen, fifo = np.zeros(counts.shape[1]), [], deque(buffer)
    remaining = set(range(counts.shape[0]))
    for i in range(clients_per_round):
        cands = sorted(remaining - set(fifo))
        if i == 0:
            m = cands[rng.integers(len(cands))]
        else:
            scores = [entropy_bits(np.maximum(big_l + counts[c], 0.0)) for c in cands]
            m = next(c for c, h in zip(cands, scores) if h >= max(scores) - ENTROPY_TIE_TOL)
        fifo.append(m)
        while len(fifo) > q:
            fifo.popleft()
        big_l, chosen = big_l + counts[m], chosen + [m]
        remaining.discard(m)
    return chosen, tuple(fifo)


@st.composite
def problems(draw, max_clients=9, max_classes=5):
    k = draw(st.integers(2, max_clients))
    c = draw(st.integers(1, max_classes))
    counts = np.array(draw(st.lists(st.lists(st.integers(0, 12), min_size=c, max_size=c), min_size=k, max_size=k)))
    m = draw(st.integers(1, k))
    q = draw(st.integers(0, k - m))
    return counts, m, q, draw(st.integers(0, 2**32 - 1))


# ----------------------------------------------------------------------------- FedEntOpt: success cases


def test_fedentopt_hand_case_second_pick():
    seen = _first_picks_seen(FedEntOptSelector(buffer_size=0), HAND, 2)
    assert set(seen) == {0, 1, 2, 3}  # every first pick occurred among the seeds
    for k0, picked in seen.items():
        assert picked == [k0, HAND_SECOND[k0]]


def test_fedentopt_hand_case_third_pick():
    seen = _first_picks_seen(FedEntOptSelector(buffer_size=0), HAND, 3)
    assert seen[0] == [0, 1, 3]


def test_first_pick_is_the_only_unbuffered_client():
    sel = FedEntOptSelector(buffer_size=4)
    for seed in range(10):
        picked, state = sel.select(np.eye(5), 1, (0, 1, 2, 3), np.random.default_rng(seed))
        assert picked.tolist() == [4]
        assert state == (1, 2, 3, 4)  # 4 appended, oldest (0) evicted


def test_first_pick_is_uniform_among_unbuffered():
    # Clients 0..2 buffered, 3..5 free: each free client should be first ~1/3 of 3000 draws; binomial sd = 25.8,
    # the +-130 band is ~5 sd (fixed seed).
    sel, rng = FedEntOptSelector(buffer_size=3), np.random.default_rng(11)
    firsts = Counter(int(sel.select(np.ones((6, 2)), 1, (0, 1, 2), rng)[0][0]) for _ in range(3000))
    assert set(firsts) == {3, 4, 5}
    assert all(abs(n - 1000) < 130 for n in firsts.values())


def test_buffer_zero_means_no_exclusion():
    # Q = 0 (Table VI): the buffer stays empty and the greedy part repeats whenever the first pick repeats.
    sel = FedEntOptSelector(buffer_size=0)
    state, rng = sel.initial_state(4), np.random.default_rng(3)
    for _ in range(20):
        picked, state = sel.select(HAND, 2, state, rng)
        assert state == ()
        assert picked[1] == HAND_SECOND[int(picked[0])]


def test_buffer_excludes_recent_clients():
    # K=4, M=2, Q=2: after a round the two picks are buffered, so the next round must pick the other two.
    sel, rng = FedEntOptSelector(buffer_size=2), np.random.default_rng(0)
    first, state = sel.select(HAND, 2, (), rng)
    second, state2 = sel.select(HAND, 2, state, rng)
    assert state == tuple(first.tolist())
    assert set(first.tolist()) | set(second.tolist()) == {0, 1, 2, 3}
    assert state2 == tuple(second.tolist())


def test_buffer_fraction_resolves_q():
    assert buffer_size_from_fraction(0.5, 100) == 50
    assert buffer_size_from_fraction(0.7, 100) == 70
    assert FedEntOptSelector(buffer_fraction=0.5).resolve_buffer_size(100, 10) == 50
    assert FedEntOptSelector(buffer_size=7).resolve_buffer_size(100, 10) == 7


def test_same_seed_same_sequence_for_every_selector():
    counts = np.random.default_rng(0).integers(0, 20, size=(30, 5))
    for sel in (RandomSelector(), FedEntOptSelector(buffer_size=10), KLSelector(), DCSelector(3, 4)):
        runs = []
        for _ in range(2):
            rng, state, seq = np.random.default_rng(42), sel.initial_state(30), []
            for _ in range(8):
                picked, state = sel.select(counts, 7, state, rng)
                seq.append(picked.tolist())
            runs.append(seq)
        assert runs[0] == runs[1]


def test_select_does_not_mutate_inputs():
    counts = HAND.copy()
    state = (0,)
    FedEntOptSelector(buffer_size=1).select(counts, 2, state, np.random.default_rng(0))
    np.testing.assert_array_equal(counts, HAND)
    assert state == (0,)


# ----------------------------------------------------------------------------- FedEntOpt: invariants


@settings(max_examples=150, deadline=None)
@given(problems())
def test_vectorised_greedy_equals_literal_reference(problem):
    counts, m, q, seed = problem
    picked, state = FedEntOptSelector(buffer_size=q).select(counts, m, (), np.random.default_rng(seed))
    ref_picked, ref_state = reference_fedentopt(counts, m, (), q, np.random.default_rng(seed))
    assert picked.tolist() == ref_picked
    assert state == ref_state


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(problems(max_clients=14, max_classes=7), st.booleans())
def test_plain_greedy_equals_literal_reference(problem, as_sparse):
    counts, m, q, seed = problem
    with scoring.scorer_path("plain"):
        picked, state = FedEntOptSelector(buffer_size=q).select(
            sp.csr_array(counts) if as_sparse else counts, m, (), np.random.default_rng(seed)
        )
    assert (picked.tolist(), state) == reference_fedentopt(counts, m, (), q, np.random.default_rng(seed))


@settings(max_examples=60, deadline=None)
@given(problems(max_clients=12), st.integers(2, 12))
def test_buffer_invariants_over_many_rounds(problem, rounds):
    counts, m, q, seed = problem
    sel, rng = FedEntOptSelector(buffer_size=q), np.random.default_rng(seed)
    state = sel.initial_state(len(counts))
    for _ in range(rounds):
        picked, new_state = sel.select(counts, m, state, rng)
        assert picked.dtype == np.int64 and len(picked) == m and len(set(picked.tolist())) == m
        fifo = deque(state)
        for client in picked.tolist():  # replay Algorithm 1's buffer: each pick is outside the current buffer
            assert client not in fifo
            fifo.append(client)
            while len(fifo) > q:
                fifo.popleft()
        assert new_state == tuple(fifo) and len(new_state) <= q
        assert new_state == tuple((list(state) + picked.tolist())[-q:] if q else ())
        state = new_state


@settings(max_examples=60, deadline=None)
@given(problems())
def test_each_greedy_pick_maximises_pooled_entropy(problem):
    counts, m, q, seed = problem
    picked, _ = FedEntOptSelector(buffer_size=0).select(counts, m, (), np.random.default_rng(seed))
    for i in range(1, m):
        pooled = counts[picked[:i]].sum(axis=0)
        rest = [k for k in range(len(counts)) if k not in picked[:i]]
        best = max(entropy_bits(pooled + counts[k]) for k in rest)
        assert entropy_bits(pooled + counts[picked[i]]) >= best - 1e-9


def test_fast_scorer_paths():
    hand = np.array([[3.0, 0.0, 1.0], [0.0, 0.0, 0.0], [2.0, 5.0, 0.0]])
    small = scoring.AUTO_PLAIN_ENTRIES // 3  # clients: the most of 3 classes that "auto" scores plainly
    counts = np.tile(hand, (small // 3 + 1, 1))[: small + 1]
    assert isinstance(fast_scorer(counts), IncrementalScorer)  # non-negative counts: incremental by default
    assert isinstance(fast_scorer(sp.csr_array(counts)), IncrementalScorer)
    assert fast_scorer(counts[:small]) is None  # a small pool: plain
    assert isinstance(fast_scorer(counts[:small], "incremental"), IncrementalScorer)
    assert fast_scorer(counts - 0.5) is None  # negative counts (kept DP noise): plain
    assert fast_scorer(counts, "plain") is None
    assert fast_scorer(counts).integer and not fast_scorer(counts + 0.25).integer  # f table or logs


# ----------------------------------------------------------------------------- fast path vs literal Algorithm 1

TORCH = ("torch",) if importlib.util.find_spec("torch") else ()  # the torch scorer, run on CPU
KINDS = ("ties", "empty", "very_sparse", "very_dense", "fractional", "large", "dirichlet", "negative")


def _instance(kind, rng):
    """A count matrix of one kind; every kind is small enough for the literal loop."""
    k, c = int(rng.integers(4, 50)), int(rng.integers(1, 12))
    if kind == "ties":  # few small values, duplicated rows and rows with permuted classes: many exact ties
        base = rng.integers(0, 3, size=(max(2, k // 3), c))
        rows = [base[i % len(base)][rng.permutation(c)] if i % 2 else base[i % len(base)] for i in range(k)]
        return np.array(rows, dtype=float)
    if kind == "empty":  # a third of the clients hold nothing
        return rng.integers(0, 20, size=(k, c)) * (rng.random((k, 1)) < 0.66)
    if kind == "very_sparse":
        return rng.integers(1, 50, size=(k, c)) * (rng.random((k, c)) < 0.05)
    if kind == "very_dense":
        return rng.integers(1, 10_000, size=(k, c))
    if kind == "fractional":
        return rng.random((k, c)) * 7.0 * (rng.random((k, c)) < 0.6)
    if kind == "large":  # values above the uint16 radix sort and totals above the f table's cap
        return rng.integers(0, 3, size=(k, c)) * rng.choice([1, 70_000, 3_000_000], size=(k, c))
    if kind == "dirichlet":
        return client_label_counts(
            labels_from_counts([40] * c), "dirichlet", k, seed=int(rng.integers(1000)), beta=0.1, min_partition_size=0
        )
    return laplace_counts(rng.integers(0, 8, size=(k, c)), 0.5, rng=rng, negative="keep")  # DP noise kept


def _rounds(fn, counts, m, q, seed, rounds=3):
    rng, state, out = np.random.default_rng(seed), (), []
    for _ in range(rounds):
        picked, state = fn(counts, m, state, q, rng)
        out.append((list(map(int, picked)), tuple(state)))
    return out


def _fedentopt(counts, m, state, q, rng):
    return FedEntOptSelector(buffer_size=q).select(counts, m, state, rng)


@pytest.mark.parametrize("kind", KINDS)
def test_fast_path_equals_literal_algorithm_1(kind):
    # Every path (the default, the plain one, the incremental one and its torch version on CPU) and the literal
    # Algorithm 1 pick the same clients and leave the same buffer, round after round.
    rng = np.random.default_rng(KINDS.index(kind))
    for _ in range(12):
        counts = np.asarray(_instance(kind, rng), dtype=float)
        k = counts.shape[0]
        m = int(rng.integers(1, k + 1))
        q, seed = int(rng.integers(0, k - m + 1)), int(rng.integers(2**31))
        literal = _rounds(reference_fedentopt, counts, m, q, seed)
        assert _rounds(_fedentopt, counts, m, q, seed) == literal  # the default ("auto") scorer
        for path in ("plain",) + (() if kind == "negative" else ("incremental",) + TORCH):
            with scoring.scorer_path(path, device="cpu"):
                assert _rounds(_fedentopt, counts, m, q, seed) == literal, path


@pytest.mark.parametrize(
    "defence",
    [
        {"share_cap": 1.0},
        {"total_cap_quantile": 0.5, "total_cap_factor": 1.2},
        {"share_cap": 1.5, "total_cap_quantile": 0.8},
    ],
)
def test_defences_pick_alike_on_every_scorer_and_sparse_input(defence):
    # fedlib.selection.defence's options restrict the candidates or rescale the counts before scoring: every path,
    # and sparse input, must then still pick what the plain path picks on dense input.
    rng = np.random.default_rng(21)
    for _ in range(6):
        counts = np.asarray(_instance("dirichlet", rng), dtype=float)
        k = counts.shape[0]
        m = int(rng.integers(1, k // 2 + 1))
        q = int(rng.integers(0, k - m + 1))
        sel = FedEntOptSelector(buffer_size=q, **defence)

        def run(c, path):
            with scoring.scorer_path(path, device="cpu"):
                rng_, state, out = np.random.default_rng(5), sel.initial_state(k), []
                for _ in range(4):
                    picked, state = sel.select(c, m, state, rng_)
                    out.append(picked.tolist())
                return out, state

        expected = run(counts, "plain")
        for path in ("incremental",) + TORCH:
            assert run(counts, path) == expected, path
        assert run(sp.csr_array(counts), "auto") == expected


def test_incremental_scorer_handles_exact_ties_by_lowest_index():
    # After client 0 (classes 0 and 1), clients 1 and 3 (classes 2 and 3 swapped) tie exactly, and so do the
    # identical clients 2 and 5; every step must go to the lower index of a tie, as in the literal loop.
    counts = np.array([[6, 6, 0, 0], [0, 0, 3, 1], [0, 1, 0, 0], [0, 0, 1, 3], [1, 0, 0, 3], [0, 1, 0, 0]])
    scorer = IncrementalScorer(counts.astype(float))
    scorer.add(0)
    h = scorer.scores()
    assert h[1] == h[3] and h[2] == h[5]  # identical additions keep exact ties exact
    blocked = np.zeros(6, dtype=bool)
    blocked[0] = True
    picks = []
    for _ in range(5):
        picks.append(scorer.pick(blocked))
        scorer.add(picks[-1])
        blocked[picks[-1]] = True
    ref = reference_fedentopt(counts, 6, (), 0, _FirstPick(0))[0]
    assert [0] + picks == ref


class _FirstPick:
    """A stand-in rng whose only draw picks position ``i`` of the candidates."""

    def __init__(self, i):
        self.i = i

    def integers(self, n):
        return self.i


@pytest.mark.parametrize("path", ["plain", "incremental"])
@pytest.mark.parametrize("counts", [HAND, np.eye(5), np.ones((6, 3)), np.repeat(HAND, 2, axis=0), HAND[:, ::-1]])
def test_plain_and_incremental_pick_alike_on_hand_made_pools(path, counts):
    # Every first pick, every later greedy pick: each path equals the literal loop, ties (equal rows, permuted
    # classes, all-equal pools) to the lowest index.
    k = counts.shape[0]
    with scoring.scorer_path(path):
        for first in range(k):
            picked, _ = fedentopt_round(counts, k, (), 0, _FirstPick(first))
            assert picked == reference_fedentopt(counts, k, (), 0, _FirstPick(first))[0]


@pytest.mark.parametrize("kind", ["integer", "fractional", "large"])
@pytest.mark.parametrize("fallback", [False, True])
def test_incremental_scores_equal_plain_entropies(kind, fallback, monkeypatch):
    # After every add the incremental scores of all K clients equal the plain H(L + l^(k)) (compiled and numpy
    # fallback accumulation, integer table and logs).
    if fallback:
        monkeypatch.setattr(scoring, "_CSC_MATVEC", None)
    rng = np.random.default_rng(5)
    for _ in range(10):
        counts = np.asarray(
            _instance({"integer": "empty", "fractional": "fractional", "large": "large"}[kind], rng), dtype=float
        )
        fast, pooled = IncrementalScorer(counts), np.zeros(counts.shape[1])
        assert (fast._ones is None) == fallback
        for m in rng.permutation(counts.shape[0])[: int(rng.integers(1, counts.shape[0] + 1))]:
            fast.add(int(m))
            pooled += counts[m]
            np.testing.assert_allclose(fast.scores(), selection._entropies(pooled, counts), rtol=0, atol=1e-9)
            np.testing.assert_array_equal(fast.pooled, pooled)


def test_incremental_scorer_never_picks_inactive_clients():
    # Clients left out of the incremental structure (FedEntOpt: those buffered all round) are never picked;
    # every other pick equals the plain one among the active unblocked clients.
    rng = np.random.default_rng(12)
    for _ in range(20):
        counts = np.asarray(_instance("empty", rng), dtype=float)
        k = counts.shape[0]
        active = rng.random(k) < 0.5
        fast, pooled, blocked = IncrementalScorer(counts, active=active), np.zeros(counts.shape[1]), np.zeros(k, bool)
        for _ in range(int(active.sum())):
            m = fast.pick(blocked)
            free = np.flatnonzero(active & ~blocked)
            assert m == free[scoring.first_best(selection._entropies(pooled, counts[free]))]
            fast.add(m)
            pooled += counts[m]
            blocked[m] = True


def test_scorer_path_sets_the_default_path_and_restores_it():
    counts = np.tile(HAND, (scoring.AUTO_PLAIN_ENTRIES // HAND.size + 1, 1)).astype(float)
    assert isinstance(fast_scorer(counts), IncrementalScorer)
    with scoring.scorer_path("plain"):
        assert fast_scorer(counts) is None
        if TORCH:
            with scoring.scorer_path("torch", device="cpu"):
                assert type(fast_scorer(counts)).__name__ == "TorchScorer"
        assert fast_scorer(counts) is None
    assert isinstance(fast_scorer(counts), IncrementalScorer)
    with pytest.raises(
        ValueError, match=r"^parameter 'path': got 'gpu'; allowed: 'auto', 'plain', 'incremental', 'torch'\.$"
    ):
        with scoring.scorer_path("gpu"):
            pass


def test_incremental_path_refuses_negative_counts():
    allowed = r"allowed: 'auto' or 'plain' for counts with negative entries\.$"
    with pytest.raises(ValueError, match=r"^parameter 'path': got 'incremental'; " + allowed):
        fast_scorer(-np.ones((2, 2)), "incremental")
    with pytest.raises(ValueError, match=r"^parameter 'path': got 'torch'; " + allowed):
        fast_scorer(-np.ones((2, 2)), "torch")


# ----------------------------------------------------------------------------- sparse count matrices

SPARSE_FORMATS = (sp.csr_array, sp.csc_matrix, sp.coo_array, sp.lil_matrix)


@pytest.mark.parametrize("kind", ["empty", "very_sparse", "ties", "negative"])
def test_sparse_input_picks_like_dense(kind):
    rng = np.random.default_rng(len(kind))
    for i in range(8):
        counts = np.asarray(_instance(kind, rng), dtype=float)
        k = counts.shape[0]
        m = int(rng.integers(1, k + 1))
        q, seed = int(rng.integers(0, k - m + 1)), int(rng.integers(2**31))
        as_sparse = SPARSE_FORMATS[i % len(SPARSE_FORMATS)](counts)
        for fn in (
            _fedentopt,
            lambda c, m_, st, q_, r: KLSelector().select(c, m_, (), r),
            lambda c, m_, st, q_, r: RandomSelector().select(c, m_, (), r),
            lambda c, m_, st, q_, r: DCSelector(m_ // 2).select(c, m_, (), r),
        ):
            assert _rounds(fn, as_sparse, m, q, seed) == _rounds(fn, counts, m, q, seed)


def test_sparse_input_with_duplicates_and_explicit_zeros():
    # COO entries (client, class) may repeat (they add up) and may store zeros; neither changes the picks.
    counts = np.array([[4, 0, 0], [0, 4, 0], [2, 2, 0], [0, 0, 2]], dtype=float)
    coo = sp.coo_array(
        ([2.0, 2.0, 4.0, 2.0, 2.0, 2.0, 0.0], ([0, 0, 1, 2, 2, 3, 3], [0, 0, 1, 0, 1, 2, 1])), shape=(4, 3)
    )
    for seed in range(6):
        assert _rounds(_fedentopt, coo, 3, 1, seed) == _rounds(_fedentopt, counts, 3, 1, seed)


def test_sparse_input_is_never_made_dense(monkeypatch):
    def refuse(self, *args, **kwargs):
        raise AssertionError("a dense K x C array was built")

    counts = sp.random_array((2000, 50), density=0.05, format="csr", rng=np.random.default_rng(0)) * 100
    counts.data = np.rint(counts.data) + 1
    for cls in (sp.csr_array, sp.csc_array, sp.coo_array):
        monkeypatch.setattr(cls, "toarray", refuse)
        monkeypatch.setattr(cls, "todense", refuse)
    picked, _ = FedEntOptSelector(buffer_fraction=0.5).select(counts, 30, (), np.random.default_rng(1))
    assert len(set(picked.tolist())) == 30
    assert KLSelector().select(counts.tocoo(), 5, (), np.random.default_rng(1))[0].size == 5


# ----------------------------------------------------------------------------- KL


def test_kl_hand_case():
    # c0=[3,1,0], c1=[1,1,1], c2=[0,0,5]. First: highest own entropy, c1 (log2 3). Then
    # KL([4,2,1]/7 || u) = log2 3 - 1.379 = 0.206 < KL([1,1,6]/8 || u) = log2 3 - 1.061 = 0.524 -> c0.
    counts = np.array([[3, 1, 0], [1, 1, 1], [0, 0, 5]])
    picked, state = KLSelector().select(counts, 2, (), np.random.default_rng(0))
    assert picked.tolist() == [1, 0] and state == ()

    def kl_to_uniform(v):
        p = v / v.sum()
        nz = p > 0
        return float((p[nz] * np.log2(p[nz] * len(v))).sum())

    assert kl_to_uniform(counts[1] + counts[0]) < kl_to_uniform(counts[1] + counts[2])


def test_kl_is_deterministic_and_repeats_the_subset():
    counts = np.random.default_rng(1).integers(0, 30, size=(20, 6))
    subsets = {tuple(KLSelector().select(counts, 5, (), np.random.default_rng(s))[0].tolist()) for s in range(15)}
    assert len(subsets) == 1


def test_kl_first_pick_is_highest_own_entropy():
    counts = np.random.default_rng(2).integers(0, 30, size=(25, 4))
    first = KLSelector().select(counts, 1, (), np.random.default_rng(0))[0][0]
    assert first == int(np.argmax(entropy_bits(counts)))


# ----------------------------------------------------------------------------- DC


def test_dc_random_part_then_greedy_by_cosine():
    counts = np.random.default_rng(3).integers(0, 20, size=(15, 4))
    picked, _ = DCSelector(3, 4, target="balanced").select(counts, 7, (), np.random.default_rng(9))
    random_part = np.random.default_rng(9).choice(15, size=3, replace=False)
    assert picked[:3].tolist() == random_part.tolist()
    target = np.ones(4)
    pooled = counts[picked[:3]].sum(axis=0)
    for nxt in picked[3:]:  # each added client minimises the cosine distance (Equation 2)
        rest = [k for k in range(15) if k not in picked[: list(picked).index(nxt)]]
        dists = {k: 1 - (pooled + counts[k]) @ target / np.linalg.norm(pooled + counts[k]) / 2 for k in rest}
        assert dists[int(nxt)] <= min(dists.values()) + 1e-12
        pooled = pooled + counts[nxt]


def test_dc_stops_early_when_nothing_improves():
    # c0 = [1,1] is perfectly balanced (distance 0): every other addition worsens it -> only [0] is returned.
    # From c1 = [5,0] (distance 0.293) adding c2 = [0,5] reaches 0, then adding c0 cannot improve -> [1, 2];
    # symmetrically [2, 1]. (Distances 1 - cos against the balanced target [1,1].)
    counts = np.array([[1, 1], [5, 0], [0, 5]])
    expected = {0: [0], 1: [1, 2], 2: [2, 1]}
    seen = _first_picks_seen(DCSelector(1, 2), counts, 3)
    assert seen == expected


def test_dc_real_vs_balanced_target():
    # Real target = class totals [7, 4]. Alone: c3=[1,1] is balanced (distance 0) while c2=[2,1] is closest to
    # [7,4] (1 - 18/(sqrt5*sqrt65) = 0.0015 vs 0.035 for c3).
    counts = np.array([[4, 0], [0, 2], [2, 1], [1, 1]])
    assert DCSelector(0, 1, target="balanced").select(counts, 1, (), np.random.default_rng(0))[0].tolist() == [3]
    assert DCSelector(0, 1, target="real").select(counts, 1, (), np.random.default_rng(0))[0].tolist() == [2]
    np.testing.assert_array_equal(DCSelector(0, 1, target="real").target_vector(counts.astype(float)), [7, 4])


def test_dc_num_dc_none_uses_m_minus_num_random():
    counts = np.random.default_rng(4).integers(0, 20, size=(12, 3))
    picked, _ = DCSelector(2).select(counts, 6, (), np.random.default_rng(0))
    assert 2 <= len(picked) <= 6 and len(set(picked.tolist())) == len(picked)


@settings(max_examples=60, deadline=None)
@given(problems(), st.sampled_from(["balanced", "real"]))
def test_dc_length_and_distinctness(problem, target):
    counts, m, _, seed = problem
    counts = counts + (counts.sum() == 0)  # the real target needs some positive total
    n_random = m // 2
    picked, _ = DCSelector(n_random, m - n_random, target=target).select(counts, m, (), np.random.default_rng(seed))
    assert n_random <= len(picked) <= m
    assert len(set(picked.tolist())) == len(picked)


# ----------------------------------------------------------------------------- random


def test_random_selector_distinct_and_uniform():
    # 4000 draws of 2 of 5 clients: each client is picked 1600 times in expectation (sd ~ 31; band 5 sd).
    rng, counts = np.random.default_rng(0), np.ones((5, 2))
    tally = Counter()
    for _ in range(4000):
        picked, _ = RandomSelector().select(counts, 2, (), rng)
        assert len(set(picked.tolist())) == 2
        tally.update(picked.tolist())
    assert all(abs(n - 1600) < 160 for n in tally.values())


# ----------------------------------------------------------------------------- registry


def test_make_selector_builds_each_name():
    assert isinstance(make_selector("random"), RandomSelector)
    assert make_selector("fedentopt", buffer_size=3) == FedEntOptSelector(buffer_size=3)
    assert isinstance(make_selector("kl"), KLSelector)
    assert make_selector("dc", num_random=10, num_dc=5, target="real") == DCSelector(10, 5, "real")
    assert all(isinstance(make_selector(n, **p), Selector) for n, p in [("random", {}), ("kl", {})])


# ----------------------------------------------------------------------------- failure cases

RNG = np.random.default_rng(0)


def test_clients_per_round_out_of_range_raises():
    with pytest.raises(
        ValueError,
        match=r"^parameter 'clients_per_round': got 5; allowed: an integer >= 1 and <= the number of clients K=4\.$",
    ):
        RandomSelector().select(HAND, 5, (), RNG)
    with pytest.raises(ValueError, match=r"^parameter 'clients_per_round': got 0; allowed: an integer >= 1\.$"):
        FedEntOptSelector(buffer_size=0).select(HAND, 0, (), RNG)


def test_buffer_too_large_raises():
    with pytest.raises(
        ValueError,
        match=r"^selector 'fedentopt' parameter 'buffer_size': got Q=3; allowed: 0 <= Q <= K - M = 4 - 2 = 2 ",
    ):
        FedEntOptSelector(buffer_size=3).select(HAND, 2, (), RNG)
    with pytest.raises(
        ValueError,
        match=r"^selector 'fedentopt' parameter 'buffer_size': got Q=4 \(from buffer_fraction=0\.95\); allowed: 0 <= Q",
    ):
        FedEntOptSelector(buffer_fraction=0.95).select(HAND, 1, (), RNG)


def test_negative_buffer_raises():
    with pytest.raises(
        ValueError, match="selector 'fedentopt' parameter 'buffer_size': got -1; allowed: an integer >= 0."
    ):
        FedEntOptSelector(buffer_size=-1)
    with pytest.raises(
        ValueError, match="parameter 'buffer_fraction': got 1.5; allowed: a finite real number >= 0.0 and <= 1.0"
    ):
        FedEntOptSelector(buffer_fraction=1.5)


def test_fedentopt_needs_exactly_one_buffer_argument():
    with pytest.raises(
        ValueError, match=r"^selector 'fedentopt' parameter 'buffer_size': got None; allowed: .*exactly one"
    ):
        FedEntOptSelector()
    with pytest.raises(
        ValueError, match=r"^selector 'fedentopt' parameter 'buffer_size': got 2; allowed: None, .*exactly one"
    ):
        FedEntOptSelector(buffer_size=2, buffer_fraction=0.5)


def test_bad_state_raises():
    sel = FedEntOptSelector(buffer_size=2)
    allowed = r"allowed: a tuple of at most buffer_size Q=2 distinct buffered client indices in \[0, 3\]\.$"
    with pytest.raises(ValueError, match=r"^parameter 'state': got 3 buffered clients; " + allowed):
        sel.select(HAND, 2, (0, 1, 2), RNG)
    with pytest.raises(ValueError, match=r"^parameter 'state': got \(0, 7\); " + allowed):
        sel.select(HAND, 2, (0, 7), RNG)
    with pytest.raises(TypeError, match=r"^parameter 'state': got type list; " + allowed):
        sel.select(HAND, 2, [0], RNG)
    with pytest.raises(
        ValueError, match=r"^parameter 'state': got \(1,\); allowed: \(\) \(the 'kl' selector keeps no state\)"
    ):
        KLSelector().select(HAND, 2, (1,), RNG)


def test_unknown_selector_name_lists_names():
    # the built-in names, then any registered from outside fedlib (the reproduction's 'fedentopt-swap' where repro
    # is imported, as in a full test run)
    allowed = ", ".join(repr(name) for name in SELECTORS)
    assert allowed.startswith("'random', 'fedentopt', 'kl', 'dc'")
    with pytest.raises(ValueError, match=re.escape(f"selector parameter 'name': got 'fedavg'; allowed: {allowed}.")):
        make_selector("fedavg")


# --------------------------------------------------------------------------- the registry


@dataclass(frozen=True)
class FirstClients(Selector):
    """Clients 0..M-1 every round: a selector defined outside fedlib, for the registry's tests. It declares that it
    reads label counts (it does not) so that LABEL_BASED_SELECTORS has to follow it."""

    name: ClassVar[str] = "first-clients"
    uses_label_counts: ClassVar[bool] = True

    def _select(self, counts, clients_per_round, state, rng):
        return list(range(clients_per_round)), ()


@pytest.fixture
def registry():
    """The registry as the test found it, restored after the test."""
    saved = dict(SELECTORS), dict(selection._LABEL_BASED)
    yield
    for live, before in zip((SELECTORS, selection._LABEL_BASED), saved):
        live.clear()
        live.update(before)


def test_the_built_in_selectors_are_registered_with_whether_they_read_label_counts():
    assert list(SELECTORS)[:4] == ["random", "fedentopt", "kl", "dc"]
    assert "random" not in LABEL_BASED_SELECTORS and {"fedentopt", "kl", "dc"} <= set(LABEL_BASED_SELECTORS)
    assert set(LABEL_BASED_SELECTORS) == {name for name, cls in SELECTORS.items() if cls.uses_label_counts}


def test_a_registered_selector_is_made_by_name_and_accepted_by_a_config(registry):
    assert "first-clients" not in SELECTORS
    with pytest.raises(ParameterError, match="config parameter 'selector': got 'first-clients'; allowed: 'random'"):
        ExperimentConfig(selector="first-clients").validate()
    assert register_selector(FirstClients) is FirstClients
    assert register_selector(FirstClients) is FirstClients  # the same class again changes nothing
    assert make_selector("first-clients") == FirstClients() and "first-clients" in LABEL_BASED_SELECTORS
    assert ExperimentConfig(selector="first-clients").validate().build_selector_and_algorithm()[0] == FirstClients()
    picked, _ = make_selector("first-clients").select(HAND, 2, (), RNG)
    assert picked.tolist() == [0, 1]


@pytest.mark.parametrize(
    "cls, message",
    [
        # what is refused -> the error
        (dict, "register_selector parameter 'cls': got <class 'dict'>; allowed: a Selector subclass with a name."),
        (FirstClients(), "register_selector parameter 'cls': got FirstClients(); allowed: a Selector subclass with"),
        (Selector, "register_selector parameter 'cls': got <class 'fedlib.selection.selectors.Selector'>; allowed: "),
        (
            type("OtherKL", (KLSelector,), {}),
            "register_selector parameter 'cls': got OtherKL named 'kl'; allowed: a Selector subclass whose name is "
            "none of 'random', 'fedentopt', 'kl', 'dc'",
        ),
    ],
)
def test_register_selector_refuses_a_non_selector_and_a_taken_name(registry, cls, message):
    before = dict(SELECTORS)
    with pytest.raises(ParameterError) as info:
        register_selector(cls)
    assert str(info.value).startswith(message)
    assert SELECTORS == before and SELECTORS["kl"] is KLSelector


def test_unknown_parameter_raises():
    with pytest.raises(
        TypeError,
        match="selector 'fedentopt' unknown parameter 'buffer': got 5; allowed: the "
        "parameters buffer_size, buffer_fraction, ",
    ):
        make_selector("fedentopt", buffer=5)
    with pytest.raises(
        TypeError, match=r"^selector 'kl' unknown parameter 'buffer_size': got 5; allowed: no parameters\."
    ):
        make_selector("kl", buffer_size=5)
    with pytest.raises(TypeError, match="num_random"):  # m has no default (the DC paper uses m = 10)
        make_selector("dc")


@pytest.mark.parametrize(
    "name, params, message",
    [
        ("best", {}, "selector parameter 'name': got 'best'; allowed: 'random', 'fedentopt', "),
        (
            "dc",
            {"num_random": 1, "m": 10},
            "selector 'dc' unknown parameter 'm': got 10; allowed: the parameters num_random, num_dc, target.",
        ),
        (
            "random",
            {"buffer_size": 5},
            "selector 'random' unknown parameter 'buffer_size': got 5; allowed: no parameters.",
        ),
        ("dc", {"num_random": -1}, "selector 'dc' parameter 'num_random': got -1; allowed: an integer >= 0."),
        (
            "dc",
            {"num_random": 1, "target": "uniform"},
            "selector 'dc' parameter 'target': got 'uniform'; allowed: 'balanced', 'real'.",
        ),
        (
            "fedentopt",
            {"buffer_size": 1.5},
            "selector 'fedentopt' parameter 'buffer_size': got 1.5; allowed: an integer >= 0.",
        ),
        (
            "fedentopt",
            {"buffer_size": 2, "share_cap": 0.5},
            "selector 'fedentopt' parameter 'share_cap': got 0.5; allowed: a finite real number >= 1.0.",
        ),
        (
            "fedentopt",
            {},
            "selector 'fedentopt' parameter 'buffer_size': got None; allowed: an integer Q >= 0, as "
            "buffer_fraction is None (give exactly one of buffer_size, buffer_fraction).",
        ),
    ],
)
def test_make_selector_reports_one_error_shape(name, params, message):
    # the same type and message shape as make_algorithm's: part, parameter, value given, what is allowed
    with pytest.raises(ParameterError) as info:
        make_selector(name, **params)
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)
    assert str(info.value).startswith(message)


def test_wrong_count_shapes_raise():
    for bad in (np.ones(4), np.ones((2, 2, 2)), np.ones((0, 3))):
        shape = re.escape(str(bad.shape))
        with pytest.raises(ValueError, match=rf"^parameter 'counts': got shape {shape}; allowed: a 2-D array \(num_c"):
            RandomSelector().select(bad, 1, (), RNG)


def test_non_generator_rng_raises():
    for bad in (0, np.random.RandomState(0), None):
        with pytest.raises(
            TypeError, match=rf"^parameter 'rng': got type {type(bad).__name__}; allowed: a numpy\.random\."
        ):
            FedEntOptSelector(buffer_size=0).select(HAND, 2, (), bad)


def test_nan_counts_raise():
    with pytest.raises(
        ValueError, match=r"^parameter 'counts': got nan for client 0, class 1; allowed: .* of finite numbers"
    ):
        KLSelector().select([[1.0, np.nan], [1.0, 2.0]], 1, (), RNG)


@pytest.mark.parametrize("to", [np.asarray, sp.csr_array, sp.coo_matrix])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_bad_counts_name_the_client_and_the_value(to, bad):
    counts = np.ones((5, 3))
    counts[3, 2] = bad
    with pytest.raises(
        ValueError, match=rf"^parameter 'counts': got {bad} for client 3, class 2; allowed: a 2-D array "
    ):
        FedEntOptSelector(buffer_size=0).select(to(counts), 2, (), RNG)


def test_ragged_and_wrongly_shaped_counts_raise():
    with pytest.raises(
        ValueError,
        match=r"^parameter 'counts': got rows of different lengths \(client 0 has 2 entries, client 2 has 1\); allowed",
    ):
        FedEntOptSelector(buffer_size=0).select([[1, 2], [3, 4], [5]], 1, (), RNG)
    with pytest.raises(
        ValueError, match=r"^parameter 'counts': got shape \(0, 3\); allowed: a 2-D array \(num_clients, num_classes\)"
    ):
        KLSelector().select(sp.csr_array((0, 3)), 1, (), RNG)
    with pytest.raises(
        TypeError,
        match=r"^parameter 'counts': got dtype <U1; allowed: a 2-D array \(num_clients, num_classes\) of finite",
    ):
        KLSelector().select([["1", "2"]], 1, (), RNG)


def test_negative_counts_follow_the_privacy_page():
    # True counts must be non-negative (named client and value); server counts with kept DP noise are scored
    # as H(max(L + l, 0)) by every scorer, dense or sparse.
    with pytest.raises(
        ValueError, match=r"^parameter 'counts': got -2\.0 for client 1, class 0; allowed: .* non-negative numbers\.$"
    ):
        run_selection(sp.csr_array(np.array([[1.0, 0.0], [-2.0, 1.0]])), "random", 1, 1, seed=0)
    rng = np.random.default_rng(8)
    for _ in range(10):
        noisy = laplace_counts(rng.integers(0, 6, size=(30, 4)), 0.3, rng=rng, negative="keep")
        assert (noisy < 0).any()
        ref = _rounds(reference_fedentopt, noisy, 6, 10, 3)
        assert _rounds(_fedentopt, noisy, 6, 10, 3) == ref
        assert _rounds(_fedentopt, sp.csr_array(noisy), 6, 10, 3) == ref


def test_dc_bad_configuration_raises():
    with pytest.raises(
        ValueError,
        match=r"^selector 'dc' parameter 'clients_per_round': got 2; allowed: num_random \+ num_dc = 1 \+ 2 = 3",
    ):
        DCSelector(1, 2).select(HAND, 2, (), RNG)
    with pytest.raises(
        ValueError,
        match=r"^selector 'dc' parameter 'clients_per_round': got 2; "
        r"allowed: the maximum m \+ m_DC, >= num_random=3\.$",
    ):
        DCSelector(3).select(HAND, 2, (), RNG)
    with pytest.raises(ValueError, match="parameter 'target': got 'uniform'; allowed: 'balanced', 'real'"):
        DCSelector(1, 1, target="uniform")
    with pytest.raises(ValueError, match="selector 'dc' parameter 'num_random': got -1; allowed: an integer >= 0"):
        DCSelector(-1)
    with pytest.raises(
        ValueError,
        match=r"^parameter 'counts': got no positive class total; allowed: counts with a positive class total ",
    ):
        DCSelector(0, 1, target="real").select(np.zeros((3, 2)), 1, (), RNG)
