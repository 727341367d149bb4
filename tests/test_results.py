"""repro.results (the store/load round trip) and repro.reporting (the paper's statistic,
rounds to a target,
summaries)."""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedlib.training.config import ExperimentConfig
from repro import reporting, results, tiers


def _table(seed, accs):
    # round 0 is the initial model and never counts
    return pd.DataFrame({"seed": seed, "round": range(len(accs)), "test_accuracy": accs})


def test_final_accuracy_hand_made():
    # seed 0: rounds 1..12 have accuracies 0.1..1.2 (round 0: 0.0); the final 10 rounds are 3..12 -> mean of
    #         0.3..1.2 = (0.3 + 1.2) / 2 = 0.75
    # seed 1: rounds 1..12 all 0.55 -> 0.55
    # mean over seeds (0.75 + 0.55) / 2 = 0.65; std (ddof=0) = |0.75 - 0.65| = 0.10; reported in %
    t = pd.concat([_table(0, [0.0] + [i / 10 for i in range(1, 13)]), _table(1, [0.0] + [0.55] * 12)])
    fa = reporting.final_accuracy(t, last=10)
    assert fa.n_seeds == 2
    assert fa.mean == pytest.approx(65.0)
    assert fa.std == pytest.approx(10.0)
    # last=2: seed 0 -> (1.1 + 1.2) / 2 = 1.15, seed 1 -> 0.55; mean 0.85, std 0.30
    fa2 = reporting.final_accuracy(t, last=2)
    assert (fa2.mean, fa2.std) == (pytest.approx(85.0), pytest.approx(30.0))


def test_final_accuracy_grouped_and_skips_unevaluated_rounds():
    a = _table(0, [0.0, 0.2, np.nan, 0.4])  # NaN: not evaluated; last 2 evaluated = 0.2, 0.4 -> 0.3
    a["method"] = "A"
    b = _table(0, [0.0, 0.9, 0.9, 0.9])
    b["method"] = "B"
    out = reporting.final_accuracy(pd.concat([a, b]), last=2, by=["method"]).set_index("method")
    assert out.loc["A", "mean"] == pytest.approx(30.0)
    assert out.loc["B", "mean"] == pytest.approx(90.0)
    assert out.loc["A", "std"] == 0.0 and out.loc["A", "n_seeds"] == 1


def test_rounds_to_target():
    t = pd.DataFrame({"round": [0, 1, 2, 3, 4], "test_accuracy": [0.9, 0.1, 0.5, 0.45, 0.7]})
    assert reporting.rounds_to_target(t, 0.5) == 2  # round 0 (0.9) does not count
    assert reporting.rounds_to_target(t, 0.6) == 4
    assert reporting.rounds_to_target(t, 0.95) is None
    two = pd.concat([t.assign(seed=0, method="A"), t.assign(seed=1, method="A", test_accuracy=[0, 0.6, 0.6, 0.6, 0.6])])
    assert reporting.rounds_to_target(two, 0.5) == {0: 2, 1: 1}
    g = reporting.rounds_to_target(two, 0.65, by=["method"]).iloc[0]
    assert g["reached"] == 1 and g["runs"] == 2 and g["mean_rounds"] == 4.0


def test_store_load_round_trip(tmp_path):
    cfg = tiers.tier_config("quick", method="FedEntOpt", partition_name="C=2", rounds=3)
    table = pd.DataFrame(
        {
            "round": [0, 1, 2, 3],
            "test_accuracy": [0.1, 0.2, 0.3, 0.123456789],
            "test_loss": [2.3, 2.0, 1.9, 1.8],
            "covers_all_classes": [False, True, True, True],
            "picked": ["", "1 2", "3 4", "5 6"],
        }
    )
    label = {"partition": "C=2", "method": "FedEntOpt", "seed": 0}
    csv = results.store_run(table, cfg, "quick", "table1", label, results_dir=tmp_path, wall_seconds=1.234)
    assert csv.name == results.run_key(cfg) + ".csv"
    back, meta = results.load_run(csv)
    assert list(back["test_accuracy"]) == [0.1, 0.2, 0.3, 0.12346]  # rounded to 5 decimals
    assert "picked" not in back.columns  # not stored: keeps the tables small
    assert ExperimentConfig.from_dict(meta["config"]) == cfg
    assert meta["label"] == label and meta["wall_seconds"] == 1.23 and meta["tier"] == "quick"
    stored = results.load_group("quick", "table1", tmp_path)
    assert len(stored) == 1 and set(stored.frame["method"]) == {"FedEntOpt"}
    assert results.find_stored(cfg, "quick", tmp_path) == csv
    assert results.find_stored(cfg.replace(seed=5), "quick", tmp_path) is None
    assert "tier 'quick'" in reporting.provenance(stored)
    run = tiers.PlannedRun("buffer", label, cfg)
    assert results.missing_runs([run], "quick", tmp_path) == [run]  # stored under table1, not buffer
    info = results.ensure_runs([run], "quick", results_dir=tmp_path, log=lambda s: None)  # copied, not trained
    assert info["copied"] == 1 and info["trained"] == 0
    assert results.missing_runs([run], "quick", tmp_path) == []
    assert results.load_group("quick", "nothing", tmp_path).empty


def test_store_run_with_a_group_key_columns_and_fields(tmp_path):
    # a group keyed by more than the config (the lying clients) stores under its own key, with its own columns
    cfg = tiers.tier_config("quick", rounds=1)
    table = pd.DataFrame({"round": [0, 1], "test_accuracy": [0.1, 0.2], "picked": ["", "1 2"]})
    csv = results.store_run(
        table,
        cfg,
        "quick",
        "group",
        {"seed": 0},
        results_dir=tmp_path,
        key="0123abcd",
        columns={"extra_col": [0, 2]},
        extra_meta={"liar_ids": [1]},
    )
    assert csv == results.group_dir(tmp_path, "quick", "group") / "0123abcd.csv"
    back, meta = results.load_run(csv)
    assert list(back.columns)[-1] == "extra_col" and list(back["extra_col"]) == [0, 2]
    assert meta["key"] == "0123abcd" and meta["liar_ids"] == [1] and meta["label"] == {"seed": 0}
    with pytest.raises(
        ValueError,
        match=r"^parameter 'extra_meta': got \{'key': .*\}; allowed: fields other than the stored ones \['key'\]\.$",
    ):
        results.store_run(table, cfg, "quick", "group", {"seed": 0}, results_dir=tmp_path, extra_meta={"key": "x"})


def test_a_group_read_again_hands_out_a_fresh_copy_and_sees_every_change_to_its_files(tmp_path):
    """The group is parsed once per content of its folder: changing what one call returned leaves the next call's
    alone; a file rewritten in place with bytes of the same length, and a run stored later, are both read."""
    cfg = tiers.tier_config("quick", rounds=1)
    table = pd.DataFrame({"round": [0, 1], "test_accuracy": [0.1, 0.2]})
    csv = results.store_run(table, cfg, "quick", "g", {"seed": 0}, results_dir=tmp_path, float_env=None)
    first = results.load_group("quick", "g", tmp_path)
    first.frame.loc[:, "test_accuracy"] = -1.0
    first.meta.loc[:, "seed"] = 99
    again = results.load_group("quick", "g", tmp_path)
    assert list(again.frame["test_accuracy"]) == [0.1, 0.2] and list(again.meta["seed"]) == [0]
    csv.write_text(csv.read_text().replace("0.2", "0.7"))  # same size, same folder
    assert list(results.load_group("quick", "g", tmp_path).frame["test_accuracy"]) == [0.1, 0.7]
    results.store_run(table, cfg.replace(seed=1), "quick", "g", {"seed": 1}, results_dir=tmp_path, float_env=None)
    assert sorted(results.load_group("quick", "g", tmp_path).meta["seed"]) == [0, 1]


def test_run_key_ignores_device_and_data_root():
    cfg = tiers.tier_config("quick")
    assert results.run_key(cfg) == results.run_key(cfg.replace(data_root="/elsewhere", eval_batch_size=7))
    assert results.run_key(cfg) != results.run_key(cfg.replace(seed=1))


def test_a_gpu_run_of_a_cpu_tier_is_stored_as_another_machines_never_beside_the_cpu_runs(tmp_path):
    """The device does not enter the key, so a CUDA run of the subset tier would mix into its CPU column: refused
    for the repository's store, before any work, naming the parameter and the folder to use; a machine's folder
    takes it; the paper tier (a GPU tier) stores it where it is."""
    gpu = tiers.tier_config("subset", rounds=3).replace(device="cuda")
    table = pd.DataFrame({"round": [0, 1], "test_accuracy": [0.1, 0.2]})
    label = {"seed": 0}
    with pytest.raises(
        ValueError, match=r"^parameter 'results_dir': got the repository's results/ for .* allowed: results/machines/"
    ):
        results.store_run(table, gpu, "subset", "table1", label, float_env=None)
    with pytest.raises(ValueError, match="results_dir"):
        results.ensure_runs([tiers.PlannedRun("table1", label, gpu)], "subset", log=lambda *a: None)
    assert not (results.RESULTS_DIR / "subset" / "table1" / f"{results.run_key(gpu)}.csv").exists()
    machine = tmp_path / "machines" / "h100"
    assert results.store_run(table, gpu, "subset", "table1", label, results_dir=machine, float_env=None).exists()
    paper = tiers.tier_config("paper", rounds=3).replace(device="cuda")
    results.check_store([paper], "paper")  # no error


def test_table1_summary_puts_paper_beside_ours(tmp_path):
    for method, acc in (("FedAvg", 0.4), ("FedEntOpt", 0.5)):
        for seed in (0, 1):
            cfg = tiers.tier_config("subset", method=method, partition_name="Dir(0.1)", seed=seed, rounds=2)
            t = pd.DataFrame({"round": [0, 1, 2], "test_accuracy": [0.1, acc, acc + 0.01 * seed]})
            results.store_run(
                t,
                cfg,
                "subset",
                "table1",
                {"partition": "Dir(0.1)", "method": method, "seed": seed},
                results_dir=tmp_path,
            )
    s = reporting.table1_summary(results.load_group("subset", "table1", tmp_path)).set_index("method")
    # FedAvg: seed 0 -> (0.4 + 0.4) / 2 = 0.40, seed 1 -> (0.4 + 0.41) / 2 = 0.405; mean 40.25 %
    assert s.loc["FedAvg", "ours_mean"] == pytest.approx(40.25)
    assert s.loc["FedAvg", "paper_mean"] == 46.61 and s.loc["FedEntOpt", "paper_mean"] == 52.80
    assert list(s.index) == ["FedAvg", "FedEntOpt"]


def test_format_pm():
    assert reporting.format_pm(46.61, 0.17) == "46.61 ± 0.17"
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

    from fedlib.data.datasets import file_provenance

    path = tmp_path / "deep" / "subset.npz"
    path.parent.mkdir()
    path.write_bytes(b"fedlib" * 1000)
    assert file_provenance(path) == f"subset.npz (sha256 {hashlib.sha256(b'fedlib' * 1000).hexdigest()[:16]})"
    assert str(tmp_path) not in file_provenance(path)


# Stored quick-tier runs, trained again now (scripts/reproduce_stored.py, with the thread count each run records).
# Where this machine computes floats as the one that stored them (repro.float_env: CPU capability, oneDNN/MKL
# caps,
# threads, torch), every column but the wall time comes out bit for bit; elsewhere the first rounds, retrained
# twice, are identical and within float tolerance of the stored ones.
REPRODUCED = [  # (stored CSV under results/quick, what it covers)
    "lying_clients/39a2a126fd61103b.csv",  # FedEntOpt, no liars: run_experiment, C=2
    "lying_clients/b44c5607bcccac22.csv",  # FedEntOpt, 2 liars: trainer.Experiment with liars' counts
    "lying_clients/aed19fb99f87c9b8.csv",  # random selection (FedAvg), 2 liars
    "table1/5e078077a17e64bb.csv",  # FedEntOpt (DP): label-DP stream, through run_experiment
]
ROOT = Path(__file__).resolve().parents[1]


def _reproduce_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("reproduce_stored", ROOT / "scripts" / "reproduce_stored.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


@pytest.mark.slow
@pytest.mark.parametrize("csv", REPRODUCED)
def test_stored_quick_runs_reproduce(csv):
    import torch

    script = _reproduce_script()
    path = ROOT / "results" / "quick" / csv
    assert json.loads(path.with_suffix(".json").read_text())["float_env"]["cpu_capability"]  # recorded
    before = torch.get_num_threads()
    torch.set_num_threads(script.stored_threads(path))
    try:
        how, problem = script.check(path)
    finally:
        torch.set_num_threads(before)
    assert problem is None, f"{how}: {problem}"


def test_tolerant_comparison_fails_beyond_the_tolerance_and_on_any_other_column():
    script = _reproduce_script()
    cols = ["round", "test_accuracy", "test_loss", "num_picked"]

    def table(*rows):
        return pd.DataFrame([[str(v) for v in r] for r in rows], columns=cols)

    stored = table((0, 0.133, 2.30457, 0), (1, 0.1, 2.31569, 5))
    tol = script.FLOAT_TOLERANCE
    assert script._first_difference(stored, table((0, 0.133, 2.30457, 0), (1, 0.104, 2.3166, 5)), tol) is None
    beyond = script._first_difference(stored, table((0, 0.133, 2.30457, 0), (1, 0.1, 2.32, 5)), tol)
    assert beyond == (
        "first difference in row 1 (round 1), column 'test_loss': stored '2.31569', retrained "
        "'2.32' (more than 0.003 apart)"
    )
    other = script._first_difference(stored, table((0, 0.133, 2.30457, 0), (1, 0.1, 2.31569, 4)), tol)
    assert other.startswith("first difference in row 1 (round 1), column 'num_picked'")
    assert script._first_difference(stored, table((0, 0.133, 2.30457, 0), (1, 0.1, 2.31569, 5))) is None
    assert "differ" in script._first_difference(stored, table((0, 0.133, 2.30457, 0), (1, 0.101, 2.31569, 5)))


@pytest.mark.slow
def test_every_stored_retrain_on_another_machine_is_within_the_float_tolerance():
    """The tolerance of the cross-machine check holds for what was measured: every quick-tier run retrained under
    another environment (results/machines/) agrees with its stored twin within FLOAT_TOLERANCE up to
    TOLERANT_ROUNDS, every other column equal."""
    script = _reproduce_script()
    pairs = [
        (m, ROOT / "results" / "quick" / m.parts[-2] / m.name)
        for m in sorted((ROOT / "results" / "machines").glob("*/quick/*/*.csv"))
    ]
    pairs = [(m, s) for m, s in pairs if s.exists()]
    assert len(pairs) >= 300, len(pairs)
    for machine_csv, stored_csv in pairs:
        a, b = (script._without_seconds(p.read_text()) for p in (stored_csv, machine_csv))
        a, b = (t[t["round"].astype(int) <= script.TOLERANT_ROUNDS].reset_index(drop=True) for t in (a, b))
        problem = script._first_difference(a, b, script.FLOAT_TOLERANCE)
        assert problem is None, f"{machine_csv}: {problem}"


def test_float_env_names_what_differs():
    from repro import float_env

    here = float_env.current(threads=3)
    assert set(here) == set(float_env.FIELDS) and here["threads"] == 3 and here["device"] == "cpu"
    assert float_env.differences(here, dict(here)) == []
    assert float_env.differences(here, {**here, "threads": 1, "cpu_capability": "X"}) == ["cpu_capability", "threads"]
    assert float_env.differences(None, here) == ["unrecorded"]
    assert float_env.describe(None) == "not recorded"
    assert "3 threads" in float_env.describe(here)
    gpu = {**here, "device": "cuda: NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130"}
    assert float_env.short(gpu) == "CUDA NVIDIA H100 80GB HBM3, torch 2.11.0+cu130"
    assert float_env.describe(gpu).startswith("cuda: NVIDIA H100 80GB HBM3, torch 2.11.0+cu130 (host: ")


def _python(code: str, env: dict, cwd=ROOT, checkout_path: bool = True):
    """Run ``python <code>`` with ``env``; ``checkout_path=False``: without the checkout on ``PYTHONPATH`` (which
    conftest puts there), as a user runs a script."""
    import os
    import subprocess
    import sys

    drop = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA") + (() if checkout_path else ("PYTHONPATH",))
    full = {**{k: v for k, v in os.environ.items() if k not in drop}, **env}
    return subprocess.run([sys.executable, *code], capture_output=True, text=True, env=full, cwd=cwd, timeout=600)


@pytest.mark.slow
def test_another_cpu_imitated_in_a_subprocess_is_recorded_and_compared_with_tolerance(tmp_path):
    """Both paths of the check, in environments imitated with ATEN_CPU_CAPABILITY=default and ONEDNN_MAX_CPU_ISA
    (any CPU has the 'default' capability): a run stored there comes out bit for bit in the same environment and
    is held to float tolerance under another thread count and under the CPU's own capability."""
    imitated = {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "OMP_NUM_THREADS": "1"}
    store = (
        "import torch; torch.set_num_threads(1)\n"
        "from repro import results, tiers\nfrom fedlib.training.trainer import run_experiment\n"
        "cfg = tiers.tier_config('quick', method='FedEntOpt', partition_name='C=2', rounds=3)\n"
        "t = run_experiment(cfg, progress=False).table\n"
        f"print(results.store_run(t, cfg, 'quick', 'probe', {{'seed': 0}}, results_dir={str(tmp_path)!r}))"
    )
    out = _python(["-c", store], imitated)
    assert out.returncode == 0, out.stderr
    csv = Path(out.stdout.strip().splitlines()[-1])
    env = json.loads(csv.with_suffix(".json").read_text())["float_env"]
    assert (env["cpu_capability"], env["onednn_max_cpu_isa"], env["threads"]) == (
        "DEFAULT",
        "ONEDNN_MAX_CPU_ISA=SSE41",
        1,
    )
    script = ["scripts/reproduce_stored.py", "--csv", str(csv)]
    same = _python(script, imitated, checkout_path=False)
    assert same.returncode == 0 and "same (bit for bit)" in same.stdout, same.stdout + same.stderr
    threads = _python(script + ["--threads", "2"], imitated, checkout_path=False)
    assert threads.returncode == 0, threads.stdout + threads.stderr
    assert "same (first 1 round within float tolerance (environment differs in threads))" in threads.stdout
    native = _python(script, {"OMP_NUM_THREADS": "1"}, checkout_path=False)
    assert native.returncode == 0, native.stdout + native.stderr
    assert "within float tolerance (environment differs in " in native.stdout
    assert "onednn_max_cpu_isa" in native.stdout


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
    assert len(results.load_group("quick", "table1", tmp_path)) == 1
    store("bbbbbbbbbbbbbbbb")
    with pytest.raises(ValueError, match="runs aaaaaaaaaaaaaaaa and bbbbbbbbbbbbbbbb are stored with the same label"):
        results.load_group("quick", "table1", tmp_path)


def test_medical_summary_puts_table_iv_beside_ours_in_the_papers_row_order(tmp_path):
    for method, acc in (("FedEntOpt", 0.6), ("FedAvg", 0.5)):
        for seed in (0, 1):
            run = next(
                r
                for r in tiers.group_configs("paper", "medical", rounds=2)
                if r.label == {**r.label, "dataset": "pathmnist", "model": "efficientnet-b0", "method": method}
                and r.label["seed"] == seed
            )
            t = pd.DataFrame({"round": [0, 1, 2], "test_accuracy": [0.1, acc, acc + 0.02 * seed]})
            results.store_run(t, run.config, "paper", "medical", run.label, results_dir=tmp_path, float_env=None)
    s = reporting.medical_summary(results.load_group("paper", "medical", tmp_path)).set_index("method")
    assert list(s.index) == ["FedAvg", "FedEntOpt"]  # Table IV's row order (paper_values.TABLE_IV_METHODS)
    # FedAvg: seed 0 -> 50 %, seed 1 -> (50 + 52) / 2 = 51 %; mean 50.5 %, std (ddof 0) 0.5
    assert s.loc["FedAvg", "ours_mean"] == pytest.approx(50.5) and s.loc["FedAvg", "ours_std"] == pytest.approx(0.5)
    # the paper's cells: Table IV, PathMNIST, EfficientNet-B0
    assert (s.loc["FedAvg", "paper_mean"], s.loc["FedEntOpt", "paper_mean"]) == (82.26, 90.17)
    empty = reporting.medical_summary(results.load_group("paper", "medical", tmp_path / "none"))
    assert empty.empty and "paper_mean" in empty.columns
