"""Tests of fedlib.selection.privacy: the Laplace mechanism of eq. (7) in FedEntOpt v2 §V-B2."""

import numpy as np
import pytest

from fedlib.selection.privacy import laplace_counts
from fedlib.selection.selectors import FedEntOptSelector, KLSelector

N_DRAWS = 200_000  # 1000 clients x 200 classes


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_noise_mean_and_scale(epsilon):
    # Lap(0, b) with b = 1/epsilon (sensitivity 1): E[Z] = 0, E|Z| = b, sd(Z) = sqrt(2) b, |Z| ~ Exp(b) so sd|Z| = b.
    # With n = 200,000 draws the standard errors are sqrt(2) b / sqrt(n) ~ 0.0032 b for the mean and b / sqrt(n)
    # ~ 0.0022 b for mean |Z|; the tolerances below are about 5 standard errors (fixed seed, so not flaky).
    counts = np.full((1000, 200), 50)
    noise = laplace_counts(counts, epsilon, rng=np.random.default_rng(0), negative="keep") - counts
    b = 1.0 / epsilon
    assert noise.size == N_DRAWS
    assert abs(noise.mean()) < 0.016 * b
    assert abs(np.abs(noise).mean() - b) < 0.011 * b


def test_clip_never_negative_and_keep_can_be():
    counts = np.zeros((200, 10))
    clipped = laplace_counts(counts, 0.5, rng=np.random.default_rng(1), negative="clip")
    kept = laplace_counts(counts, 0.5, rng=np.random.default_rng(1))  # the default: the paper's raw upload
    assert (clipped >= 0).all()
    assert (kept < 0).any()
    np.testing.assert_array_equal(clipped, np.maximum(kept, 0))  # same draws, then clipped


def test_same_seed_same_noise():
    counts = np.arange(12).reshape(4, 3)
    a = laplace_counts(counts, 1.0, rng=np.random.default_rng(5))
    b = laplace_counts(counts, 1.0, rng=np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, counts)


def test_selectors_accept_kept_negative_counts():
    # With "keep", selectors score max(L + l, 0): a pooled vector stays finite and entropy well defined.
    counts = np.array([[5, 0, 0], [0, 5, 0], [0, 0, 5], [1, 1, 1]])
    noisy = laplace_counts(counts, 0.5, rng=np.random.default_rng(2), negative="keep")
    assert (noisy < 0).any()
    for sel in (FedEntOptSelector(buffer_size=1), KLSelector()):
        picked, _ = sel.select(noisy, 3, (), np.random.default_rng(0))
        assert len(set(picked.tolist())) == 3


def test_kept_negative_entries_count_as_zero_when_pooled():
    # Client 1's -3 in class 0 is clipped after pooling: {0, 1} pools to [max(2-3,0), 4] = [0, 4] (H = 0), while
    # {0, 2} pools to [2, 2] (H = 1) -> KL (= entropy argmax) must take client 2 after its first pick, client 0.
    counts = np.array([[2.0, 0.0], [-3.0, 4.0], [0.0, 2.0]])
    picked, _ = KLSelector().select(counts, 2, (), np.random.default_rng(0))
    assert picked.tolist() == [0, 2]


@pytest.mark.parametrize("epsilon", [0, -1.0])
def test_nonpositive_epsilon_raises(epsilon):
    with pytest.raises(
        ValueError, match=rf"^parameter 'epsilon': got {epsilon}; allowed: a finite real number > 0\.0\.$"
    ):
        laplace_counts([[1, 2]], epsilon, rng=np.random.default_rng(0))


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match=r"^parameter 'negative': got 'abs'; allowed: 'clip', 'keep'\.$"):
        laplace_counts([[1, 2]], 1.0, rng=np.random.default_rng(0), negative="abs")
    with pytest.raises(TypeError, match=r"^parameter 'rng': got type int; allowed: a numpy\.random\.Generator"):
        laplace_counts([[1, 2]], 1.0, rng=0)
    with pytest.raises(
        ValueError, match=r"^parameter 'counts': got -2\.0 for client 0, class 1; allowed: .* non-negative numbers\.$"
    ):
        laplace_counts([[1, -2]], 1.0, rng=np.random.default_rng(0))
    with pytest.raises(
        ValueError, match=r"^parameter 'counts': got shape \(2,\); allowed: a 2-D array \(num_clients, num_classes\)"
    ):
        laplace_counts([1, 2], 1.0, rng=np.random.default_rng(0))


def _entropy_bits(v):
    p = np.maximum(v, 0.0)
    p = p[p > 0] / p.sum()
    return float(-(p * np.log2(p)).sum())


def test_fedentopt_scores_pooled_counts_clipped_after_pooling():
    # Client 2 first (the rng's first draw among 3 free clients is 2 for seed 3), pooled L = [3, 0].  Candidates:
    # client 0: [3, 2], H = 0.971; client 1: max([3 - 2, 0 + 3], 0) = [1, 3], H = 0.811.  Scoring after pooling
    # (documented) takes client 0; clipping client 1's -2 before pooling would give [3, 3], H = 1, and take 1.
    counts = np.array([[0.0, 2.0], [-2.0, 3.0], [3.0, 0.0]])
    assert np.random.default_rng(3).integers(3) == 2
    picked, _ = FedEntOptSelector(buffer_size=0).select(counts, 2, (), np.random.default_rng(3))
    assert picked.tolist() == [2, 0]
    clipped_first, _ = FedEntOptSelector(buffer_size=0).select(np.maximum(counts, 0), 2, (), np.random.default_rng(3))
    assert clipped_first.tolist() == [2, 1]


def test_fedentopt_on_kept_noise_equals_a_reference_greedy():
    # Reference: greedy argmax of H(max(L + l_m, 0)) (lowest index on ties) after the selector's own first pick.
    counts = np.random.default_rng(4).multinomial(30, [0.6, 0.2, 0.1, 0.05, 0.05], size=40)
    noisy = laplace_counts(counts, 0.5, rng=np.random.default_rng(5))  # default "keep"
    assert (noisy < 0).sum() > 20
    picked, _ = FedEntOptSelector(buffer_size=0).select(noisy, 6, (), np.random.default_rng(6))
    pooled, chosen = noisy[picked[0]].copy(), [int(picked[0])]
    for _ in range(5):
        scores = [(-_entropy_bits(pooled + noisy[m]), m) for m in range(40) if m not in chosen]
        m = min(scores)[1]
        chosen.append(m)
        pooled += noisy[m]
    assert picked.tolist() == chosen


def test_dp_default_is_the_papers_raw_upload_and_keys_of_runs_without_dp_are_unchanged():
    from fedlib.training.config import ExperimentConfig, config_hash
    from repro.results import run_key

    assert ExperimentConfig().dp_negative == "keep"
    plain = ExperimentConfig()
    assert run_key(plain) == run_key(plain.replace(dp_negative="clip"))  # no DP: dp_negative plays no part
    assert config_hash(plain, "v") == config_hash(plain.replace(dp_negative="clip"), "v")
    dp = plain.replace(label_dp_epsilon=0.5)
    assert run_key(dp) != run_key(dp.replace(dp_negative="clip"))
