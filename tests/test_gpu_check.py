"""``python -m fedlib gpu-check`` and the paper tier's cost estimate (repro.cost_model): the command fails
clearly
without CUDA, runs end to end on a CPU with ``--cpu-smoke``, and its records replace the step model."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from repro import cost_model, gpu_check, paper_tier, tiers

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: gpu-check would run")
def test_without_cuda_gpu_check_says_so_in_one_line_and_fails():
    done = subprocess.run(
        [sys.executable, "-m", "fedlib", "gpu-check"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu-check: no CUDA device is available")


@pytest.mark.slow
def test_cpu_smoke_runs_every_step_and_writes_a_record(tmp_path, capsys):
    assert gpu_check.main(["--cpu-smoke", "--out-dir", str(tmp_path)]) == 0
    (path,) = tmp_path.glob("gpu-check-*-cpu-smoke.json")
    rec = json.loads(path.read_text())
    assert rec["cuda"] is False and rec["smoke"] is True and rec["tests"]["ran"] is False
    assert set(rec["trainer"]) == {"lenet5", "vgg11"}
    for times in rec["trainer"].values():
        assert {"a", "b", "c", "steps_per_round", "eval_s_per_sample"} <= set(times)
    assert rec["selection"]["round1"]["same_picks"] and rec["selection"]["steady"]["same_picks"]
    assert [t["target"].split(":")[0] for t in rec["targets"]][:3] == ["LeNet-5", "LeNet-5", "VGG-11"]
    # a CPU record is never taken for a GPU measurement
    assert cost_model.measured_step_times(tmp_path) is None
    assert set(rec["estimate"]["sources"].values()) == {"step model"}
    assert "## targets" in capsys.readouterr().out


def test_targets_are_compared_in_the_right_direction():
    trainer = {"lenet5": {"a": 1.0, "c": 0.01}, "vgg11": {"a": 1.0, "c": 0.5}}
    rows = {r["target"]: r for r in gpu_check.compare_targets(trainer, {"K": 10, "M": 2, "round1": {"torch_s": 0.05}})}
    lenet500, lenet_ratio, vgg_ratio = (rows[k] for k in list(rows)[:3])
    assert lenet500["value"] == pytest.approx(5.0) and lenet500["met"] is True  # 5 s <= 10 s
    assert lenet_ratio["value"] == pytest.approx(100.0) and lenet_ratio["met"] is True  # 100x >= 50x
    assert vgg_ratio["value"] == pytest.approx(2.0) and vgg_ratio["met"] is False  # 2x < 5x
    assert [r["met"] for r in rows.values()][3:] == [True, None]  # steady state not measured


def _record(folder: Path, stamp: str, lenet_batched: float) -> None:
    rec = {
        "kind": "gpu-check",
        "cuda": True,
        "device": "NVIDIA H100 80GB HBM3",
        "step_times": {"lenet5": {"reference": 2e-3, "batched": lenet_batched, "eval": 1e-7}},
    }
    (folder / f"gpu-check-{stamp}.json").write_text(json.dumps(rec))


def test_the_newest_cuda_record_replaces_the_step_model(tmp_path):
    one = tiers.tier_config("paper", method="FedAvg", partition_name="Dir(0.1)")
    n_train = paper_tier._data_sizes(one.dataset)[0]
    steps = cost_model.run_steps(one, n_train)
    assert steps == pytest.approx(500 * 10 * 5 * (50_000 / 100 / 64 + 0.5))
    modelled = cost_model.run_seconds(one, n_train, 500 * 10_000, "batched")
    assert modelled[2] == "step model"
    _record(tmp_path, "20260101T000000Z", 1e-3)
    _record(tmp_path, "20260201T000000Z", 5e-4)
    measured = cost_model.measured_step_times(tmp_path)
    assert measured["file"].endswith("20260201T000000Z.json")
    train, ev, source = cost_model.run_seconds(one, n_train, 500 * 10_000, "batched", measured)
    assert source == "measured" and train == pytest.approx(steps * 5e-4) and ev == pytest.approx(0.5)
    # FedConcat trains client after client on any model (its clients start from their clusters' models)
    concat = dataclasses.replace(one, algorithm="fedconcat")
    train, _, _ = cost_model.run_seconds(concat, n_train, 500 * 10_000, "batched", measured)
    assert train == pytest.approx(steps * 2e-3)
    size = paper_tier.tier_size("paper", groups=["fedentropy"], records_dir=tmp_path)
    assert size.attrs["sources"] == {"lenet5": "measured"}
    assert "measured by gpu-check on NVIDIA H100" in paper_tier.format_size(size)


def test_step_model_is_launch_bound_for_lenet5_and_compute_bound_for_vgg11():
    m = cost_model.STEP_MODEL
    lenet_ref = m.step_seconds("lenet5", "reference", 64, 10)
    assert lenet_ref == pytest.approx(m.ops["lenet5"] * m.t_op)
    assert m.step_seconds("lenet5", "batched", 64, 10) == pytest.approx(lenet_ref * m.max_over_mean / 10)
    vgg = 3 * m.flops["vgg11"] * 64 / m.rate["vgg11"]
    assert m.step_seconds("vgg11", "reference", 64, 10) == pytest.approx(max(vgg, m.ops["vgg11"] * m.t_op))
    # EfficientNet (BatchNorm) falls back to the reference engine: batching does not change its step
    assert m.step_seconds("efficientnet-b0", "batched", 64, 5) == m.step_seconds("efficientnet-b0", "reference", 64, 5)
    with pytest.raises(ValueError, match=r"^parameter 'engine': got 'fast'; allowed: 'reference', 'batched'\.$"):
        m.step_seconds("lenet5", "fast", 64, 10)


@pytest.mark.parametrize("model", ["lenet5", pytest.param("vgg11", marks=pytest.mark.slow)])
def test_step_model_constants_are_the_counted_ones(model):
    m = cost_model.STEP_MODEL
    assert cost_model.count_step_ops(model) == m.ops[model]
    assert cost_model.count_eval_ops(model) == m.eval_ops[model]
    assert cost_model.forward_flops(model) == pytest.approx(m.flops[model], rel=1e-3)
