"""FedEntropy and FedConcat through the trainer (tiny synthetic data, LeNet-5 on 16x16 images, 8 clients)."""

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import write_tiny_npz

from fedlib.algorithms.base import weighted_average
from fedlib.algorithms.fedconcat import fedconcat_round_split
from fedlib.algorithms.fedentropy import max_entropy_judgement, model_soft_label
from fedlib.selection.metrics import covers_all_classes, pooled_entropy
from fedlib.training.config import ExperimentConfig
from fedlib.training.runs import TABLE_COLUMNS, normalise_table
from fedlib.training.trainer import Experiment, run_experiment
from repro.cli import main

C = 4  # classes of the tiny data set


@pytest.fixture(scope="module")
def tiny_npz(tmp_path_factory):
    return write_tiny_npz(
        tmp_path_factory.mktemp("data"), seed=0, num_samples=240, num_train=160, num_classes=C, signal=True
    )


def _cfg(path, **kw):
    base = dict(
        dataset="npz",
        dataset_options={"path": path},
        num_clients=8,
        clients_per_round=3,
        rounds=3,
        local_epochs=1,
        batch_size=16,
        min_partition_size=2,
        beta=0.5,
        augment=False,
    )
    base.update(kw)
    return ExperimentConfig(**base)


def _ids(text):
    return [int(k) for k in str(text).split()] if isinstance(text, str) and text else []


_FC = {"num_clusters": 2, "encoder_rounds": 2, "classifier_rounds": 2}
_COLS = [c for c in TABLE_COLUMNS if c != "seconds"]


# --- FedEntropy -----------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("selector", ["random", "fedentopt"])
def test_fedentropy_end_to_end(tiny_npz, selector):
    sp = {"buffer_size": 2} if selector == "fedentopt" else {}
    cfg = _cfg(tiny_npz, algorithm="fedentropy", selector=selector, selector_params=sp, dropout_prob=0.3)
    res = run_experiment(cfg, progress=False)
    t = res.table
    assert list(t.columns) == list(TABLE_COLUMNS) and t["round"].tolist() == [0, 1, 2, 3]
    exp = Experiment(cfg)
    p = exp.num_params
    assert t["phase"].tolist() == ["init", "global", "global", "global"]
    assert t.loc[1:, "test_accuracy"].notna().all()
    label_bytes = 4 * C * 8 if selector == "fedentopt" else 0  # FedEntropy itself uploads no label counts
    assert t["bytes_uploaded"].iloc[0] == label_bytes
    for _, row in t.iloc[1:].iterrows():
        picked, kept = _ids(row["picked"]), _ids(row["kept"])
        assert row["num_trained"] + row["num_dropped"] == row["num_picked"] == 3
        assert 1 <= len(kept) <= row["num_trained"] or row["num_trained"] == 0
        assert set(kept) <= set(picked)
        # every trained client uploads its soft label (C floats), only the kept ones their models
        assert row["bytes_uploaded"] == 4 * C * row["num_trained"] + 4 * p * len(kept)
        assert row["reselection_entropy_bits"] == pytest.approx(pooled_entropy(exp.true_counts, kept) if kept else 0)
        assert row["kept_covers_all_classes"] == (bool(covers_all_classes(exp.true_counts, kept)) if kept else False)
    if selector == "fedentopt":
        # FedEntOpt still picks S_t (the same clients as with FedAvg); FedEntropy only judges
        ref = run_experiment(cfg.replace(algorithm="fedavg"), progress=False).table
        assert t["picked"].tolist() == ref["picked"].tolist()
    # kept is a proper subset in some round (the judgement acts)
    assert (t["kept"].map(lambda s: len(_ids(s))) < t["num_trained"]).any()


@pytest.mark.slow
def test_fedentropy_aggregates_exactly_the_kept_clients(tiny_npz):
    cfg = _cfg(tiny_npz, algorithm="fedentropy", clients_per_round=4)
    exp = Experiment(cfg)
    state, before = exp.initial_state(), exp.initial_state()
    row = exp.run_round(state)
    picked, kept = _ids(row["picked"]), _ids(row["kept"])
    assert row["num_trained"] == 4 and len(kept) < 4
    # re-do the round by hand: train every picked client from the initial model, judge, FedAvg over the kept ones
    lr = cfg.lr
    results = {k: exp.train_client(before.global_params, k, 1, lr, cfg.local_epochs, {}) for k in picked}
    soft = [
        model_soft_label(exp.model, results[k].params, exp.preprocessor.test(exp.x_train[exp.client_index[k]]))
        for k in picked
    ]
    sizes = [results[k].num_samples for k in picked]
    mask = max_entropy_judgement(soft, sizes)
    assert [k for k, m in zip(picked, mask) if m] == kept
    n = np.array([results[k].num_samples for k in kept], dtype=np.float64)
    expected = weighted_average([results[k].params for k in kept], n / n.sum())
    for key in expected:
        assert torch.equal(state.global_params[key], expected[key]), key
    # the judged clients moved to the pool of their verdict
    positive = state.server_state["positive"].numpy()
    assert all(positive[k] == (k in kept) for k in picked)
    assert positive.sum() == 8 - (4 - len(kept))


# --- FedConcat ------------------------------------------------------------------------------------------------


def test_fedconcat_round_budget(tiny_npz):
    # config.rounds is the FedAvg-equivalent budget; the run lasts T_e + T_c rounds
    cfg = _cfg(tiny_npz, algorithm="fedconcat", rounds=40, algorithm_params={"num_clusters": 2, "classifier_rounds": 3})
    exp = Experiment(cfg)
    head = exp.model.get_submodule("classifier.4")
    t_e, t_c = fedconcat_round_split(
        40,
        num_clusters=2,
        model_params=exp.num_params,
        classifier_params=2 * head.in_features * C + C,
        participation=3 / 8,
        classifier_rounds=3,
    )
    assert exp.total_rounds == t_e + t_c and t_c == 3 and t_e == 37
    # explicit encoder rounds override the budget
    assert Experiment(cfg.replace(algorithm_params=_FC)).total_rounds == 4
    with pytest.raises(
        ValueError,
        match=r"^config parameter 'rounds': got 3 \(leaves 0\.20 encoder rounds\); allowed: an integer >= 4, which "
        r"leaves an encoder round after the classifier phase \(classifier_rounds=3\)",
    ):
        Experiment(cfg.replace(rounds=3))


@pytest.mark.slow
@pytest.mark.parametrize("selector", ["random", "fedentopt"])
def test_fedconcat_end_to_end(tiny_npz, selector):
    sp = {"buffer_size": 2} if selector == "fedentopt" else {}
    cfg = _cfg(tiny_npz, algorithm="fedconcat", selector=selector, selector_params=sp, rounds=10, algorithm_params=_FC)
    res = run_experiment(cfg, progress=False)
    t = res.table
    assert t["round"].tolist() == [0, 1, 2, 3, 4]
    assert t["phase"].tolist() == ["init", "encoder", "encoder", "classifier", "classifier"]
    # no single global model in the encoder stage; the concatenated model is evaluated in the classifier stage
    assert t["test_accuracy"].iloc[1:3].isna().all() and t["test_accuracy"].iloc[3:].notna().all()
    # the learning-rate decay restarts with the classifier
    assert t["lr"].iloc[1:].tolist() == pytest.approx([0.01, 0.0098, 0.01, 0.0098])
    exp = Experiment(cfg)
    p, s = exp.num_params, 2 * 84 * C + C
    assert t["bytes_uploaded"].tolist() == [4 * C * 8, 4 * p * 3, 4 * p * 3, 4 * s * 3, 4 * s * 3]
    # the last row's accuracy is the returned concatenated model's
    fc = exp.initial_state().algorithm_state
    concat, _ = exp.algorithm.build_concat_model(exp.model, fc.cluster_params, torch.Generator())
    acc, loss = exp.evaluate(res.global_params, model=concat)
    assert (acc, loss) == (t["test_accuracy"].iloc[-1], t["test_loss"].iloc[-1])
    assert sorted(k for k in res.global_params if k.startswith("head.")) == ["head.bias", "head.weight"]
    assert np.isfinite(res.final_accuracy)


@pytest.mark.slow
def test_fedconcat_one_cluster_encoder_stage_is_fedavg(tiny_npz):
    cfg = _cfg(tiny_npz, rounds=2, dropout_prob=0.3, straggler_fraction=0.5, local_epochs=2)
    fedavg = run_experiment(cfg, progress=False)
    exp = Experiment(
        cfg.replace(
            algorithm="fedconcat", algorithm_params={"num_clusters": 1, "encoder_rounds": 2, "classifier_rounds": 1}
        )
    )
    state = exp.initial_state()
    rows = [exp.run_round(state), exp.run_round(state)]
    assert [r["picked"] for r in rows] == fedavg.table["picked"].iloc[1:].tolist()
    for key, v in fedavg.global_params.items():
        assert torch.equal(state.algorithm_state.cluster_params[0][key], v), key


# --- resume ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["fedentropy", "fedconcat"])
def test_resume_is_bitwise_identical(tiny_npz, tmp_path, algorithm):
    params = {"num_clusters": 2, "encoder_rounds": 2, "classifier_rounds": 4} if algorithm == "fedconcat" else {}
    cfg = _cfg(
        tiny_npz,
        algorithm=algorithm,
        algorithm_params=params,
        rounds=6,
        checkpoint_every=2,
        dropout_prob=0.3,
        straggler_fraction=0.5,
    )
    full = run_experiment(cfg, run_root=tmp_path / "a", progress=False)
    # killed after round 5: the last checkpoint is round 4 (FedConcat: inside the classifier stage)
    part = run_experiment(cfg, run_root=tmp_path / "b", progress=False, stop_after=5)
    assert not part.finished
    resumed = run_experiment(cfg, run_root=tmp_path / "b", progress=False)
    assert resumed.finished and not resumed.from_cache
    for k in full.global_params:
        assert torch.equal(full.global_params[k], resumed.global_params[k]), k
    assert full.table[_COLS].equals(resumed.table[_COLS])
    # read back from the cache with the same dtypes (kept: strings)
    cached = run_experiment(cfg, run_root=tmp_path / "a", progress=False)
    assert cached.from_cache
    pd.testing.assert_frame_equal(cached.table, full.table, check_exact=True)


def test_id_columns_read_back_as_strings():
    # CSV reads "" as NaN and a single id as a number
    read = pd.DataFrame(
        {
            "round": [0, 1],
            "picked": ["", "3 5"],
            "kept": [np.nan, 3.0],
            "phase": ["init", "global"],
            "reselection_entropy_bits": [0.0, 0.0],
        }
    )
    assert normalise_table(read)["kept"].tolist() == ["", "3"]


# --- CLI ------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_runs_both(tiny_npz, tmp_path, capsys):
    args = [
        "--dataset",
        "npz",
        "--dataset-option",
        f"path={tiny_npz}",
        "--clients",
        "6",
        "--clients-per-round",
        "2",
        "--rounds",
        "2",
        "--epochs",
        "1",
        "--batch-size",
        "16",
        "--min-partition-size",
        "2",
        "--no-augment",
        "--run-root",
        str(tmp_path),
        "--no-progress",
    ]
    assert main(["run", "--algorithm", "fedentropy", "--fe-epsilon", "0.5"] + args) == 0
    assert "final accuracy" in capsys.readouterr().out
    assert (
        main(
            [
                "run",
                "--algorithm",
                "fedconcat",
                "--fc-clusters",
                "2",
                "--fc-classifier-rounds",
                "1",
                "--algo-param",
                "encoder_rounds=1",
            ]
            + args
        )
        == 0
    )
    assert "final accuracy" in capsys.readouterr().out
    assert main(["run", "--fc-clusters", "2"] + args) == 2
    err = capsys.readouterr().err
    assert "parameter '--fc-clusters': got 2; allowed: only with algorithm 'fedconcat' (got 'fedavg')." in err
