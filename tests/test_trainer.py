"""The trainer on a tiny synthetic data set (LeNet-5 on 16x16 images, 8 clients, 1-2 rounds)."""

import dataclasses
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import write_tiny_npz

from fedlib.algorithms import Algorithm, HParams
from fedlib.training.config import ExperimentConfig
from fedlib.training.runs import TABLE_COLUMNS
from fedlib.training.trainer import Experiment, run_experiment


@pytest.fixture(scope="module")
def tiny_npz(tmp_path_factory):
    return write_tiny_npz(tmp_path_factory.mktemp("data"), seed=0, num_samples=240, num_train=160, signal=True)


def _cfg(path, **kw):
    base = dict(
        dataset="npz",
        dataset_options={"path": path},
        num_clients=8,
        clients_per_round=3,
        rounds=2,
        local_epochs=1,
        batch_size=16,
        min_partition_size=2,
        beta=0.5,
    )
    base.update(kw)
    return ExperimentConfig(**base)


@pytest.mark.slow
def test_table_and_bytes(tiny_npz):
    res = run_experiment(_cfg(tiny_npz, selector="fedentopt", selector_params={"buffer_size": 2}), progress=False)
    t = res.table
    assert list(t.columns) == list(TABLE_COLUMNS) and t["round"].tolist() == [0, 1, 2]
    exp = Experiment(res.config)
    p = exp.num_params
    assert t["bytes_uploaded"].tolist() == [4 * 4 * 8, 4 * p * 3, 4 * p * 3]  # 4CK once, then 4p per upload
    assert t["cumulative_bytes"].iloc[-1] == 4 * 4 * 8 + 2 * 4 * p * 3
    assert t["num_trained"].tolist() == [0, 3, 3] and t["test_accuracy"].notna().all()
    assert len(t["picked"].iloc[1].split()) == 3
    # random selection uploads no labels
    assert run_experiment(_cfg(tiny_npz, rounds=1), progress=False).table["bytes_uploaded"].iloc[0] == 0


@pytest.mark.slow
def test_deterministic_and_streams_separate(tiny_npz):
    a = run_experiment(_cfg(tiny_npz, rounds=1), progress=False)
    b = run_experiment(_cfg(tiny_npz, rounds=1), progress=False)
    assert all(torch.equal(a.global_params[k], b.global_params[k]) for k in a.global_params)
    cols = [c for c in TABLE_COLUMNS if c != "seconds"]
    assert a.table[cols].equals(b.table[cols])
    # changing the selector (or the algorithm) does not change the partition or the model initialisation
    e1 = Experiment(_cfg(tiny_npz))
    e2 = Experiment(_cfg(tiny_npz, selector="kl", algorithm="fedprox"))
    assert all(np.array_equal(p, q) for p, q in zip(e1.parts, e2.parts))
    s1, s2 = e1.initial_state(), e2.initial_state()
    assert all(torch.equal(s1.global_params[k], s2.global_params[k]) for k in s1.global_params)


@pytest.mark.slow
def test_dropout_and_stragglers(tiny_npz):
    t = run_experiment(_cfg(tiny_npz, dropout_prob=0.6, rounds=2), progress=False).table
    assert (t["num_trained"] + t["num_dropped"] == t["num_picked"]).all()
    assert t["num_dropped"].sum() > 0
    exp = Experiment(_cfg(tiny_npz, straggler_fraction=0.5, local_epochs=3))
    assert exp.stragglers.sum() == 4
    state = exp.initial_state()
    seen = []
    orig = exp.train_client
    exp.train_client = lambda p, k, rnd, lr, epochs, *a: (seen.append((k, epochs)), orig(p, k, rnd, lr, epochs, *a))[1]
    exp.run_round(state)
    for k, e in seen:
        assert (1 <= e <= 3) if exp.stragglers[k] else e == 3


def test_label_dp_changes_server_counts_only(tiny_npz):
    exp = Experiment(_cfg(tiny_npz, selector="fedentopt", selector_params={"buffer_size": 2}, label_dp_epsilon=0.5))
    plain = Experiment(_cfg(tiny_npz, selector="fedentopt", selector_params={"buffer_size": 2}))
    assert np.array_equal(exp.true_counts, plain.true_counts)
    assert not np.array_equal(exp.server_counts, exp.true_counts)
    assert (exp.server_counts < 0).any()  # default dp_negative="keep": the raw noisy counts, as the paper uploads
    clipped = Experiment(
        _cfg(
            tiny_npz, selector="fedentopt", selector_params={"buffer_size": 2}, label_dp_epsilon=0.5, dp_negative="clip"
        )
    )
    np.testing.assert_array_equal(clipped.server_counts, np.maximum(exp.server_counts, 0))


@pytest.mark.slow
def test_all_algorithms_run(tiny_npz):
    for alg in ["fedavg", "fedprox", "fednova", "scaffold", "fedrs", "fedlc"]:
        t = run_experiment(_cfg(tiny_npz, algorithm=alg, rounds=1, selector="kl"), progress=False).table
        assert np.isfinite(t["test_loss"]).all(), alg


def test_bad_config_fails_before_loading_data(tmp_path):
    cfg = _cfg(str(tmp_path / "missing.npz"), selector="entopt")
    with pytest.raises(ValueError, match="config parameter 'selector': got 'entopt'"):
        run_experiment(cfg, progress=False)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["fedavg", "scaffold", "fednova", "fedentropy"])
def test_batched_engine_gives_the_reference_run(tiny_npz, algorithm):
    # The batched engine trains the same clients from the same generators: tables and final models are equal
    # bit for bit on CPU (fedlib.training.batched, "loop" kernel), with dropout and stragglers in play
    # (FedEntropy: the same soft labels, so the same clients kept).
    kw = dict(algorithm=algorithm, dropout_prob=0.3, straggler_fraction=0.5, rounds=3)
    ref = run_experiment(_cfg(tiny_npz, **kw), progress=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bat = run_experiment(_cfg(tiny_npz, engine="batched", **kw), progress=False)
    assert not [w for w in caught if "falling back" in str(w.message)]
    cols = ["test_accuracy", "test_loss", "train_loss", "num_trained", "kept"]
    pd.testing.assert_frame_equal(ref.table[cols], bat.table[cols])
    assert all(torch.equal(ref.global_params[k], bat.global_params[k]) for k in ref.global_params)


def test_unknown_engine_is_a_config_error(tiny_npz):
    with pytest.raises(ValueError, match="config parameter 'engine': got 'gpu'; allowed: 'reference', 'batched'"):
        run_experiment(_cfg(tiny_npz, engine="gpu"), progress=False)


# --- a new round shape: its module (here, this test) and the registry, nothing else ---------------------------


class ToyTwoPhase(Algorithm):
    """A toy two-phase algorithm, registered only inside the tests below: ``warmup_rounds`` rounds at half the
    learning rate in which only the first trained client uploads (phase ``"warmup"``), then FedAvg rounds; the run
    lasts ``config.rounds + warmup_rounds`` rounds and its own state (warm-up rounds done) is checkpointed."""

    name = "toy_two_phase"

    @dataclasses.dataclass(frozen=True)
    class HParams(HParams):
        warmup_rounds: int = 2

    def num_rounds(self, rounds, model, *, num_clients, clients_per_round):
        return rounds + self.hparams.warmup_rounds

    def init_run_state(self, global_params, **_):
        return {"warmup_done": 0}

    def run_state_to_checkpoint(self, run_state):
        return {"warmup_done": int(run_state["warmup_done"])}

    def run_state_from_checkpoint(self, data, **_):
        return {"warmup_done": int(data["warmup_done"])}

    def plan_round(self, rnd, run_state, *, config, model):
        plan, run_state = super().plan_round(rnd, run_state, config=config, model=model)
        if run_state["warmup_done"] < self.hparams.warmup_rounds:
            plan = dataclasses.replace(plan, phase="warmup", lr=plan.lr / 2)
        return plan, run_state

    def keep(self, plan, clients, reports, sizes, server_state):
        mask = np.arange(len(clients)) < (1 if plan.phase == "warmup" else len(clients))
        return mask, server_state

    def aggregate_round(self, plan, results, weights, global_params, server_state, run_state):
        global_params, server_state, _ = super().aggregate_round(
            plan, results, weights, global_params, server_state, run_state
        )
        return global_params, server_state, {"warmup_done": run_state["warmup_done"] + (plan.phase == "warmup")}


@pytest.fixture
def toy_two_phase():
    from fedlib.algorithms import register_algorithm, unregister_algorithm

    register_algorithm("toy_two_phase", ToyTwoPhase)
    yield "toy_two_phase"
    unregister_algorithm("toy_two_phase")


@pytest.mark.slow
def test_a_new_round_shape_needs_only_its_module_and_the_registry(tiny_npz, toy_two_phase, tmp_path):
    cfg = _cfg(tiny_npz, algorithm=toy_two_phase, algorithm_params={"warmup_rounds": 2}, rounds=2, checkpoint_every=1)
    res = run_experiment(cfg, progress=False)
    t = res.table
    assert t["round"].tolist() == [0, 1, 2, 3, 4]  # config.rounds + warmup_rounds
    assert t["phase"].tolist() == ["init", "warmup", "warmup", "global", "global"]
    assert t["lr"].iloc[1:].tolist() == pytest.approx([0.005, 0.0049, 0.01 * 0.98**2, 0.01 * 0.98**3])
    p = Experiment(cfg).num_params
    for _, row in t.iloc[1:].iterrows():
        kept = row["kept"].split()
        assert len(kept) == (1 if row["phase"] == "warmup" else row["num_trained"])
        assert row["bytes_uploaded"] == 4 * p * len(kept)
    # the one round loop checkpoints the algorithm's own state: a run killed in the warm-up resumes bit for bit
    run_experiment(cfg, run_root=tmp_path, progress=False, stop_after=2)
    resumed = run_experiment(cfg, run_root=tmp_path, progress=False)
    cols = [c for c in TABLE_COLUMNS if c != "seconds"]
    assert resumed.table[cols].equals(t[cols])
    assert all(torch.equal(resumed.global_params[k], res.global_params[k]) for k in res.global_params)


def test_an_unregistered_algorithm_is_a_config_error(tiny_npz):
    with pytest.raises(ValueError, match="config parameter 'algorithm': got 'toy_two_phase'"):
        run_experiment(_cfg(tiny_npz, algorithm="toy_two_phase"), progress=False)
