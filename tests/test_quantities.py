"""repro.quantities: what each statement's rule is applied to: the paper's own tables as frames, the
stand-in runs the dry run walks, and the label-only quantities worked by hand on small federations."""

import numpy as np
import pandas as pd
import pytest

from fedlib.label_only.simulate import SelectionTrace
from repro import paper_values, quantities, statements, tiers


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
