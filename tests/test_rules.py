"""The rules that judge the paper's statements (repro.rules): each rule on hand-made frames
that come out reproduces, does not reproduce and undecided, with intervals checked by hand from the t table; the
multi-setting frames the paper tier will give (settings are judged apart, never pooled); and the symmetry that
makes a rule the same for a pass and a miss."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repro import rules
from repro.results import StoredGroup
from repro.rules import DOES_NOT, REPRODUCES, UNDECIDED

# Two-sided 95 % t quantiles from a printed t table (t_{0.975, df}).
T2, T4 = 4.303, 2.776


def paired(diffs, a="A", b="B", base=50.0, **setting):
    """Runs of ``a`` and ``b`` at seeds 0..n-1 whose seed-paired differences a - b are ``diffs``."""
    rows = []
    for s, d in enumerate(diffs):
        b_value = base + 3.0 * math.sin(s)  # the federation moves both methods alike at a seed
        rows += [
            {**setting, "method": b, "seed": s, "value": b_value},
            {**setting, "method": a, "seed": s, "value": b_value + d},
        ]
    return pd.DataFrame(rows)


def by_hand(diffs, t):
    d = np.asarray(diffs, dtype=float)
    half = t * d.std(ddof=1) / math.sqrt(d.size)
    return d.mean() - half, d.mean() + half


def test_one_alpha_and_the_scorecards_verdict_names():
    from repro import scorecard

    assert rules.ALPHA == 0.05
    assert set(rules.VERDICTS) <= set(scorecard.STATUSES)


@pytest.mark.slow
def test_t_interval_by_hand():
    m, lo, hi, n = rules.t_interval([1.0, 2.0, 3.0])  # mean 2, sd 1: 2 +- 4.303 / sqrt(3)
    assert (m, n) == (2.0, 3)
    assert lo == pytest.approx(2 - T2 / math.sqrt(3), abs=1e-3) and hi == pytest.approx(2 + T2 / math.sqrt(3), abs=1e-3)
    assert rules.t_interval([4.0])[1:3] == (-math.inf, math.inf)
    assert rules.t_interval([2.0, 2.0, 2.0])[1:3] == (2.0, 2.0)


# ------------------------------------------------------------------------------------------------- direction


@pytest.mark.parametrize(
    "diffs, verdict, leans",
    [
        ([2.0, 3.0, 4.0], REPRODUCES, REPRODUCES),  # 3 +- 2.484: [0.516, 5.484]
        ([-2.0, -3.0, -4.0], DOES_NOT, DOES_NOT),  # the interval excludes 0 on the wrong side: a miss
        ([1.0, 2.0, 3.0], UNDECIDED, REPRODUCES),  # [-0.484, 4.484]
        ([-1.0, -2.0, -3.0], UNDECIDED, DOES_NOT),
    ],
)
def test_direction_three_verdicts(diffs, verdict, leans):
    j = rules.direction(paired(diffs), ("A", "B"))
    v = j.overall
    assert (v.verdict, v.leans, v.n) == (verdict, leans, 3)
    lo, hi = by_hand(diffs, T2)
    assert v.low == pytest.approx(lo, abs=1e-3) and v.high == pytest.approx(hi, abs=1e-3)
    assert v.estimate == pytest.approx(np.mean(diffs))
    assert j.settings[0].parts[0].verdict == verdict


def test_direction_side_minus_one():
    assert rules.direction(paired([-2.0, -3.0, -4.0]), ("A", "B"), side=-1).verdict == REPRODUCES
    assert rules.direction(paired([2.0, 3.0, 4.0]), ("A", "B"), side=-1).verdict == DOES_NOT
    with pytest.raises(ValueError, match="side"):
        rules.direction(paired([1.0, 2.0]), ("A", "B"), side=0)


def test_one_seed_is_undecided_and_says_why():
    """The audit's case: one seed gives no interval, whatever its estimate (no interval over rounds instead)."""
    v = rules.direction(paired([25.0]), ("A", "B")).overall
    assert v.verdict == UNDECIDED and v.n == 1
    assert (v.low, v.high) == (-math.inf, math.inf)
    assert "no interval" in v.reason and v.leans == REPRODUCES
    # the same for every rule
    assert rules.best(paired([25.0], a="FedEntOpt", b="FedAvg"), "FedEntOpt").verdict == UNDECIDED
    assert rules.magnitude(paired([6.0]), ("A", "B"), value=6, tolerance=0.5).verdict == UNDECIDED
    assert rules.equal_within(paired([0.0]), ("A", "B"), margin=1).verdict == UNDECIDED


def test_undecided_says_whether_it_excludes_the_papers_value():
    """ "undecided in direction, excludes the paper's magnitude" is information (the audit: FedNova +4.71 vs 41.16)."""
    v = rules.direction(paired([1.0, 2.0, 3.0]), ("A", "B"), paper=41.16).overall
    assert v.verdict == UNDECIDED and v.excludes_paper_value is True and v.paper == 41.16
    assert "excludes the paper's +41.16" in v.reason and "leans reproduces" in v.reason
    v = rules.direction(paired([1.0, 2.0, 3.0]), ("A", "B"), paper=2.5).overall
    assert v.excludes_paper_value is False and v.paper_agrees is True
    assert rules.direction(paired([1.0, 2.0, 3.0]), ("A", "B")).overall.excludes_paper_value is None


def test_a_statement_the_papers_own_table_contradicts_is_marked_so():
    v = rules.direction(paired([-2.0, -3.0, -4.0]), ("A", "B"), paper=-1.2).overall
    assert v.verdict == DOES_NOT and v.paper_agrees is False
    assert "the paper's own table contradicts the statement" in v.reason


def test_pairing_is_by_seed_and_only_over_common_seeds():
    f = paired([2.0, 3.0, 4.0])
    extra = pd.DataFrame([{"method": "B", "seed": s, "value": 0.0} for s in (7, 8)])  # B alone at seeds 7, 8
    shuffled = pd.concat([f, extra]).sample(frac=1.0, random_state=1)
    v = rules.direction(shuffled, ("A", "B")).overall
    assert v.n == 3 and v.estimate == pytest.approx(3.0) and v.verdict == REPRODUCES


def test_unpaired_is_welch_by_hand():
    f = pd.DataFrame(
        [{"method": "A", "seed": s, "value": x} for s, x in enumerate([1.0, 2.0, 3.0])]
        + [{"method": "B", "seed": s + 10, "value": 0.0} for s in range(3)]
    )
    # B has no spread: Welch's se is sd_A / sqrt(3) with df 2, the one-sample interval of A
    v = rules.direction(f, ("A", "B"), paired=False).overall
    assert v.low == pytest.approx(2 - T2 / math.sqrt(3), abs=1e-3) and "Welch" in v.reason
    assert rules.direction(f, ("A", "B")).verdict == UNDECIDED  # paired: no common seed
    assert "no seed both have" in rules.direction(f, ("A", "B")).overall.reason


def test_a_run_counted_twice_is_refused():
    f = paired([1.0, 2.0])
    with pytest.raises(ValueError, match="counted twice"):
        rules.direction(pd.concat([f, f.iloc[:1]]), ("A", "B"))


# ------------------------------------------------------------------------------------------------------ best


def _table(gaps_by_setting, seeds=3, noise=0.2, rivals=("FedAvg", "FedProx")):
    """FedEntOpt and rivals per (model, dataset) setting; ``gaps_by_setting[(model, dataset)][rival]``:
    FedEntOpt - rival (pp), each seed perturbed by a fixed +-``noise``."""
    rows = []
    for (model, dataset), gaps in gaps_by_setting.items():
        for s in range(seeds):
            base = 40.0 + 2.0 * s
            rows.append({"model": model, "dataset": dataset, "method": "FedEntOpt", "seed": s, "value": base})
            for i, r in enumerate(rivals):
                wobble = noise * (1 if (s + i) % 2 else -1)
                rows.append(
                    {"model": model, "dataset": dataset, "method": r, "seed": s, "value": base - gaps[r] + wobble}
                )
    return pd.DataFrame(rows)


def test_best_the_multi_setting_bug_of_the_audit():
    """FedEntOpt 5 pp below FedAvg in one (model, dataset) setting and 5 pp above in another: the old claim kept
    one setting per partition and said "reproduces"; the rule judges each setting and the statement misses."""
    f = _table(
        {("lenet5", "cifar10"): {"FedAvg": -5.0, "FedProx": 3.0}, ("vgg11", "cinic10"): {"FedAvg": 5.0, "FedProx": 3.0}}
    )
    j = rules.best(f, "FedEntOpt")
    assert j.verdict == DOES_NOT
    assert j.by_setting() == {("lenet5", "cifar10"): DOES_NOT, ("vgg11", "cinic10"): REPRODUCES}
    miss = j.settings[0]
    assert miss.comparison == "FedEntOpt - FedAvg" and miss.estimate == pytest.approx(-5.0, abs=0.2)
    assert [p.verdict for p in miss.parts] == [DOES_NOT, REPRODUCES]
    assert j.overall.setting_label == "all settings" and "model=lenet5" in j.overall.reason


def test_best_three_verdicts():
    up = {"FedAvg": 3.0, "FedProx": 2.0}
    assert rules.best(_table({("m", "d"): up, ("m", "e"): up}), "FedEntOpt").verdict == REPRODUCES
    # the binding comparison of a pass is the one closest to failing
    assert rules.best(_table({("m", "d"): up}), "FedEntOpt").overall.comparison == "FedEntOpt - FedProx"
    open_ = _table({("m", "d"): {"FedAvg": 3.0, "FedProx": 0.1}})
    j = rules.best(open_, "FedEntOpt")
    assert j.verdict == UNDECIDED and j.overall.comparison == "FedEntOpt - FedProx" and j.overall.leans == REPRODUCES


def test_best_excludes_and_rivals():
    f = _table({("m", "d"): {"FedAvg": 3.0, "FedProx": -4.0}})
    assert rules.best(f, "FedEntOpt").verdict == DOES_NOT
    assert rules.best(f, "FedEntOpt", exclude=("FedProx",)).verdict == REPRODUCES
    assert rules.best(f, "FedEntOpt", rivals=["FedAvg"]).verdict == REPRODUCES
    # a named rival that was not run leaves the statement open, not silently passed
    j = rules.best(f, "FedEntOpt", rivals=["FedAvg", "SCAFFOLD"])
    assert j.verdict == UNDECIDED and "no run of SCAFFOLD" in j.overall.reason


def test_best_against_one_rival_is_direction():
    f = paired([1.0, 2.5, 2.0, 3.0], a="FedEntOpt", b="FedAvg")
    b, d = rules.best(f, "FedEntOpt").overall, rules.direction(f, ("FedEntOpt", "FedAvg")).overall
    assert (b.verdict, b.low, b.high) == (d.verdict, d.low, d.high)


def test_best_a_miss_is_held_at_the_family_level():
    """Of k rival comparisons, a miss claimed from any one interval is corrected (Bonferroni): with 8 rivals an
    interval below 0 at 95 % but not at 99.375 % leaves the statement open; alone it is a miss."""
    diffs = [-1.0, -1.6, -1.3]  # 95 %: -1.3 +- 0.745, below 0; at 1 - 0.05/8: t(0.996875, 2) = 12.6 -> crosses 0
    rivals = [f"R{i}" for i in range(8)]
    rows = []
    for s, d in enumerate(diffs):
        rows.append({"method": "FedEntOpt", "seed": s, "value": 50.0})
        rows += [{"method": r, "seed": s, "value": 50.0 - (d if r == "R0" else 10.0 + s)} for r in rivals]
    f = pd.DataFrame(rows)
    j = rules.best(f, "FedEntOpt")
    assert j.verdict == UNDECIDED and "family level" in j.overall.reason and j.overall.comparison == "FedEntOpt - R0"
    assert j.overall.high < 0  # its 95 % interval is shown, below 0
    assert rules.best(f, "FedEntOpt", rivals=["R0"]).verdict == DOES_NOT


# ------------------------------------------------------------------------------------------------- magnitude


@pytest.mark.parametrize(
    "diffs, kind, value, tolerance, verdict",
    [
        ([45.0, 44.0, 46.0], "over", 40, 0.0, REPRODUCES),  # [42.5, 47.5]
        ([9.0, 10.0, 11.0], "over", 40, 0.0, DOES_NOT),
        ([30.0, 45.0, 60.0], "over", 40, 0.0, UNDECIDED),
        ([6.0, 6.1, 5.9], "about", 6, 0.5, REPRODUCES),  # 6 +- 4.303 * 0.1 / sqrt(3) = [5.752, 6.248] in [5.5, 6.5]
        ([1.0, 2.0, 3.0], "about", 6, 0.5, DOES_NOT),  # [-0.484, 4.484] below 5.5
        ([4.0, 6.0, 8.0], "about", 6, 0.5, UNDECIDED),
        ([1.0, 1.1, 0.9], "under", 2, 0.0, REPRODUCES),
        ([2.0, 2.5, 1.5, 2.0, 2.0], "about", (1, 3), 0.5, REPRODUCES),  # "around 1-3 pp"
    ],
)
def test_magnitude_three_verdicts(diffs, kind, value, tolerance, verdict):
    j = rules.magnitude(paired(diffs), ("A", "B"), value=value, kind=kind, tolerance=tolerance)
    assert j.verdict == verdict, j.overall.reason


def test_magnitude_interval_by_hand_and_a_wide_interval_confirms_nothing():
    v = rules.magnitude(paired([6.0, 6.1, 5.9]), ("A", "B"), value=6, tolerance=rules.rounding("6")).overall
    assert v.low == pytest.approx(6 - T2 * 0.1 / math.sqrt(3), abs=1e-3)
    # the interval contains the paper's 6 but is far wider than its rounding: undecided, not a pass
    v = rules.magnitude(paired([-10.0, 6.0, 22.0]), ("A", "B"), value=6, tolerance=0.5).overall
    assert v.verdict == UNDECIDED and v.excludes_paper_value is False and v.leans == REPRODUCES


def test_magnitude_paper_value_beside_the_stated_number():
    """ "More than 40 %" against the paper's own 41.16 (holds) and against a cell where its own table says 33.66."""
    f = paired([9.0, 10.0, 11.0])
    v = rules.magnitude(f, ("A", "B"), value=40, kind="over", paper=41.16).overall
    assert v.verdict == DOES_NOT and v.excludes_paper_value is True and v.paper_agrees is True
    assert rules.magnitude(f, ("A", "B"), value=40, kind="over", paper=33.66).overall.paper_agrees is False


def test_magnitude_refuses_a_point_without_a_tolerance():
    with pytest.raises(ValueError, match="tolerance"):
        rules.magnitude(paired([1.0, 2.0]), ("A", "B"), value=6)
    with pytest.raises(ValueError, match="kind"):
        rules.magnitude(paired([1.0, 2.0]), ("A", "B"), value=6, kind="near", tolerance=1)


def test_rounding():
    assert rules.rounding("6") == 0.5 and rules.rounding("41.16") == pytest.approx(0.005)
    assert rules.rounding("0.95 %") == pytest.approx(0.005)


# ---------------------------------------------------------------------------------------------- equal_within


@pytest.mark.parametrize(
    "diffs, verdict",
    [
        ([0.1, -0.1, 0.0], REPRODUCES),  # [-0.248, 0.248] inside +-1
        ([3.0, 3.2, 2.8], DOES_NOT),  # [2.752, 3.248] beyond +1
        ([-3.0, -3.2, -2.8], DOES_NOT),  # below -1: the same margin on both sides
        ([0.5, 1.5, 1.0], UNDECIDED),  # [-0.242, 2.242] crosses +1
    ],
)
def test_equal_within_three_verdicts(diffs, verdict):
    v = rules.equal_within(paired(diffs), ("A", "B"), margin=1.0).overall
    assert v.verdict == verdict
    lo, hi = by_hand(diffs, T2)
    assert v.low == pytest.approx(lo, abs=1e-3) and v.high == pytest.approx(hi, abs=1e-3)


def test_equal_within_needs_a_margin():
    with pytest.raises(ValueError, match="margin"):
        rules.equal_within(paired([0.0, 0.1]), ("A", "B"), margin=0)


# ----------------------------------------------------------------------------------------------------- exact


def test_exact_three_verdicts():
    f = pd.DataFrame({"dataset": ["CIFAR-10", "CIFAR-100"], "value": [0.04, 0.4], "paper": [0.04, 0.4]})
    assert rules.exact(f, "paper").verdict == REPRODUCES
    g = f.assign(value=[0.04, 0.41])
    j = rules.exact(g, "paper")
    assert j.verdict == DOES_NOT and j.by_setting() == {("CIFAR-10",): REPRODUCES, ("CIFAR-100",): DOES_NOT}
    assert rules.exact(g, "paper", tolerance=0.01 + 1e-12).verdict == REPRODUCES
    assert rules.exact(f.assign(value=[0.04, np.nan]), "paper").verdict == UNDECIDED


def test_exact_counts_per_seed():
    """A count that must be 0 at every seed (every client picked): one seed's 1 is a miss."""
    f = pd.DataFrame({"partition": ["C=2"] * 3 + ["Dir(0.1)"] * 3, "seed": [0, 1, 2] * 2, "value": [0, 0, 1, 0, 0, 0]})
    j = rules.exact(f, 0)
    assert j.by_setting() == {("C=2",): DOES_NOT, ("Dir(0.1)",): REPRODUCES} and j.verdict == DOES_NOT
    assert (j.settings[0].low, j.settings[0].high, j.settings[0].n) == (0.0, 1.0, 3)
    assert rules.exact(f, 0, combine="some").verdict == REPRODUCES


# ------------------------------------------------------------------------------------ settings never pooled


def _multi():
    """Three settings (model, dataset, clients_per_round) with different truths: A - B = +5, -5 and 0.3 +- 1."""
    return pd.concat(
        [
            paired([5.0, 5.2, 4.8], model="lenet5", dataset="cifar10", clients_per_round=10),
            paired([-5.0, -5.2, -4.8], model="vgg11", dataset="cifar10", clients_per_round=10),
            paired([0.3, 1.3, -0.7], model="lenet5", dataset="cifar10", clients_per_round=4),
        ],
        ignore_index=True,
    )


S1, S2, S3 = ("lenet5", "cifar10", 10), ("vgg11", "cifar10", 10), ("lenet5", "cifar10", 4)


def _counts(f):
    """One count per seed in each setting of ``f`` (for exact): 0 0 0, 0 0 1 and 0 NaN 0."""
    out = f[f["method"] == "A"].drop(columns="method").reset_index(drop=True)
    return out.assign(value=[0, 0, 0, 0, 0, 1, 0, np.nan, 0])


@pytest.mark.parametrize(
    "judge, per_setting, overall",
    [
        (lambda f: rules.direction(f, ("A", "B")), {S1: REPRODUCES, S2: DOES_NOT, S3: UNDECIDED}, DOES_NOT),
        (
            lambda f: rules.direction(f, ("A", "B"), combine="some"),
            {S1: REPRODUCES, S2: DOES_NOT, S3: UNDECIDED},
            REPRODUCES,
        ),
        (lambda f: rules.best(f, "A"), {S1: REPRODUCES, S2: DOES_NOT, S3: UNDECIDED}, DOES_NOT),
        (lambda f: rules.best(f, "B"), {S1: DOES_NOT, S2: REPRODUCES, S3: UNDECIDED}, DOES_NOT),
        (  # S3's 95 % interval [-2.18, 2.78] lies below 4.5, but not at the family level 1 - 0.05/3: [-4.12, 4.72]
            lambda f: rules.magnitude(f, ("A", "B"), value=5, tolerance=0.5),
            {S1: REPRODUCES, S2: DOES_NOT, S3: UNDECIDED},
            DOES_NOT,
        ),
        (
            lambda f: rules.equal_within(f, ("A", "B"), margin=2.5),
            {S1: DOES_NOT, S2: DOES_NOT, S3: UNDECIDED},
            DOES_NOT,
        ),
        (
            lambda f: rules.equal_within(f, ("A", "B"), margin=6.0),
            {S1: REPRODUCES, S2: REPRODUCES, S3: REPRODUCES},
            REPRODUCES,
        ),
        (
            lambda f: rules.exact(_counts(f), 0),  # a count that must be 0: 0 0 0 / 0 0 1 / 0 nan 0
            {S1: REPRODUCES, S2: DOES_NOT, S3: UNDECIDED},
            DOES_NOT,
        ),
        (  # below -4: S3's interval lies above -4 at 95 % but its family-level one [-4.12, 4.72] does not
            lambda f: rules.direction(f, ("A", "B"), side=-1, threshold=-4.0),
            {S1: DOES_NOT, S2: REPRODUCES, S3: UNDECIDED},
            DOES_NOT,
        ),
        (  # non-inferiority: a rise is no miss
            lambda f: rules.equal_within(f, ("A", "B"), margin=2.5, one_sided="lower"),
            {S1: REPRODUCES, S2: DOES_NOT, S3: REPRODUCES},
            DOES_NOT,
        ),
        (  # non-superiority: S3's 2.78 crosses +2.5
            lambda f: rules.equal_within(f, ("A", "B"), margin=2.5, one_sided="upper"),
            {S1: DOES_NOT, S2: REPRODUCES, S3: UNDECIDED},
            DOES_NOT,
        ),
        (  # "some comparison in every setting": A above B or B above A, per setting
            lambda f: rules.direction(f, [("A", "B"), ("B", "A")], combine=("some", "every")),
            {S1: REPRODUCES, S2: REPRODUCES, S3: UNDECIDED},
            UNDECIDED,
        ),
    ],
)
def test_each_rule_judges_each_setting(judge, per_setting, overall):
    j = judge(_multi())
    assert j.by_setting() == per_setting
    assert j.verdict == overall
    assert [s.setting_dict["clients_per_round"] for s in j.settings] == [10, 10, 4]
    assert len(j.frame()) == 1 + len(j.settings) + len(j.comparisons())


def test_a_combine_that_is_no_word_or_pair_is_refused():
    with pytest.raises(
        ValueError, match=r"^parameter 'combine': got \('some', 'most'\); allowed: 'every', 'some' or a pair of them\.$"
    ):
        rules.direction(_multi(), ("A", "B"), combine=("some", "most"))
    with pytest.raises(ValueError, match=r"^parameter 'one_sided': got 'both'; allowed: None, 'lower', 'upper'\.$"):
        rules.equal_within(_multi(), ("A", "B"), margin=1.0, one_sided="both")


def _rivals(**gaps):
    """Runs of A and of each rival at seeds 0..2, A - rival seed by seed as given."""
    a = {s: 50.0 + 3.0 * math.sin(s) for s in range(3)}
    rows = [{"method": "A", "seed": s, "value": v} for s, v in a.items()]
    rows += [{"method": m, "seed": s, "value": a[s] - g} for m, d in gaps.items() for s, g in enumerate(d)]
    return pd.DataFrame(rows)


def test_at_least_k_of_the_comparisons():
    """ "Several" baselines: two rivals clearly below A and one clearly above it."""
    f = _rivals(B=[5.0, 5.2, 4.8], C=[3.0, 3.1, 2.9], D=[-6.0, -6.1, -5.9])
    j = rules.direction(f, [("A", m) for m in "BCD"])
    assert [p.verdict for p in j.settings[0].parts] == [REPRODUCES, REPRODUCES, DOES_NOT]
    assert rules.at_least(j, 2).verdict == REPRODUCES
    assert rules.at_least(j, 3).verdict == DOES_NOT  # D can no longer reproduce: fewer than 3 can
    g = _rivals(B=[5.0, 5.2, 4.8], C=[0.3, 1.3, -0.7], D=[-6.0, -6.1, -5.9])
    assert rules.at_least(rules.direction(g, [("A", m) for m in "BCD"]), 2).verdict == UNDECIDED
    with pytest.raises(ValueError, match=r"^parameter 'k': got 0; allowed: an integer >= 1\.$"):
        rules.at_least(j, 0)


def test_an_undecided_at_least_shows_the_comparison_that_would_make_the_kth_pass():
    """B passes; C leans to a pass and D to a miss, both open: "at least 2" needs C, so it leans to a pass."""
    f = _rivals(B=[5.0, 5.2, 4.8], C=[3.0, -1.0, 4.0], D=[-0.5, 1.0, -2.0])
    j = rules.direction(f, [("A", m) for m in "BCD"])
    assert [p.verdict for p in j.settings[0].parts] == [REPRODUCES, UNDECIDED, UNDECIDED]
    two = rules.at_least(j, 2)
    assert two.verdict == UNDECIDED
    assert two.overall.comparison == "A - C" and two.overall.estimate == pytest.approx(2.0)
    assert two.overall.leans == REPRODUCES
    three = rules.at_least(j, 3)  # needs C and D: D, the weaker, decides the side
    assert three.overall.comparison == "A - D" and three.overall.leans == DOES_NOT


def test_join_combines_the_parts_of_a_statement():
    a = rules.direction(paired([5.0, 5.2, 4.8], model="lenet5"), ("A", "B"))
    b = rules.direction(paired([-5.0, -5.2, -4.8], model="vgg11"), ("A", "B"))
    j = rules.join([a, b])
    assert j.verdict == DOES_NOT and j.by_setting() == {("lenet5",): REPRODUCES, ("vgg11",): DOES_NOT}
    assert rules.join([a, b], "some").verdict == REPRODUCES


@pytest.mark.parametrize(
    "relation, bound, verdict",
    [
        ("at_least", 100.0, DOES_NOT),  # the smallest row, 31, lies below 100
        ("at_least", 31.0, REPRODUCES),
        ("above", 31.0, DOES_NOT),  # strictly
        ("at_most", 9200.0, REPRODUCES),
        ("below", 9200.0, DOES_NOT),
    ],
)
def test_exact_against_a_bound(relation, bound, verdict):
    f = pd.DataFrame({"value": [31.0, 62.0, 9200.0]})
    assert rules.exact(f, bound, relation=relation).verdict == verdict
    with pytest.raises(ValueError, match=r"^parameter 'relation': got 'near'; allowed: 'equal', "):
        rules.exact(f, bound, relation="near")


def test_paper_values_per_setting():
    paper = {"lenet5": 6.0, "vgg11": -1.0}
    j = rules.direction(_multi(), ("A", "B"), paper=lambda s, a, b: paper[s["model"]])
    assert [s.paper_agrees for s in j.settings] == [True, False, True]
    assert j.overall.paper_agrees is False  # "every": one setting where the paper's own table says otherwise
    assert "contradicts the statement in 1 of 3 settings" in j.overall.reason
    assert rules.direction(
        _multi(), ("A", "B"), combine="some", paper=lambda s, a, b: paper[s["model"]]
    ).overall.paper_agrees


# -------------------------------------------------------------------------------------------------- tidying


def _stored():
    rows, meta = [], []
    for i, (model, part, method, seed, acc) in enumerate(
        [
            ("lenet5", "C=2", "FedAvg", 0, 0.50),
            ("lenet5", "C=2", "FedEntOpt", 0, 0.55),
            ("vgg11", "C=2", "FedAvg", 0, 0.60),
            ("vgg11", "C=2", "FedEntOpt", 0, 0.58),
        ]
    ):
        key = f"k{i}"
        label = {"method": method, "model": model, "partition": part, "seed": seed}
        for r in range(0, 13):
            rows.append({"key": key, **label, "round": r, "test_accuracy": acc if r > 2 else 0.1})
        meta.append({**label, "key": key, "git_commit": "abc", "device": "cpu", "dataset": "cifar10", "rounds": 12})
    return StoredGroup("paper", "table1", pd.DataFrame(rows), pd.DataFrame(meta))


def test_from_group_keeps_every_setting():
    t = rules.from_group(_stored(), last=10)
    assert list(t.columns) == ["model", "dataset", "partition", "method", "seed", "value"]
    assert len(t) == 4 and set(t["model"]) == {"lenet5", "vgg11"} and set(t["dataset"]) == {"cifar10"}
    assert t.set_index(["model", "method"])["value"].to_dict() == pytest.approx(
        {
            ("lenet5", "FedAvg"): 50.0,
            ("lenet5", "FedEntOpt"): 55.0,
            ("vgg11", "FedAvg"): 60.0,
            ("vgg11", "FedEntOpt"): 58.0,
        }
    )
    s = _stored()
    s.meta.loc[0, "rounds"] = 300  # a coordinate that differs between runs is a setting column
    assert "rounds" in rules.from_group(s).columns


def test_tidy_renames_and_drops_provenance():
    per_run = pd.DataFrame(
        {"key": ["a", "b"], "partition": ["C=2"] * 2, "method": ["X", "Y"], "seed": [0, 0], "accuracy": [1.0, 2.0]}
    )
    t = rules.tidy(per_run)
    assert list(t.columns) == ["partition", "method", "seed", "value"]
    with pytest.raises(ValueError, match="counted twice"):
        rules.tidy(pd.concat([per_run, per_run]))


def test_from_group_matches_the_old_per_run_statistic():
    from repro import significance
    from repro.results import load_group

    stored = load_group("subset", "table1")
    if stored.empty:
        pytest.skip("no stored subset runs")
    old = significance.per_run_final(stored.frame).set_index(["partition", "method", "seed"])["accuracy"]
    new = rules.from_group(stored).set_index(["partition", "method", "seed"])["value"]
    assert new.sort_index().to_numpy() == pytest.approx(old.sort_index().to_numpy())


# --------------------------------------------------------------------------------------------------- symmetry


diffs_st = st.lists(st.floats(-20, 20, allow_nan=False).map(lambda x: round(x, 3)), min_size=1, max_size=6)
_SWAP = {REPRODUCES: DOES_NOT, DOES_NOT: REPRODUCES, UNDECIDED: UNDECIDED}


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(diffs_st, st.sampled_from([1, -1]))
def test_direction_the_same_for_a_pass_and_a_miss(diffs, side):
    f, neg = paired(diffs), paired([-d for d in diffs])
    v = rules.direction(f, ("A", "B"), side=side).verdict
    assert rules.direction(f, ("A", "B"), side=-side).verdict == _SWAP[v]  # the other side: pass <-> miss
    assert rules.direction(neg, ("A", "B"), side=side).verdict == _SWAP[v]  # the data's sign: pass <-> miss
    assert rules.direction(neg, ("A", "B"), side=-side).verdict == v  # both: the same verdict


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(diffs_st, st.floats(-10, 10).map(lambda x: round(x, 2)), st.floats(0.1, 5).map(lambda x: round(x, 2)))
def test_magnitude_and_equal_within_mirror(diffs, value, margin):
    f, neg = paired(diffs), paired([-d for d in diffs])
    over = rules.magnitude(f, ("A", "B"), value=value, kind="over").verdict
    assert rules.magnitude(neg, ("A", "B"), value=-value, kind="under").verdict == over
    about = rules.magnitude(f, ("A", "B"), value=value, tolerance=margin).verdict
    assert rules.magnitude(neg, ("A", "B"), value=-value, tolerance=margin).verdict == about
    assert (
        rules.equal_within(f, ("A", "B"), margin=margin).verdict
        == rules.equal_within(neg, ("A", "B"), margin=margin).verdict
    )


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(st.lists(diffs_st.filter(lambda d: len(d) >= 2), min_size=1, max_size=4))
def test_every_and_some_are_each_others_negation(groups):
    """ "A above B in every setting" reproduces exactly when "A below B in some setting" does not, and the other
    way round: the family correction sits on the miss of "every" and on the pass of "some"."""
    f = pd.concat([paired(d, partition=f"p{i}") for i, d in enumerate(groups)], ignore_index=True)
    every = rules.direction(f, ("A", "B"), side=1, combine="every").verdict
    some = rules.direction(f, ("A", "B"), side=-1, combine="some").verdict
    assert some == _SWAP[every]


def test_compare_another_column_than_method():
    """Table VI's accuracy: Q = 75 % below Q = 50 % under Dir(0.1), the buffer size compared seed by seed."""
    f = paired([-2.0, -3.0, -2.5], a=75, b=50, partition="Dir(0.1)").rename(columns={"method": "buffer_pct"})
    assert rules.direction(f, (75, 50), side=-1, compare="buffer_pct").verdict == REPRODUCES
