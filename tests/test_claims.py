"""The paper's claims at the book's parameters: a change that breaks a result breaks the build.

Every test reads the parameters the book runs its page with (the notebook's defaults, then the page's entry in
runs.yaml), computes what the page computes (through the same fedlib functions) and asserts each claim of
:mod:`repro.claims` at its stated tolerance; claims we expect to miss assert the documented explanation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from repro import claims, plateau, quantities, results, scorecard, tiers

ROOT = Path(__file__).resolve().parents[1]


def book_parameters(name: str) -> dict:
    """The parameters of page ``name`` as the book runs it: notebook defaults updated by runs.yaml."""
    return scorecard.book_parameters(name)


def assert_claims(found):
    assert found, "no claim was computed"
    wrong = [
        f"{c.key}: ours {c.ours:.4f}, paper {c.paper}, {c.tolerance}, verdict {c.verdict!r}, "
        f"documented {claims.expected_verdict(c.key)!r}"
        for c in found
        if not c.as_expected
    ]
    assert not wrong, "claims that changed:\n" + "\n".join(wrong)


#: label-only page -> the claims its table shows, from the studies it computes (quantities.label_study).
LABEL_CLAIMS = {
    "entropy_trace": lambda s: claims.fig1(s["traces"], s["num_classes"]),
    "buffer_diversity": lambda s: claims.table6_hnorm(s["table"]),
    "label_coverage": lambda s: claims.coverage(s["table"]) + claims.fine_label_coverage(s["fine"]),
    "communication_cost": lambda s: claims.table5(s["table"], s["rebuilt"], s["decimals"]),
    "lying_clients": lambda s: claims.adversary_buffer(s["study"]),
}


def label_page(page):
    """The claims of a label-only page at the book's parameters, from the studies the scorecard judges."""
    return {c.key: c for c in LABEL_CLAIMS[page](quantities.label_study(page))}


def test_book_parameters_reads_runs_yaml_over_notebook_defaults():
    p = book_parameters("entropy_trace")
    assert p["partition"] == "C=2" and p["num_clients"] == 100 and p["num_selected"] == 10
    assert p["dc_target"] == "balanced"  # a notebook default that runs.yaml does not set
    assert scorecard.book_parameters("entropy_trace", smoke=True)["seeds"] == [0]


@pytest.mark.slow
def test_fig1_fedentopt_above_log2_9_in_every_round_and_above_random():
    found = label_page("entropy_trace")
    assert_claims(list(found.values()))
    assert found["entropy_trace/above_threshold"].ours == 1.0
    assert found["entropy_trace/above_random_every_round"].ours == 1.0


@pytest.mark.slow
def test_table6_hnorm_every_cell_judged_in_units_of_the_standard_error():
    found = label_page("buffer_diversity")
    assert sum("/Q" in k for k in found) == 16
    assert_claims(list(found.values()))


@pytest.mark.slow
def test_coverage_cifar10_judged_by_binomial_error():
    found = label_page("label_coverage")
    assert {k.split("/")[1] for k in found} == {"CIFAR-10", "CIFAR-100"}
    assert_claims(list(found.values()))
    # all four CIFAR-10 cells lie above the paper's: a systematic difference, named as findings where it is
    # beyond 1.96 standard errors
    cells = [c for k, c in found.items() if "/CIFAR-10/" in k]
    assert len(cells) == 4


@pytest.mark.slow
def test_coverage_cifar100_explained_by_fine_labels():
    """Evidence of the expected difference label_coverage/CIFAR-100/zero_everywhere."""
    found = label_page("label_coverage")
    zero = found["label_coverage/CIFAR-100/zero_everywhere"]
    assert zero.verdict == "does not reproduce" and not zero.expected
    assert found["label_coverage/CIFAR-100/fine_labels"].verdict == "reproduces"


@pytest.mark.slow
def test_table5_byte_counts():
    from repro.communication import table_v

    table = table_v()
    assert (table["labels_bytes"] == 4 * table["C"] * table["K"]).all()
    assert_claims(list(label_page("communication_cost").values()))


@pytest.mark.slow
def test_table5_sizes_are_nominal_counts_not_fedlib_models():
    """Evidence of communication_cost/fedlib_model_sizes: the nominal counts give every printed size."""
    found = label_page("communication_cost")
    assert found["communication_cost/model_sizes"].verdict == "reproduces"
    assert found["communication_cost/fedlib_model_sizes"].verdict == "does not reproduce"


@pytest.mark.slow
def test_table5_the_papers_own_ratios_are_under_two_orders_for_lenet():
    """Evidence of communication_cost/orders_of_magnitude: the paper's own Table V prints ratios below 100."""
    from repro import paper_values as paper

    lenet = [v[2] for k, v in paper.TABLE_V.items() if k[3] == "LeNet-5"]
    assert min(lenet) < 100 and min(v[2] for v in paper.TABLE_V.values()) == min(lenet)
    ours = label_page("communication_cost")["communication_cost/orders_of_magnitude"]
    assert ours.ours < 100 and abs(ours.ours / min(lenet) - 1) < 0.01  # ours is the paper's, rounded


def test_every_expected_difference_has_evidence_that_a_test_asserts():
    assert set(claims.EXPECTED_DIFFERENCES) == set(claims.EVIDENCE)
    for key, test in claims.EVIDENCE.items():
        assert callable(globals().get(test)), f"{key}: no test {test} in tests/test_claims.py"
    assert not set(claims.EXPECTED_DIFFERENCES) & set(claims.FINDINGS)


@pytest.mark.slow
def test_subset_tier_trains_past_the_measured_plateau():
    """repro.tiers: the subset tier's round count is at least every FedAvg/FedEntOpt plateau round +
    10."""
    stored = results.load_or_run("subset", "table1", None, run_missing=False)
    if stored.empty:
        pytest.skip("no stored subset table1 runs")
    pair = stored.frame[stored.frame["method"].isin(["FedAvg", "FedEntOpt"])]
    table = plateau.plateau_table(pair, min_round=150, window=10)
    rounds = tiers.get_tier("subset").base["rounds"]
    assert len(table) == 4 and (table["last_round"] == rounds).all()
    assert table["plateau_round"].notna().all(), table
    assert (table["plateau_round"] + 10 <= rounds).all(), table


# ------------------------------------------------------------------------------ the claim machinery itself


def _t6(ours, paper, ours_std=0.01, paper_std=0.01, n=3):
    import pandas as pd

    k = len(ours)
    return pd.DataFrame(
        {
            "dataset": ["X"] * k,
            "partition": ["C=2"] * k,
            "buffer_pct": [0, 25, 50, 75][:k],
            "hnorm_mean": ours,
            "hnorm_std": [ours_std] * k,
            "n_seeds": [n] * k,
            "paper_hnorm_mean": paper,
            "paper_hnorm_std": [paper_std] * k,
            "never_picked": [0] * k,
        }
    )


def test_a_claim_that_misses_without_a_documented_reason_fails():
    # SE of the difference: hypot(0.01 / sqrt 3, 0.01 / sqrt 3) = 0.0082; 1.96 SE = 0.016
    found = claims.table6_hnorm(_t6([0.70, 0.80], [0.71, 0.90]))
    by_key = {c.key: c for c in found}
    assert by_key["buffer_diversity/X/C=2/Q0"].verdict == "reproduces"  # 0.01 off: within 1.96 SE
    assert by_key["buffer_diversity/X/C=2/Q25"].verdict == "does not reproduce"  # 0.10 off
    assert not claims.all_hold(found)
    with pytest.raises(AssertionError, match="Q25"):
        assert_claims(found)
    shown = claims.frame(found)
    assert list(shown.columns) == ["claim", "paper", "ours", "tolerance", "verdict", "expected", "note"]
    assert shown["verdict"].tolist()[:2] == ["reproduces", "does not reproduce"]


def test_the_same_standard_error_judges_a_pass_and_a_miss():
    # 0.015 off passes, 0.017 off misses, whichever side of the paper's value
    for off, verdict in (
        (0.015, "reproduces"),
        (-0.015, "reproduces"),
        (0.017, "does not reproduce"),
        (-0.017, "does not reproduce"),
    ):
        (cell,) = [c for c in claims.table6_hnorm(_t6([0.5 + off], [0.5])) if c.key.endswith("Q0")]
        assert cell.verdict == verdict, off
    # a tighter spread makes the same gap a miss: the tolerance is in units of the measured spread
    (cell,) = [c for c in claims.table6_hnorm(_t6([0.51], [0.5], 0.001, 0.001)) if c.key.endswith("Q0")]
    assert cell.verdict == "does not reproduce"


def test_a_systematic_offset_over_the_cells_is_named():
    import pandas as pd

    cells = pd.concat([_t6([0.5 - 0.005] * 4, [0.5] * 4).assign(partition=p) for p in ("A", "B", "C")])
    found = {c.key: c for c in claims.table6_hnorm(cells)}
    assert found["buffer_diversity/no_offset"].verdict == "does not reproduce"  # 12 of 12 below: p = 0.0005
    cells["hnorm_mean"] = [0.505, 0.495] * 6
    found = {c.key: c for c in claims.table6_hnorm(cells)}
    assert found["buffer_diversity/no_offset"].verdict == "reproduces"


def test_a_documented_difference_is_asserted_as_a_difference(monkeypatch):
    monkeypatch.setitem(claims.EXPECTED_DIFFERENCES, "buffer_diversity/X/C=2/Q0", "a stated reason")
    (only,) = [c for c in claims.table6_hnorm(_t6([0.5], [0.9])) if c.key.endswith("Q0")]
    assert only.verdict == "does not reproduce" and not only.expected and only.as_expected
    assert claims.frame([only])["note"].tolist() == ["a stated reason"]
    # the paper's value now: the documented difference is gone, which must be noticed
    (only,) = [c for c in claims.table6_hnorm(_t6([0.9], [0.9])) if c.key.endswith("Q0")]
    assert only.holds and not only.as_expected


def test_an_undecided_claim_must_be_documented_as_undecided(monkeypatch):
    import pandas as pd

    paired = pd.DataFrame(
        {
            "partition": ["C=2"],
            "a": ["FedEntOpt+FedProx"],
            "b": ["FedProx"],
            "n": [3],
            "mean_diff": [1.0],
            "std_diff": [2.0],
            "paper_change": [0.85],
        }
    )
    (c,) = claims.table2_changes(paired, "t")
    assert c.verdict == "undecided" and not c.as_expected  # t-interval 1 ± 4.97 straddles 0
    monkeypatch.setitem(claims.UNDECIDED, "t:table2/*", "few seeds")
    assert c.as_expected and claims.frame([c])["note"].tolist() == ["few seeds"]
    paired["std_diff"] = 0.2  # 1 ± 0.50: above 0, the paper's side
    assert claims.table2_changes(paired, "t")[0].verdict == "reproduces"
    paired["mean_diff"] = -1.0
    assert claims.table2_changes(paired, "t")[0].verdict == "does not reproduce"


def test_best_means_above_every_method_seed_by_seed():
    import pandas as pd

    def best(gaps):  # FedEntOpt minus each method: (mean, std, n)
        paired = pd.DataFrame(
            [{"partition": "C=2", "b": m, "mean_diff": g[0], "std_diff": g[1], "n": g[2]} for m, g in gaps.items()]
        )
        return next(c for c in claims.table1_best(paired, "t") if c.key.endswith("best"))

    assert best({"FedAvg": (3.0, 0.5, 3), "FedLC": (2.0, 0.5, 3)}).verdict == "reproduces"
    assert best({"FedAvg": (3.0, 0.5, 3), "FedLC": (-2.0, 0.5, 3)}).verdict == "does not reproduce"
    assert best({"FedAvg": (3.0, 0.5, 3), "FedLC": (0.3, 0.5, 3)}).verdict == "undecided"
    assert best({"FedAvg": (3.0, 0.0, 1)}).verdict == "undecided"  # one seed: no interval
    assert best({"FedAvg": (3.0, 0.5, 3), "FedLC": (0.3, 0.5, 3)}).ours == pytest.approx(0.3)


def test_dp_matches_inside_the_papers_own_dp_spread():
    import pandas as pd

    def dp(mean, std):
        paired = pd.DataFrame(
            {"partition": ["C=2"], "b": ["FedEntOpt (DP)"], "mean_diff": [mean], "std_diff": [std], "n": [5]}
        )
        return claims.table1_best(paired, "t")[0].verdict

    assert dp(0.1, 0.2) == "reproduces" and dp(3.0, 0.2) == "does not reproduce" and dp(0.5, 1.0) == "undecided"


def test_dp_above_several_baselines_and_sometimes_above_the_non_private_variant():
    import pandas as pd

    acc = {"FedEntOpt (DP)": 50.0, "FedEntOpt": 49.0, "FedAvg": 45.0, "FedProx": 44.0, "KL": 30.0, "FedLC": 52.0}
    noise = {0: 0.0, 1: 0.3, 2: -0.2}
    per_run = pd.DataFrame(
        [
            {"partition": "C=2", "method": m, "seed": s, "accuracy": a + (noise[s] if m == "FedEntOpt (DP)" else 0.0)}
            for m, a in acc.items()
            for s in noise
        ]
    )
    found = {c.key: c for c in claims.table1(per_run, "t")}
    above = found["t:table1/C=2/dp_above_baselines"]
    assert above.verdict == "reproduces" and above.ours == 3  # FedAvg, FedProx, KL; FedLC is above it
    assert found["t:table1/dp_sometimes_higher"].verdict == "reproduces"  # +1 pp, interval [0.38, 1.62]
    per_run.loc[per_run["method"] == "KL", "accuracy"] = 60.0  # now only two baselines below: "several" fails
    assert {c.key: c for c in claims.table1(per_run, "t")}[
        "t:table1/C=2/dp_above_baselines"
    ].verdict == "does not reproduce"


def test_races_count_the_rounds_each_method_needs_for_the_others_final_accuracy():
    import pandas as pd

    from repro import significance

    rounds = np.arange(1, 7)
    frame = pd.concat(
        [
            pd.DataFrame(
                {
                    "partition": "C=2",
                    "method": "FedEntOpt",
                    "seed": 0,
                    "round": rounds,
                    "test_accuracy": [0.5, 0.6, 0.6, 0.6, 0.6, 0.6],
                }
            ),
            pd.DataFrame(
                {
                    "partition": "C=2",
                    "method": "FedAvg",
                    "seed": 0,
                    "round": rounds,
                    "test_accuracy": [0.1, 0.2, 0.3, 0.4, 0.5, 0.5],
                }
            ),
            pd.DataFrame(
                {
                    "partition": "C=2",
                    "method": "FedLC",
                    "seed": 0,
                    "round": rounds,
                    "test_accuracy": [0.1, 0.2, 0.3, 0.4, 0.5, 0.9],
                }
            ),
        ]
    )
    r = significance.races(frame, window=1).set_index("method")
    assert (r.loc["FedAvg", "rounds_method"], r.loc["FedAvg", "rounds_reference"]) == (5, 1)
    assert r.loc["FedAvg", "saved"] == 4
    assert (r.loc["FedLC", "rounds_method"], r.loc["FedLC", "rounds_reference"]) == (6, 7)  # never: 6 + 1
    (c,) = claims.faster_than_every_method(r.reset_index(), "t")
    assert c.verdict == "undecided"  # one seed


def test_coverage_judged_in_binomial_standard_errors():
    import pandas as pd

    def cell(ours, paper, draws=1500):
        t = pd.DataFrame(
            {
                "dataset": ["X"],
                "num_clients": [150],
                "num_selected": [3],
                "random_coverage": [ours],
                "draws": [draws],
                "paper_probability": [paper],
            }
        )
        return claims.coverage(t)[0]

    # SE = hypot(sqrt(.07 .93 / 1500), sqrt(.07 .93 / 500)) = 0.0132
    assert cell(0.09, 0.07).verdict == "reproduces" and cell(0.05, 0.07).verdict == "reproduces"
    assert cell(0.12, 0.07).verdict == "does not reproduce" and cell(0.02, 0.07).verdict == "does not reproduce"


def test_fig1_claim_fails_when_one_round_dips_below_the_threshold():
    import pandas as pd

    rounds = np.arange(1, 6)
    traces = pd.concat(
        [
            pd.DataFrame({"method": "FedEntOpt", "seed": s, "round": rounds, "entropy": [3.3, 3.3, 3.1, 3.3, 3.3]})
            for s in (0, 1)
        ]
        + [
            pd.DataFrame({"method": "Random", "seed": s, "round": rounds, "entropy": [3.0, 2.6, 3.0, 2.5, 3.0]})
            for s in (0, 1)
        ]
    )
    found = {c.key.split("/")[1]: c for c in claims.fig1(traces, 10)}
    assert found["above_threshold"].ours == pytest.approx(0.8) and not found["above_threshold"].holds
    assert found["above_random_every_round"].holds and found["random_below"].verdict == "reproduces"
    assert found["low_variance"].verdict == "reproduces"  # std 0.08 against 0.24 at both seeds


def test_a_reason_shared_by_several_claims_is_printed_once(monkeypatch):
    keys = ["t:x/a", "t:x/b", "t:x/c"]
    for k in keys[:2]:
        monkeypatch.setitem(claims.EXPECTED_DIFFERENCES, k, "one shared reason")
    found = [claims.Claim(k, "c", "p", 0.0, "tol", False) for k in keys]
    assert claims.frame(found)["note"].tolist() == ["one shared reason", "as row 0", ""]


def test_adversary_buffer_by_hand():
    """One liar's share of 10 rounds at Q = 0 and Q = 5 over three seeds: drops 0.5, 0.4, 0.6 -> mean 0.5, above 0;
    equal shares -> std 0 at 0: decided, does not hold; rows of other threats, defences or liar numbers are ignored."""
    rows = []
    for seed, (lo, hi) in enumerate([(8, 3), (7, 3), (9, 3)]):
        for q, liar_max in ((0, lo), (5, hi)):
            rows.append(
                dict(
                    partition="C=2",
                    Q=q,
                    threat="uniform",
                    defence="none",
                    seed=seed,
                    num_liars=1,
                    num_rounds=10,
                    liar_max=liar_max,
                )
            )
            rows.append(
                dict(
                    partition="Dir(0.1)",
                    Q=q,
                    threat="uniform",
                    defence="none",
                    seed=seed,
                    num_liars=1,
                    num_rounds=10,
                    liar_max=4,
                )
            )
            rows.append(
                dict(
                    partition="C=2",
                    Q=q,
                    threat="rarest",
                    defence="none",
                    seed=seed,
                    num_liars=1,
                    num_rounds=10,
                    liar_max=0,
                )
            )
            rows.append(
                dict(
                    partition="C=2",
                    Q=q,
                    threat="uniform",
                    defence="defence",
                    seed=seed,
                    num_liars=10,
                    num_rounds=10,
                    liar_max=10,
                )
            )
    found = {c.key: c for c in claims.adversary_buffer(pd.DataFrame(rows))}
    c2 = found["lying_clients/C=2/buffer_reduces_liar_share"]
    dir01 = found["lying_clients/Dir(0.1)/buffer_reduces_liar_share"]
    assert len(found) == 2 and c2.ours == pytest.approx(0.5) and c2.verdict == "reproduces"
    assert dir01.ours == 0 and dir01.verdict == "does not reproduce"
    with pytest.raises(ValueError, match="no row of one uniform liar without a defence"):
        claims.adversary_buffer(pd.DataFrame(rows[2:3]))


@pytest.mark.slow
def test_the_lying_clients_claims_reproduce_at_the_book_parameters():
    found = label_page("lying_clients")
    assert sorted(found) == [
        "lying_clients/C=2/buffer_reduces_liar_share",
        "lying_clients/Dir(0.1)/buffer_reduces_liar_share",
    ]
    assert all(c.verdict == "reproduces" and c.ours > 0.5 for c in found.values())
