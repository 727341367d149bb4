"""fedlib.results (the store/load round trip) and fedlib.reporting (the paper's statistic, rounds to a target,
summaries)."""
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedlib import reporting, results, tiers
from fedlib.config import ExperimentConfig


def _table(seed, accs):
    # round 0 is the initial model and never counts
    return pd.DataFrame({"seed": seed, "round": range(len(accs)), "test_accuracy": accs})


def test_final_accuracy_hand_made():
    # seed 0: rounds 1..12 have accuracies 0.1..1.2 (round 0: 0.0); the final 10 rounds are 3..12 -> mean of
    #         0.3..1.2 = (0.3 + 1.2) / 2 = 0.75
    # seed 1: rounds 1..12 all 0.55 -> 0.55
    # mean over seeds (0.75 + 0.55) / 2 = 0.65; std (ddof=0) = |0.75 - 0.65| = 0.10
    t = pd.concat([_table(0, [0.0] + [i / 10 for i in range(1, 13)]), _table(1, [0.0] + [0.55] * 12)])
    fa = reporting.final_accuracy(t, last=10)
    assert fa.n_seeds == 2
    assert fa.mean == pytest.approx(0.65)
    assert fa.std == pytest.approx(0.10)
    # last=2: seed 0 -> (1.1 + 1.2) / 2 = 1.15, seed 1 -> 0.55; mean 0.85, std 0.30
    fa2 = reporting.final_accuracy(t, last=2)
    assert (fa2.mean, fa2.std) == (pytest.approx(0.85), pytest.approx(0.30))


def test_final_accuracy_grouped_and_skips_unevaluated_rounds():
    a = _table(0, [0.0, 0.2, np.nan, 0.4])  # NaN: not evaluated; last 2 evaluated = 0.2, 0.4 -> 0.3
    a["method"] = "A"
    b = _table(0, [0.0, 0.9, 0.9, 0.9])
    b["method"] = "B"
    out = reporting.final_accuracy(pd.concat([a, b]), last=2, by=["method"]).set_index("method")
    assert out.loc["A", "mean"] == pytest.approx(0.3)
    assert out.loc["B", "mean"] == pytest.approx(0.9)
    assert out.loc["A", "std"] == 0.0 and out.loc["A", "n_seeds"] == 1


def test_rounds_to_target():
    t = pd.DataFrame({"round": [0, 1, 2, 3, 4], "test_accuracy": [0.9, 0.1, 0.5, 0.45, 0.7]})
    assert reporting.rounds_to_target(t, 0.5) == 2  # round 0 (0.9) does not count
    assert reporting.rounds_to_target(t, 0.6) == 4
    assert reporting.rounds_to_target(t, 0.95) is None
    two = pd.concat([t.assign(seed=0, method="A"), t.assign(seed=1, method="A",
                                                            test_accuracy=[0, 0.6, 0.6, 0.6, 0.6])])
    assert reporting.rounds_to_target(two, 0.5) == {0: 2, 1: 1}
    g = reporting.rounds_to_target(two, 0.65, by=["method"]).iloc[0]
    assert g["reached"] == 1 and g["runs"] == 2 and g["mean_rounds"] == 4.0


def test_store_load_round_trip(tmp_path):
    cfg = tiers.tier_config("quick", method="FedEntOpt", partition_name="C=2", rounds=3)
    table = pd.DataFrame({"round": [0, 1, 2, 3], "test_accuracy": [0.1, 0.2, 0.3, 0.123456789],
                          "test_loss": [2.3, 2.0, 1.9, 1.8], "covers_all_classes": [False, True, True, True],
                          "picked": ["", "1 2", "3 4", "5 6"]})
    label = {"partition": "C=2", "method": "FedEntOpt", "seed": 0}
    csv = results.store_run(table, cfg, "quick", "table1", label, results_dir=tmp_path, wall_seconds=1.234)
    assert csv.name == results.run_key(cfg) + ".csv"
    back, meta = results.load_run(csv)
    assert list(back["test_accuracy"]) == [0.1, 0.2, 0.3, 0.12346]  # rounded to 5 decimals
    assert "picked" not in back.columns  # not stored: keeps the tables small
    assert ExperimentConfig.from_dict(meta["config"]) == cfg
    assert meta["label"] == label and meta["wall_seconds"] == 1.23 and meta["tier"] == "quick"
    stored = results.load_experiment("quick", "table1", tmp_path)
    assert len(stored) == 1 and set(stored.frame["method"]) == {"FedEntOpt"}
    assert results.find_stored(cfg, "quick", tmp_path) == csv
    assert results.find_stored(cfg.replace(seed=5), "quick", tmp_path) is None
    assert "tier 'quick'" in reporting.provenance(stored)
    run = tiers.Run("buffer", label, cfg)
    assert results.missing_runs([run], "quick", tmp_path) == [run]  # stored under table1, not buffer
    info = results.ensure_runs([run], "quick", results_dir=tmp_path, log=lambda s: None)  # copied, not trained
    assert info["copied"] == 1 and info["trained"] == 0
    assert results.missing_runs([run], "quick", tmp_path) == []
    assert results.load_experiment("quick", "nothing", tmp_path).empty


def test_run_key_ignores_device_and_data_root():
    cfg = tiers.tier_config("quick")
    assert results.run_key(cfg) == results.run_key(cfg.replace(data_root="/elsewhere", eval_batch_size=7))
    assert results.run_key(cfg) != results.run_key(cfg.replace(seed=1))


def test_table1_summary_puts_paper_beside_ours(tmp_path):
    for method, acc in (("FedAvg", 0.4), ("FedEntOpt", 0.5)):
        for seed in (0, 1):
            cfg = tiers.tier_config("subset", method=method, partition_name="Dir(0.1)", seed=seed, rounds=2)
            t = pd.DataFrame({"round": [0, 1, 2], "test_accuracy": [0.1, acc, acc + 0.01 * seed]})
            results.store_run(t, cfg, "subset", "table1", {"partition": "Dir(0.1)", "method": method,
                                                           "seed": seed}, results_dir=tmp_path)
    s = reporting.table1_summary(results.load_experiment("subset", "table1", tmp_path)).set_index("method")
    # FedAvg: seed 0 -> (0.4 + 0.4) / 2 = 0.40, seed 1 -> (0.4 + 0.41) / 2 = 0.405; mean 40.25 %
    assert s.loc["FedAvg", "ours_mean"] == pytest.approx(40.25)
    assert s.loc["FedAvg", "paper_mean"] == 46.61 and s.loc["FedEntOpt", "paper_mean"] == 52.80
    assert list(s.index) == ["FedAvg", "FedEntOpt"]


def test_format_pm():
    assert reporting.format_pm(0.4661, 0.0017) == "46.61 ± 0.17"
    assert reporting.format_pm(math.nan, 0.0) == "–"


def test_stored_results_name_their_data_without_a_machine_path():
    """Provenance gives the data set's name (and a checksum for files), never a path of the machine that trained."""
    import re

    root = Path(__file__).resolve().parents[1] / "results"
    sources = {json.loads(p.read_text()).get("data_source") for p in root.glob("*/*/*.json")}
    assert sources, "no stored results found"
    with_path = sorted(s for s in sources if s and re.search(r"(^|\s)(/|[A-Za-z]:\\\\)", s))
    assert not with_path, with_path


def test_file_provenance_is_name_and_checksum(tmp_path):
    import hashlib

    from fedlib.datasets import file_provenance

    path = tmp_path / "deep" / "subset.npz"
    path.parent.mkdir()
    path.write_bytes(b"fedlib" * 1000)
    assert file_provenance(path) == f"subset.npz (sha256 {hashlib.sha256(b'fedlib' * 1000).hexdigest()[:16]})"
    assert str(tmp_path) not in file_provenance(path)


# Stored quick-tier runs, trained again now: their stored tables come out bit for bit (every column but the wall
# time). The thread count is the one each run was trained with (on CPU it changes the floating-point sums): the
# lying-clients group records torch_threads = 1 in its JSON; the FedEntOpt (DP) run of Table I (commit 41952fb)
# was trained by scripts/run_experiments.py with 2. scripts/reproduce_stored.py does the same for any stored run.
REPRODUCED = [  # (stored CSV under results/quick, torch threads, what it covers)
    ("lying_clients/39a2a126fd61103b.csv", 1),  # FedEntOpt, no liars: run_experiment, C=2
    ("lying_clients/b44c5607bcccac22.csv", 1),  # FedEntOpt, 2 liars: trainer.Experiment with liars' counts
    ("lying_clients/aed19fb99f87c9b8.csv", 1),  # random selection (FedAvg), 2 liars
    ("table1/5e078077a17e64bb.csv", 2),  # FedEntOpt (DP): label-DP stream, through run_experiment
]


@pytest.mark.parametrize("csv, threads", REPRODUCED, ids=[c for c, _ in REPRODUCED])
def test_stored_quick_runs_reproduce_bit_for_bit(csv, threads):
    import importlib.util

    import torch

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("reproduce_stored", root / "scripts" / "reproduce_stored.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        assert script.compare(root / "results" / "quick" / csv) is None
    finally:
        torch.set_num_threads(before)


def test_two_stored_runs_with_one_label_are_refused(tmp_path):
    import shutil

    src = sorted((Path(__file__).resolve().parents[1] / "results" / "quick" / "table1").glob("*.csv"))[0]
    meta = json.loads(src.with_suffix(".json").read_text())
    d = tmp_path / "quick" / "table1"
    d.mkdir(parents=True)

    def store(key):
        shutil.copy(src, d / f"{key}.csv")
        (d / f"{key}.json").write_text(json.dumps({**meta, "key": key}))

    store("aaaaaaaaaaaaaaaa")
    assert len(results.load_experiment("quick", "table1", tmp_path)) == 1
    store("bbbbbbbbbbbbbbbb")
    with pytest.raises(ValueError, match="runs aaaaaaaaaaaaaaaa and bbbbbbbbbbbbbbbb are stored with the same label"):
        results.load_experiment("quick", "table1", tmp_path)
