"""repro.quantities: what each statement's rule is applied to: the paper's own tables as frames, the
stand-in runs the dry run walks, and the label-only quantities worked by hand on small federations."""

import numpy as np
import pandas as pd
import pytest

from fedlib.label_only.simulate import SelectionTrace
from repro import label_studies, paper_values, quantities, rules, statements, tiers


@pytest.fixture(scope="module")
def table():
    return statements.load_table()


def test_table_iv_as_transcribed_gives_the_papers_scaffold_gap(table):
    """paper_values.TABLE_IV against the statement's own reading of it (FedEntOpt - SCAFFOLD, 2.14 to 6.03)."""
    gaps = [round(v["FedEntOpt"][0] - v["SCAFFOLD"][0], 2) for v in paper_values.TABLE_IV.values()]
    assert [min(gaps), max(gaps)] == table.by_id("V-C/scaffold_second").paper_value["value"]
    assert all(max(v, key=lambda m: v[m][0]) == "FedEntOpt" for v in paper_values.TABLE_IV.values())


def test_the_paper_frame_gives_the_papers_own_gap():
    gap = quantities.paper_gap(quantities.paper_frame("table1"))
    setting = {"model": "lenet5", "dataset": "cifar10-subset", "partition": "Dir(0.1)"}  # our names, the paper's cell
    cell = paper_values.TABLE_I[("LeNet-5", "CIFAR-10", "Dir(0.1)")]
    assert gap(setting, "FedEntOpt", "FedAvg") == pytest.approx(cell["FedEntOpt"][0] - cell["FedAvg"][0])
    assert gap({**setting, "partition": "C=3"}, "FedEntOpt", "FedAvg") is None


@pytest.mark.slow
def test_stand_ins_hold_every_planned_run_of_the_tier():
    groups = quantities.stand_in_groups("subset")
    assert set(groups) == set(tiers.tier_groups("subset"))
    for name, g in groups.items():
        assert len(g.meta) == len(tiers.group_configs("subset", name)) == g.frame["key"].nunique()


@pytest.mark.slow
def test_participation_read_with_its_full_rate_point_counts_that_point_once():
    """A participation group that already holds Table I's 10 % runs (one read back and given again, as the seed
    plan does) gets them from the Table I group given, not twice; without Table I they are gone."""
    groups = quantities.stand_in_groups("subset")
    first = quantities.Runs("subset", groups=groups)
    read = first.stored("participation")
    assert len(read.meta) > len(groups["participation"].meta)  # Table I's runs at M = 10 added
    again = quantities.Runs("subset", groups={**groups, "participation": read})
    pd.testing.assert_frame_equal(again.frame("participation"), first.frame("participation"))
    alone = quantities.Runs("subset", groups={"participation": read}).frame("participation")
    rates = set(first.frame("participation")["clients_per_round"])
    assert set(alone["clients_per_round"]) == rates - {max(rates)}


def test_the_fewest_clients_holding_most_of_a_class_by_hand():
    """Class 0 held 90/5/5 by three clients (1 client holds 90 %), class 1 spread 40/30/30 (3 clients)."""
    counts = np.array([[90, 40], [5, 30], [5, 30]])
    assert quantities._fewest_holding(counts) == pytest.approx((1 + 3) / 2)


def test_the_share_of_data_on_never_picked_clients_by_hand():
    trace = SelectionTrace(
        picked=np.array([[0, 1], [0, 1]]),
        entropy=np.zeros(2),
        covers=np.ones(2, dtype=bool),
        num_clients=4,
        final_state=(),
    )
    counts = np.array([[10, 0], [0, 10], [5, 5], [20, 0]])  # clients 2 and 3 (30 of 50 samples) never picked
    assert quantities._never_picked_share(trace, counts) == pytest.approx(30 / 50)


def test_the_laplace_scale_is_read_off_the_mechanisms_draws(table):
    j = quantities.LABEL_ONLY["V-B2/laplace_scale"]({}, table.by_id("V-B2/laplace_scale"), table)
    assert j.verdict == "reproduces" and [s.estimate for s in j.settings] == pytest.approx([2.0, 1.0, 0.5, 1.0])


def test_paper_frames_hold_the_papers_tables():
    assert len(quantities.paper_frame("table1")) == sum(len(v) for v in paper_values.TABLE_I.values())
    t2 = quantities.paper_frame("table2")
    gap = quantities.paper_gap(t2)
    assert gap({"model": "lenet5", "dataset": "cifar10", "partition": "Dir(0.1)"}, "FedEntOpt+FedNova", "FedNova") == (
        pytest.approx(paper_values.TABLE_II[("Dir(0.1)", "FedNova", "CIFAR-10")][0])
    )
    assert quantities.paper_frame("large_pools") is None
    assert isinstance(quantities.paper_frame("medical"), pd.DataFrame)


# ------------------------------------------------------------------- label-only statements: hand-made federations


def test_algorithm_1_falls_short_only_where_the_buffer_holds_every_client():
    """Four single-class clients, M = 2: Algorithm 1's per-pick eviction keeps every round full up to Q = K - 1 = 3
    (one more than the paper's K - M), and at Q = K the third round finds every client buffered."""
    counts, rng = np.eye(4), np.random.default_rng(0)
    assert label_studies.algorithm1_round_sizes(counts, 2, 2, 6, rng=rng).tolist() == [2] * 6
    assert label_studies.algorithm1_round_sizes(counts, 2, 3, 6, rng=rng).tolist() == [2] * 6
    assert label_studies.algorithm1_round_sizes(counts, 2, 4, 3, rng=rng).tolist() == [2, 2, 0]


def test_the_buffer_bound_rows_by_hand():
    """K = 4, M = 2: fedlib's FedEntOpt fills every round at Q = 2; Algorithm 1 at Q = 3 does too (row 2: 0, the
    paper's "must" would give 1), so the statement's exact rule misses."""
    rows = quantities.buffer_bound_rows(np.eye(4, dtype=int) * 5, 2, 10, 0)
    assert [r["value"] for r in rows] == [1.0, 0.0]
    frame = pd.DataFrame([{"num_clients": 4, "clients_per_round": 2, **r} for r in rows])
    assert rules.exact(frame, "paper").verdict == rules.DOES_NOT


def test_the_fedconcat_budget_gap_of_the_docstrings_split():
    """fedconcat_round_split's worked LeNet-5 values (w = 62,006, s = 4,210, T = 500, 10 %): T_e = 461 leaves
    500 - 25 - 13.58 - 461 = 0.42 rounds unspent; v1's 480 encoder and 500 classifier rounds overspend by 38.9."""
    kw = {"num_clusters": 5, "model_params": 62_006, "classifier_params": 4_210, "participation": 0.1}
    assert quantities.fedconcat_budget_gap(500, 461, 200, **kw) == pytest.approx(461 + 25 + 4210 / 62006 * 200 - 500)
    assert -1 < quantities.fedconcat_budget_gap(500, 461, 200, **kw) <= 0
    assert quantities.fedconcat_budget_gap(500, 480, 500, **kw) == pytest.approx(5 + 4210 / 62006 * 500)


def test_the_cluster_round_spread_by_hand():
    """Clusters {0, 1} and {2}: cluster 0 has a pick in all 4 rounds, cluster 1 in 1 of them: 1 - 1/4."""
    clusters = np.array([0, 0, 1])
    picked = np.array([[0, -1], [1, -1], [0, 2], [1, 0]])
    assert quantities.cluster_round_spread(clusters, picked) == pytest.approx(0.75)
    assert quantities.cluster_round_spread(np.zeros(3, dtype=int), picked) == 0.0


def test_the_dp_upload_is_one_raw_draw_and_clipping_shows():
    """The selector sees one matrix over the run, equal to counts + one raw Laplace draw; clipped counts differ
    from the raw draw wherever the noise went below zero (small counts, epsilon 0.5: some entry does)."""
    counts = np.array([[0, 3], [2, 0], [1, 1], [0, 0]])
    kept = quantities.dp_upload_rows(counts, 0.5, 2, 5, 0, negative="keep")
    assert [r["value"] for r in kept] == [1.0, 0.0]
    clipped = quantities.dp_upload_rows(counts, 0.5, 2, 5, 0, negative="clip")
    assert clipped[0]["value"] == 1.0 and clipped[1]["value"] > 0


def test_the_top_holders_share_of_picks_by_hand():
    """Client 0 holds most of class 0, client 2 most of class 1: (4 + 1) of 10 picks go to them."""
    counts = np.array([[9, 1], [1, 2], [0, 7]])
    assert quantities.top_holder_share(counts, [4, 5, 1]) == pytest.approx(0.5)


def test_greedy_attains_the_best_known_subset_by_hand():
    """A round where the swap search or the branch and bound beats greedy by more than GAP_TOL does not count."""
    rounds = pd.DataFrame(
        {
            "greedy_entropy": [1.0, 1.0, 1.0, 1.0],
            "swap_entropy": [1.0, 1.2, 1.0, 1.0],
            "exact_entropy": [np.nan, np.nan, 1.3, 1.0 + 1e-12],
        }
    )
    assert quantities.greedy_attains_best(rounds).tolist() == [True, False, False, True]


def test_an_empty_client_needs_a_pool_beyond_the_samples():
    """600 CIFAR-10 clients for 50,000 images at Dir(0.1): most single draws leave someone empty; 10 clients never."""
    assert label_studies.empty_client_draws("cifar10", 10, 0, beta=0.1, draws=3) == 0.0
    assert label_studies.empty_client_draws("cifar10", 600, 0, beta=0.1, draws=3) > 0


@pytest.mark.slow
def test_every_label_only_statement_is_judged_from_the_pages_smoke_studies(table):
    """The book's smoke run (a few rounds, one partition) lacks settings some statements compare: each still gets
    a verdict (undecided where nothing is left to compare), never an error that stops the scorecard page."""
    studies = quantities.label_studies(smoke=True)
    for s in table.statements:
        if s.checkable and s.id in quantities.LABEL_ONLY:
            assert quantities.LABEL_ONLY[s.id](studies, s, table).verdict in rules.VERDICTS, s.id


def test_v1_fig5_gains_are_the_values_of_the_gain_statements(table):
    """paper_values.V1_FIG5_GAINS holds the numbers the three gain statements of statements.yaml judge against."""
    cells = {
        "v1/fig5_dir_15_and_5pct": [[("CIFAR-10", "Dir(0.1)")], [("CINIC-10", "Dir(0.1)"), ("CIFAR-100", "Dir(0.1)")]],
        "v1/fig5_c2_gains": [[("CIFAR-100", "C=2")], [("CIFAR-10", "C=2")]],
        "v1/fig5_c3_gains": [[("CIFAR-100", "C=3")], [("CIFAR-10", "C=3")], [("CINIC-10", "C=3")]],
    }
    for sid, parts in cells.items():
        for value, keys in zip(table.by_id(sid).params["value"], parts):
            assert all(paper_values.V1_FIG5_GAINS[k] == value for k in keys), (sid, keys)
    assert len(paper_values.V1_FIG5_GAINS) == sum(len(k) for p in cells.values() for k in p)


def test_lead_over_best_is_fedentopt_minus_the_best_other_method_per_seed():
    f = pd.DataFrame(
        {
            "dataset": "cifar10",
            "method": ["FedEntOpt", "FedAvg", "KL"] * 2,
            "seed": [0, 0, 0, 1, 1, 1],
            "value": [50.0, 45.0, 47.0, 40.0, 42.0, 30.0],
        }
    )
    lead = quantities.lead_over_best(f).set_index("seed")["value"]
    assert lead.to_dict() == {0: 3.0, 1: -2.0}  # 50 - max(45, 47); 40 - max(42, 30)


def test_the_divergence_from_the_federations_labels_by_hand():
    """Two clients of one class each: picking one gives KL(one-hot || uniform) = 1 bit, picking both 0."""
    counts = np.array([[2, 0], [0, 2]])
    one = SelectionTrace(np.array([[0], [1]]), np.zeros(2), np.zeros(2, dtype=bool), 2)
    both = SelectionTrace(np.array([[0, 1]]), np.zeros(1), np.ones(1, dtype=bool), 2)
    assert quantities.divergence_from_global(counts, one) == pytest.approx(1.0)
    assert quantities.divergence_from_global(counts, both) == pytest.approx(0.0)


def test_the_selection_flops_count_every_candidate_of_every_greedy_step():
    assert quantities.selection_flops(100, 10, 10) == 9 * 100 * 10 * quantities.SCORE_FLOPS_PER_CLASS
    assert quantities.selection_flops(5, 1, 3) == 0  # one pick is the random first one: nothing is scored


def test_gap_to_others_by_hand_leaves_out_a_seed_with_part_of_the_curve():
    """Seeds 0 and 1 run both methods at M = 4 and 10; seed 2 only at M = 10 (a Table I run a plan gave more
    seeds): its mean would be over another set of rates, so it is left out."""
    rows = [
        ("C=2", 0, 4, 50.0, 40.0),  # gaps 10 (M = 4) and 4 (M = 10): mean 7
        ("C=2", 0, 10, 60.0, 56.0),
        ("C=2", 1, 4, 45.0, 44.0),  # gaps 1 and 3: mean 2
        ("C=2", 1, 10, 58.0, 55.0),
        ("C=2", 2, 10, 70.0, 40.0),  # M = 10 alone
    ]
    frame = pd.DataFrame(
        [
            {"partition": p, "seed": s, "clients_per_round": m, "method": meth, "value": v}
            for p, s, m, ref, other in rows
            for meth, v in ((quantities.REF, ref), ("FedAvg", other))
        ]
    )
    got = quantities._gap_to_others(frame).set_index("seed")["value"]
    assert got.to_dict() == {0: pytest.approx(7.0), 1: pytest.approx(2.0)}
