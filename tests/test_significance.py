"""Tests of repro.significance: seed-paired tests, rank agreement with the paper, rounds to a
reference."""

import math

import numpy as np
import pandas as pd
import pytest

from fedlib.training.runs import last_rounds_mean
from repro import significance as sg

# ----------------------------------------------------------------------------- statistics, by hand


def test_last_rounds_mean_hand():
    # a FedConcat-like run: round 0 (the initial model, evaluated) never counts; rounds 1-3 train the encoders and
    # are not evaluated (NaN, as in the stored tables); rounds 4-15 are evaluated with accuracies 0.04 .. 0.15.
    # The last 10 evaluated rounds are 6..15 -> mean of 0.06..0.15 = (0.06 + 0.15) / 2 = 0.105.
    acc = [0.9, np.nan, np.nan, np.nan] + [r / 100 for r in range(4, 16)]
    run = pd.DataFrame({"round": range(16), "test_accuracy": acc})
    assert last_rounds_mean(run) == pytest.approx(0.105)
    # a NaN among the last rounds is skipped, not counted: with round 15 unevaluated, rounds 5..14 -> 0.095
    gap = run.assign(test_accuracy=acc[:-1] + [np.nan])
    assert last_rounds_mean(gap) == pytest.approx(0.095)
    # fewer evaluated rounds than asked: all of them (rounds 4, 5: 0.045); rows in any order; none at all: NaN
    short = run.head(6).iloc[::-1]
    assert last_rounds_mean(short, 10) == pytest.approx(0.045)
    assert np.isnan(last_rounds_mean(run.head(4)))
    # grouped: one mean per run, in the units of the column (no % here)
    two = pd.concat([run.assign(seed=1), run.head(6).assign(seed=0)])
    per = last_rounds_mean(two, 2, by=["seed"])
    assert per.index.tolist() == [0, 1]
    assert per.tolist() == pytest.approx([0.045, 0.145])  # (0.04 + 0.05) / 2 and (0.14 + 0.15) / 2


def test_sign_flip_p_hand():
    # (1, 2, 3): of the 8 sign patterns only +++ and --- reach |mean| = 2 -> 2/8
    assert sg.sign_flip_p([1.0, 2.0, 3.0]) == 0.25
    # (1, -1): |mean| 0 is reached by every pattern
    assert sg.sign_flip_p([1.0, -1.0]) == 1.0
    # five differences of one sign: 2/32, the smallest p five seeds can give
    assert sg.sign_flip_p([0.5, 1, 2, 3, 4]) == 2 / 32
    # (3, 1, 1, 1): mean 1.5; patterns with |sum| >= 6: +3 with all + (6) and their negatives -> 2/16
    assert sg.sign_flip_p([3.0, 1.0, 1.0, 1.0]) == 2 / 16


def test_sign_flip_p_beyond_the_exact_size_matches_the_binomial_by_hand():
    # 16 differences of +1 and 8 of -1: |mean| = 8/24 is reached where the numbers of + and - differ by 8 or more,
    # P(B >= 16) + P(B <= 8) for B ~ Binomial(24, 1/2)
    d = [1.0] * 16 + [-1.0] * 8
    exact = sum(math.comb(24, b) for b in range(25) if abs(2 * b - 24) >= 8) / 2**24
    p = sg.sign_flip_p(d, draws=100_000, seed=3)
    assert p == pytest.approx(exact, abs=4 * math.sqrt(exact * (1 - exact) / 100_000))
    assert sg.sign_flip_p(d, draws=1000, seed=3) == sg.sign_flip_p(d, draws=1000, seed=3)
    # 30 of one sign: only the two all-alike patterns reach it, so no draw is likely to: 1 / (1 + draws)
    assert sg.sign_flip_p([1.0] * 30, draws=5000) == 1 / 5001
    assert sg.sign_flip_p([0.0] * 25, draws=5000) == 1.0
    with pytest.raises(ValueError, match=r"^parameter 'draws': got 0; allowed: an integer >= 1\.$"):
        sg.sign_flip_p(d, draws=0)
    assert sg.sign_flip_p(d, draws=np.int64(1000), seed=3) == sg.sign_flip_p(d, draws=1000, seed=3)
    for bad in (2.5, True, np.bool_(True)):
        with pytest.raises(ValueError, match=r"^parameter 'draws'"):
            sg.sign_flip_p(d, draws=bad)


def test_sign_flip_p_rejects_bad_input():
    allowed = r"allowed: a 1-D sequence of at least one finite difference\.$"
    with pytest.raises(ValueError, match=r"^parameter 'diffs': got \[\]; " + allowed):
        sg.sign_flip_p([])
    with pytest.raises(ValueError, match=r"^parameter 'diffs': got \[1\.0, nan\]; " + allowed):
        sg.sign_flip_p([1.0, np.nan])


def test_paired_test_matches_scipy_and_hand():
    from scipy import stats

    a, b = np.array([70.0, 65.0, 72.0, 60.0]), np.array([60.0, 66.0, 70.0, 55.0])
    r = sg.paired_test(a, b)
    assert r["n"] == 4 and r["mean_diff"] == pytest.approx(4.0)  # (10 - 1 + 2 + 5) / 4
    assert r["std_diff"] == pytest.approx(np.std([10, -1, 2, 5], ddof=1))
    assert r["p_ttest"] == pytest.approx(stats.ttest_rel(a, b).pvalue)
    assert r["p_signflip"] == sg.sign_flip_p([10, -1, 2, 5])
    same = sg.paired_test([1.0, 2.0], [1.0, 2.0])
    assert np.isnan(same["p_ttest"]) and same["p_signflip"] == 1.0
    with pytest.raises(
        ValueError, match=r"^parameter 'b': got shape \(1,\); allowed: a 1-D sequence of 2 values, as long as a\.$"
    ):
        sg.paired_test([1.0, 2.0], [1.0])


# ----------------------------------------------------------------------------- on run tables


def _frame(curves: dict) -> pd.DataFrame:
    """{(partition, method, seed): accuracies of rounds 1..n} -> a run table (round 0 has no accuracy)."""
    rows = []
    for (p, m, s), acc in curves.items():
        rows.append({"partition": p, "method": m, "seed": s, "round": 0, "test_accuracy": np.nan})
        rows += [
            {"partition": p, "method": m, "seed": s, "round": r, "test_accuracy": a} for r, a in enumerate(acc, start=1)
        ]
    return pd.DataFrame(rows)


def test_per_run_final_hand():
    f = _frame({("C=2", "A", 0): [0.1, 0.2, 0.3, 0.5], ("C=2", "B", 0): [0.4, 0.4, 0.4, 0.4]})
    per = sg.per_run_final(f, last=2).set_index("method")["accuracy"]
    assert per["A"] == pytest.approx(40.0) and per["B"] == pytest.approx(40.0)  # (0.3 + 0.5) / 2 in %
    with pytest.raises(ValueError, match=r"^parameter 'last': got 0; allowed: a positive number of rounds\.$"):
        sg.per_run_final(f, last=0)


def test_paired_against_pairs_by_seed():
    # seed 1 of "B" is missing: only seeds 0 and 2 are paired for (A, B)
    f = _frame(
        {
            ("C=2", "A", 0): [0.5],
            ("C=2", "A", 1): [0.6],
            ("C=2", "A", 2): [0.7],
            ("C=2", "B", 0): [0.4],
            ("C=2", "B", 2): [0.4],
            ("C=2", "C", 0): [0.5],
            ("C=2", "C", 1): [0.6],
            ("C=2", "C", 2): [0.7],
        }
    )
    t = sg.paired_against(sg.per_run_final(f, last=1), "A").set_index("b")
    assert list(t.index) == ["B", "C"] and (t["a"] == "A").all() and (t["partition"] == "C=2").all()
    assert t.loc["B", "n"] == 2 and t.loc["B", "mean_diff"] == pytest.approx(20.0)  # (10 + 30) / 2 pp
    assert t.loc["C", "mean_diff"] == pytest.approx(0.0) and t.loc["C", "p_signflip"] == 1.0
    with pytest.raises(ValueError, match=r"^parameter 'reference': got 'Z'; allowed: a method with stored runs: 'A', "):
        sg.paired_against(sg.per_run_final(f, last=1), "Z")


def test_rank_correlation_hand_and_scipy():
    from scipy import stats

    s = pd.DataFrame(
        {
            "partition": ["P"] * 4 + ["Q"] * 4,
            "method": list("abcd") * 2,
            "ours_mean": [1, 2, 3, 4, 1, 2, 3, 4],
            "paper_mean": [10, 20, 30, 40, 40, 30, 20, 10.0],
        }
    )
    r = sg.rank_correlation(s).set_index("partition")
    assert r.loc["P", "spearman_rho"] == pytest.approx(1.0) and r.loc["Q", "spearman_rho"] == pytest.approx(-1.0)
    assert r.loc["P", "kendall_tau"] == pytest.approx(1.0) and r.loc["P", "ours_first"] == "d"
    assert r.loc["Q", "paper_first"] == "a"
    s2 = pd.DataFrame(
        {
            "partition": ["P"] * 5,
            "method": list("abcde"),
            "ours_mean": [3, 1, 4, 1.5, 5],
            "paper_mean": [2, 7, 1, 8, np.nan],
        }
    )  # the NaN row is left out: n = 4
    r2 = sg.rank_correlation(s2).iloc[0]
    assert r2["n"] == 4
    assert r2["spearman_rho"] == pytest.approx(stats.spearmanr([3, 1, 4, 1.5], [2, 7, 1, 8]).statistic)


def test_rounds_to_reference_hand():
    # the reference R ends at 0.5 (seed 0) and 0.45 (seed 1) over its last 2 rounds; F climbs faster
    f = _frame(
        {
            ("C=2", "R", 0): [0.1, 0.2, 0.3, 0.4, 0.5, 0.5],
            ("C=2", "R", 1): [0.1, 0.2, 0.3, 0.5, 0.5, 0.4],
            ("C=2", "F", 0): [0.4, 0.6, 0.6, 0.6, 0.6, 0.6],
            ("C=2", "F", 1): [0.3, 0.4, 0.6, 0.6, 0.6, 0.6],
            ("C=2", "S", 0): [0.1] * 6,
            ("C=2", "S", 1): [0.1] * 6,
            ("C=2", "F", 2): [0.9] * 6,
        }
    )
    t = sg.rounds_to_reference(f, "R", window=2).set_index("method")
    assert t.loc["R", "target"] == pytest.approx(47.5)  # (50 + 45) / 2
    # trailing 2-round means; R seed 0 reaches its 50 % at round 6, seed 1 its 45 % at round 5 (0.5, 0.5)
    assert t.loc["R", "rounds_mean"] == pytest.approx(5.5) and t.loc["R", "reached"] == 2
    # F seed 0 reaches 50 % at round 2 (0.5); seed 1 reaches 45 % at round 3 (0.5); seed 2 has no R run: left out
    assert t.loc["F", "rounds_mean"] == pytest.approx(2.5) and t.loc["F", "runs"] == 2
    assert t.loc["F", "speedup"] == pytest.approx(5.5 / 2.5)
    assert t.loc["S", "reached"] == 0 and np.isnan(t.loc["S", "rounds_mean"])
    with pytest.raises(ValueError, match=r"^parameter 'window': got 0; allowed: a positive number of rounds\.$"):
        sg.rounds_to_reference(f, "R", window=0)
    with pytest.raises(ValueError, match=r"^parameter 'reference': got 'FedAvg'; allowed: a method with stored runs: "):
        sg.rounds_to_reference(f)


def test_races_count_the_rounds_each_method_needs_for_the_others_final_accuracy():
    """One seed, C=2, window 1: FedEntOpt ends at 0.6 and reaches FedAvg's final 0.5 in round 1 (FedAvg needs 5);
    FedLC ends at 0.9, which FedEntOpt never reaches (counted as the last round + 1)."""
    rounds = np.arange(1, 7)
    curves = {
        "FedEntOpt": [0.5, 0.6, 0.6, 0.6, 0.6, 0.6],
        "FedAvg": [0.1, 0.2, 0.3, 0.4, 0.5, 0.5],
        "FedLC": [0.1, 0.2, 0.3, 0.4, 0.5, 0.9],
    }
    frame = pd.concat(
        [
            pd.DataFrame({"partition": "C=2", "method": m, "seed": 0, "round": rounds, "test_accuracy": acc})
            for m, acc in curves.items()
        ]
    )
    r = sg.races(frame, window=1).set_index("method")
    assert (r.loc["FedAvg", "rounds_method"], r.loc["FedAvg", "rounds_reference"]) == (5, 1)
    assert r.loc["FedAvg", "saved"] == 4
    assert (r.loc["FedLC", "rounds_method"], r.loc["FedLC", "rounds_reference"]) == (6, 7)  # never: 6 + 1
