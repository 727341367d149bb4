"""Tests of repro.label_studies: partition notation, seed streams, and the tidy study tables."""

import re

import numpy as np
import pytest

from fedlib.data.partition import labels_from_counts, parse_partition
from fedlib.seeds import stream_rng
from repro import label_studies


# Paper notation -> partition parameters (§V-A2 of the paper: Dir(beta) and #C=k).
@pytest.mark.parametrize(
    "label, expected",
    [
        ("Dir(0.1)", {"scheme": "dirichlet", "beta": 0.1, "classes_per_client": None}),
        ("Dir(0.5)", {"scheme": "dirichlet", "beta": 0.5, "classes_per_client": None}),
        ("C=2", {"scheme": "quantity", "beta": None, "classes_per_client": 2}),
        ("#C=3", {"scheme": "quantity", "beta": None, "classes_per_client": 3}),
        ("IID", {"scheme": "iid", "beta": None, "classes_per_client": None}),
    ],
)
def test_parse_partition(label, expected):
    assert parse_partition(label) == expected


@pytest.mark.parametrize("label", ["Dir(x)", "C=two", "dirichlet", ""])
def test_parse_partition_rejects_unknown_notation(label):
    allowed = r"allowed: 'Dir\(0\.1\)', 'C=2' or 'IID' \(the paper's notation; '#C=2' too\) or 'dir0\.1', 'c2', 'iid'"
    with pytest.raises(ValueError, match=rf"^parameter 'notation': got {re.escape(repr(label))}; {allowed}"):
        parse_partition(label)


def test_streams_differ_between_streams_and_repeat_per_seed():
    # the label-only studies' streams (fedlib.seeds, the trainer's table)
    draws = {int(stream_rng(7, s).integers(2**62)) for s in ("partition", "selection", "label_dp", "coverage")}
    assert len(draws) == 4
    assert stream_rng(7, "selection").integers(2**62) == stream_rng(7, "selection").integers(2**62)
    with pytest.raises(ValueError, match=r"parameter 'seed': got -1; allowed: an integer >= 0\."):
        stream_rng(-1, "partition")
    with pytest.raises(ValueError, match=r"^parameter 'name': got 'training_data'; allowed: 'partition', "):
        stream_rng(0, "training_data")


def test_selector_traces_same_seed_same_table_and_partition_independent_of_method():
    labels = labels_from_counts([40] * 4)
    kwargs = dict(num_clients=8, clients_per_round=2, num_rounds=5, seeds=[0, 1], classes_per_client=2)
    one = label_studies.selector_traces(labels, "quantity", methods={"R": ("random", {})}, **kwargs)
    two = label_studies.selector_traces(labels, "quantity", methods={"K": ("kl", {}), "R": ("random", {})}, **kwargs)
    assert one.equals(label_studies.selector_traces(labels, "quantity", methods={"R": ("random", {})}, **kwargs))
    # Adding a method must not change another method's rows (separate partition and selection streams).
    np.testing.assert_array_equal(two[two.method == "R"]["entropy"].values, one["entropy"].values)
    assert len(two) == 2 * 2 * 5


def test_buffer_study_counts_every_pick():
    labels = labels_from_counts([30] * 3)
    summary, counts = label_studies.buffer_study(
        labels,
        "quantity",
        buffer_fractions=[0.0, 0.5],
        num_clients=6,
        clients_per_round=2,
        num_rounds=10,
        seeds=[0],
        classes_per_client=1,
    )
    # Every round picks exactly M = 2 clients, so the per-client counts add up to R * M = 20 per setting.
    assert counts.groupby("buffer_pct")["times_picked"].sum().tolist() == [20, 20]
    assert summary["h_norm"].between(0, 1).all()
    assert summary.set_index("buffer_pct").loc[50, "buffer_size"] == 3


def test_coverage_study_is_one_when_every_client_holds_every_label():
    labels = labels_from_counts([100] * 3)
    table = label_studies.coverage_study(
        labels, pool_sizes=[5], subset_sizes=[1, 2], num_rounds=20, seeds=[0], beta=1000.0, buffer_fraction=0.2
    )
    assert (table["random_coverage"] == 1.0).all()
    assert (table["fedentopt_coverage"] == 1.0).all()


@pytest.mark.slow
@pytest.mark.parametrize("partition", ["Dir(0.5)", "C=2"])
def test_same_seed_gives_the_training_run_s_federation_and_picks(tmp_path, partition):
    # Label-only pages and training pages draw from the same seed streams (fedlib.seeds): the label-only
    # federation of a seed is the one the trainer partitions, and FedEntOpt picks the clients it picks there.
    from conftest import write_tiny_npz

    from fedlib.data.datasets import load_dataset
    from fedlib.data.partition import partition_fields
    from fedlib.label_only.simulate import run_selection
    from fedlib.seeds import stream_rng
    from fedlib.selection.selectors import make_selector
    from fedlib.training.config import ExperimentConfig
    from fedlib.training.trainer import Experiment, run_experiment

    path = write_tiny_npz(tmp_path, seed=3, num_samples=300, num_train=240)
    cfg = ExperimentConfig(
        dataset="npz",
        dataset_options={"path": path},
        num_clients=6,
        clients_per_round=2,
        rounds=3,
        local_epochs=1,
        batch_size=16,
        augment=False,
        seed=5,
        selector="fedentopt",
        selector_params={"buffer_size": 2},
        **partition_fields(partition),
    )
    spec = parse_partition(partition)
    labels = load_dataset("npz", path=path).y_train
    counts = label_studies.federation_counts(
        labels, spec["scheme"], 6, 5, beta=spec["beta"], classes_per_client=spec["classes_per_client"]
    )
    np.testing.assert_array_equal(counts, Experiment(cfg).true_counts)
    picks = run_selection(counts, make_selector("fedentopt", buffer_size=2), 2, 3, seed=stream_rng(5, "selection"))
    trained = run_experiment(cfg, progress=False).table
    assert [" ".join(map(str, p)) for p in picks.picked] == trained["picked"].iloc[1:].tolist()
