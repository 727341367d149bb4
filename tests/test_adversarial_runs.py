"""Tests of repro.adversarial_runs: training with lying clients, the stored group, the paired tests."""

import numpy as np
import pytest

from fedlib.data.partition import label_count_matrix
from repro import adversarial_runs as ar
from repro import results
from repro.adversarial import LiarSpec, choose_liars, uniform_report
from repro.tiers import tier_config

# ----------------------------------------------------------------------------- the group


def test_lying_runs_labels_and_configs():
    runs = ar.lying_runs("quick")
    assert len(runs) == 2 * 3 * len(ar.METHODS) * len(ar.SEEDS)
    liars = {(r.label["liar_pct"], r.label["liars"]) for r in runs}
    assert liars == {(0, 0), (1, 1), (10, 2)}  # K = 20: 1 % rounds up to one liar, 10 % is two
    strict = [r for r in runs if r.label["method"] == "FedEntOpt + strict defence"][0]
    assert strict.config.selector_params == {"buffer_fraction": 0.5, **ar.STRICT_DEFENCE}
    rand = [r for r in runs if r.label["method"] == "Random"][0]
    assert rand.config.selector == "random"
    honest = [r for r in runs if r.label["method"] == "FedEntOpt" and r.label["liars"] == 0][0]
    # never Table I's key: the group's runs are trained with one torch thread, Table I's may not be
    assert ar.liar_run_key(honest.config, honest.spec) != results.run_key(honest.config)
    lying = [r for r in runs if r.label["method"] == "FedEntOpt" and r.label["liars"] == 2][0]
    assert ar.liar_run_key(lying.config, lying.spec) != results.run_key(lying.config)
    assert ar.liar_run_key(lying.config, lying.spec) != ar.liar_run_key(lying.config, LiarSpec(2, data="honest"))


@pytest.mark.slow
def test_liar_experiment_relabels_and_fabricates():
    from fedlib.training.trainer import Experiment

    cfg = tier_config("quick", partition_name="Dir(0.1)", method="FedEntOpt", rounds=1)
    spec = LiarSpec(2, "uniform", 10.0, "flipped")
    plain = Experiment(cfg)
    exp, liars = ar.liar_experiment(cfg, spec)
    assert liars.tolist() == choose_liars(cfg.num_clients, 2, cfg.seed).tolist()
    y0, y1 = plain.y_train.numpy(), exp.y_train.numpy()
    mask = np.zeros(y0.size, dtype=bool)
    for k in liars:
        mask[plain.parts[k]] = True
    np.testing.assert_array_equal(y1[mask], 9 - y0[mask])  # flipped: y -> C - 1 - y
    np.testing.assert_array_equal(y1[~mask], y0[~mask])  # honest clients' data untouched
    np.testing.assert_array_equal(exp.true_counts, label_count_matrix(y1, exp.parts, 10))
    for k in range(cfg.num_clients):
        if k in liars:
            n = int(plain.true_counts[k].sum())
            np.testing.assert_array_equal(exp.server_counts[k], uniform_report(10 * n, 10))
        else:
            np.testing.assert_array_equal(exp.server_counts[k], plain.server_counts[k])


def test_liar_experiment_errors():
    cfg = tier_config("quick", partition_name="C=2", method="FedEntOpt", rounds=1)
    with pytest.raises(
        ValueError, match=r"^LiarSpec parameter 'num_liars': got 21; allowed: an integer >= 0 and <= num_clients=20\.$"
    ):
        ar.run_with_liars(cfg, LiarSpec(21))
    with pytest.raises(
        TypeError, match=r"^parameter 'spec': got type dict; allowed: a repro\.adversarial\.LiarSpec\.$"
    ):
        ar.run_with_liars(cfg, {"num_liars": 1})


@pytest.mark.slow
def test_store_and_load_back(tmp_path):
    # an honest and a lying run, 2 rounds each: trained with one torch thread (the caller's count is restored),
    # stored with the liars' picks per round, read back by repro.results.load_group
    import torch

    runs = ar.lying_runs("quick", seeds=(0,), partitions=("C=2",), shares=(0.0, 0.1), methods=("FedEntOpt",), rounds=2)
    before = torch.get_num_threads()
    info = ar.ensure_lying_runs(runs, "quick", results_dir=tmp_path, log=lambda s: None)
    assert info["trained"] == 2 and torch.get_num_threads() == before
    stored = results.load_group("quick", ar.GROUP, tmp_path)
    assert len(stored) == 2 and set(stored.meta["liars"]) == {0, 2}
    f = stored.frame[stored.frame["round"] >= 1]
    assert f.loc[f["liars"] == 0, "liars_picked"].eq(0).all()
    assert f.loc[f["liars"] == 2, "liars_picked"].between(0, 2).all() and len(f) == 4
    metas = [__import__("json").loads(p.read_text()) for p in (tmp_path / "quick" / ar.GROUP).glob("*.json")]
    assert sorted(len(m["liar_ids"]) for m in metas) == [0, 2] and {m["torch_threads"] for m in metas} == {1}
    assert ar.missing_lying_runs(runs, "quick", tmp_path) == []


@pytest.mark.slow
def test_share_cap_state_survives_a_checkpoint(tmp_path):
    # the (buffer, rounds_done, picks) state of the share cap goes through the trainer's checkpoints: a run killed
    # after round 5 (last checkpoint: round 4) and resumed picks exactly what the uninterrupted run picks
    from conftest import write_tiny_npz

    from fedlib.training.config import ExperimentConfig
    from fedlib.training.trainer import run_experiment

    path = write_tiny_npz(tmp_path, seed=0, num_samples=240, num_train=160, num_classes=4, signal=True)
    cfg = ExperimentConfig(
        dataset="npz",
        dataset_options={"path": path},
        num_clients=8,
        clients_per_round=3,
        rounds=6,
        local_epochs=1,
        batch_size=16,
        min_partition_size=2,
        beta=0.5,
        augment=False,
        selector="fedentopt",
        checkpoint_every=2,
        selector_params={"buffer_size": 1, "share_cap": 1.0, "total_cap_quantile": 0.5},
    )
    full = run_experiment(cfg, run_root=tmp_path / "a", progress=False)
    part = run_experiment(cfg, run_root=tmp_path / "b", progress=False, stop_after=5)
    assert not part.finished
    resumed = run_experiment(cfg, run_root=tmp_path / "b", progress=False)
    assert resumed.table["picked"].tolist() == full.table["picked"].tolist()
    picks = np.zeros(8, dtype=int)
    for t, text in enumerate(full.table["picked"].iloc[1:], start=1):
        picks[[int(k) for k in text.split()]] += 1
        assert picks.max() <= -(-3 * t // 8)  # ceil(1.0 * M / K * t): the cap never had to yield here


def test_liar_keys_ignore_settings_that_do_not_change_the_run():
    from repro.adversarial_runs import liar_run_key

    run = ar.lying_runs("quick", seeds=(0,), partitions=("C=2",), shares=(0.1,), methods=("FedEntOpt",))[0]
    assert run.config.label_dp_epsilon is None
    clip, keep = (liar_run_key(run.config.replace(dp_negative=m), run.spec) for m in ("clip", "keep"))
    assert clip == keep
    dp = run.config.replace(label_dp_epsilon=1.0)
    assert liar_run_key(dp.replace(dp_negative="clip"), run.spec) != liar_run_key(dp, run.spec)


def test_every_quick_lying_run_is_stored():
    """The page reads the stored runs; a key change would make it retrain all of them."""
    from repro.adversarial_runs import missing_lying_runs

    assert missing_lying_runs(ar.lying_runs("quick"), "quick") == []


def test_accuracy_summary_in_percent_with_liar_picks():
    # two seeds of one method: final accuracies (last 2 rounds) 0.5 and 0.7 -> mean 60 %, std (ddof=0) 10 %;
    # liars picked 1, 0 per round at seed 0 and 2, 2 at seed 1 -> 1.25 per round; rounds with a liar 1/2 and 2/2
    import pandas as pd

    frame = pd.DataFrame(
        {
            "partition": "C=2",
            "liars": 1,
            "method": "FedEntOpt",
            "seed": [0, 0, 0, 1, 1, 1],
            "round": [0, 1, 2, 0, 1, 2],
            "test_accuracy": [0.1, 0.4, 0.6, 0.1, 0.7, 0.7],
            "liars_picked": [0, 1, 0, 0, 2, 2],
        }
    )
    out = ar.accuracy_summary(frame, last=2).iloc[0]
    assert (out["accuracy_mean"], out["accuracy_std"], out["n_seeds"]) == (pytest.approx(60.0), pytest.approx(10.0), 2)
    assert out["liar_picks_per_round"] == pytest.approx(1.25)
    assert ar.liar_picks(frame)["liar_rounds"].tolist() == [0.5, 1.0]
