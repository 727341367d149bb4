"""``python -m fedlib gpu-check``: what a user runs first on a GPU machine (minutes on one H100).

1. the CUDA tests (``pytest -m cuda``: ``tests/test_devices.py``, every test parametrised over the devices:
   batched vs reference with TF32 off, augmentation, local training, the torch scorer, checkpoint and resume, two
   workers, a training step under ``torch.cuda.set_sync_debug_mode("error")``);
2. ``benchmarks/bench_trainer.py``'s paper setting for LeNet-5 and VGG-11, three ways (DataLoader loop, fedlib's
   reference engine, the batched engine), plus one evaluation pass over 10,000 images;
3. ``benchmarks/bench_selection.py``'s headline (K = 10^5, M = 10^3, C = 100) with the torch scorer on CUDA
   against the default CPU scorer in the same process (same picks checked);
4. a benchmark record ``benchmarks/results/gpu-check-<UTC time>.json``: the device, the numerics
   (``fedlib.training.numerics``), the test outcome, the timings, the GPU targets (``TARGETS``) met or missed, the
   seconds per client step of both engines (which ``repro.cost_model`` then uses for the paper tier) and the paper
   tier's GPU hours re-estimated from them.

Without CUDA it prints one line and exits with status 1.  ``--cpu-smoke`` runs the same steps on the CPU with
tiny sizes and no tests (it checks the command itself; its record says ``"cuda": false`` and is never used as a
measurement).  Exit status: 0 when the tests pass (targets are reported, not enforced), 2 when a test fails.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The test files whose ``cuda`` tests gpu-check runs.
CUDA_TEST_FILES = ("tests/test_devices.py",)
#: The GPU targets on one H100 (benchmarks/README.md).
TARGETS = {"lenet5_500_rounds_s": 10.0, "lenet5_a_over_c": 50.0, "vgg11_a_over_c": 5.0, "selection_round_s": 0.1}

__all__ = ["main", "Plan", "TARGETS", "compare_targets", "step_times", "no_cuda_message"]


@dataclass(frozen=True)
class Plan:
    """Sizes of one gpu-check run (``full``: the paper setting; ``smoke``: seconds on a CPU)."""

    device: str
    rounds: dict
    trainer_args: tuple
    eval_samples: int
    selection: tuple  # K, M, C
    run_tests: bool
    test_timeout_s: int = 300

    @classmethod
    def full(cls) -> "Plan":
        return cls("cuda", {"lenet5": 3, "vgg11": 2}, ("--warmup", "1"), 10_000, (100_000, 1_000, 100), True)

    @classmethod
    def smoke(cls) -> "Plan":
        return cls(
            "cpu",
            {"lenet5": 1, "vgg11": 1},
            (
                "--warmup",
                "0",
                "--epochs",
                "1",
                "--clients-per-round",
                "2",
                "--max-client-samples",
                "8",
                "--threads",
                "1",
            ),
            64,
            (2_000, 20, 10),
            False,
        )


def no_cuda_message() -> str:
    import torch

    built = torch.version.cuda or "none (a CPU-only build)"
    return (
        f"gpu-check: no CUDA device is available (torch {torch.__version__}, CUDA build: {built}); run it on "
        "a machine with an NVIDIA GPU and a CUDA build of torch."
    )


def _load_bench(name: str):
    spec = importlib.util.spec_from_file_location(f"fedlib_bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------------------------------------------- parts
def run_tests(plan: Plan, log) -> dict:
    """``pytest -m cuda`` on ``CUDA_TEST_FILES`` in a child process: its counts and return code."""
    if not plan.run_tests:
        return {"ran": False, "reason": "not asked for (--skip-tests or --cpu-smoke)"}
    missing = [f for f in CUDA_TEST_FILES if not (ROOT / f).exists()]
    if missing:
        log(f"## CUDA tests: {', '.join(missing)} not found (run gpu-check from a checkout of the repository)")
        return {"ran": False, "reason": f"not found: {', '.join(missing)}"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "cuda", *CUDA_TEST_FILES]
    log(f"## CUDA tests: {' '.join(cmd[1:])}")
    try:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=plan.test_timeout_s)
    except subprocess.TimeoutExpired:
        return {"ran": True, "returncode": None, "summary": f"timed out after {plan.test_timeout_s} s"}
    tail = (done.stdout + done.stderr).strip().splitlines()
    summary = tail[-1] if tail else ""
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", summary)}
    log("   " + summary)
    if done.returncode != 0:
        log("\n".join("   " + line for line in tail[-30:]))
    return {"ran": True, "returncode": done.returncode, "summary": summary, **counts}


def run_trainer(plan: Plan, log) -> dict:
    """bench_trainer's three paths for LeNet-5 and VGG-11, and the evaluation seconds per sample."""
    bench = _load_bench("bench_trainer")
    out = {}
    data = None
    for name, rounds in plan.rounds.items():
        args = bench.parse_args(
            ["--device", plan.device, "--models", name, "--rounds", str(rounds), *plan.trainer_args]
        )
        if data is None:
            data = bench.make_data(args, log)
        device, x_np_hwc, x_dev, y_dev, labels, parts = data
        times = bench.run_model(name, args, device, x_np_hwc, x_dev, y_dev, labels, parts, log)
        times["eval_s_per_sample"] = _eval_seconds(name, x_dev, y_dev, plan.eval_samples, device)
        log(f"   evaluation: {times['eval_s_per_sample'] * 1e6:.2f} us per test sample (batches of 1024)")
        out[name] = times
    return out


def _eval_seconds(name, x_dev, y_dev, n, device) -> float:
    import torch

    from fedlib.data.augment import Preprocessor
    from fedlib.training.batched import evaluate
    from fedlib.training.local import model_state
    from fedlib.training.models import make_model

    torch.manual_seed(0)
    model = make_model(name, 10).to(device)
    params, pre = model_state(model), Preprocessor(mean=(0.5,) * 3, std=(0.25,) * 3)
    x, y = x_dev[:n], y_dev[:n]
    evaluate(model, params, x, y, transform=pre.test, batch_size=1024)  # warm-up
    best = float("inf")
    for _ in range(3):
        _sync(device)
        t0 = time.perf_counter()
        evaluate(model, params, x, y, transform=pre.test, batch_size=1024)
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return best / int(y.shape[0])


def _sync(device):
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def run_selection(plan: Plan, log) -> dict:
    """One FedEntOpt round (round 1 and steady state) with the default CPU scorer and the torch scorer on the
    device, same process, same picks checked."""
    import numpy as np

    from fedlib.selection import scoring

    bench = _load_bench("bench_selection")
    k, m, c = plan.selection
    counts = bench.synthetic_counts(k, c)
    log(f"## selection: FedEntOpt round at K={k:,}, M={m:,}, C={c}, Q=K/2; torch scorer on {plan.device}")
    out = {"K": k, "M": m, "C": c}
    for label, start in (("round1", ()), ("steady", bench.full_buffer(k))):
        t_cpu, (picked, state) = bench._best_time(lambda: bench._one_round(counts, m, None, start), 1)
        with scoring.scorer_path("torch", device=plan.device):
            bench._one_round(counts, min(5, m), None, start)  # warm-up
            t_dev, (p_dev, s_dev) = bench._best_time(lambda: bench._one_round(counts, m, None, start), 3)
        same = bool(np.array_equal(picked, p_dev) and state == s_dev)
        out[label] = {"cpu_incremental_s": t_cpu, "torch_s": t_dev, "same_picks": same}
        log(
            f"   {label}: CPU incremental {t_cpu:.3f} s, torch on {plan.device} {t_dev:.3f} s "
            f"({t_cpu / t_dev:.1f}x); same picks and buffer: {same}"
        )
    return out


# --------------------------------------------------------------------------------------------- the record
def step_times(trainer: dict) -> dict:
    """Seconds per client step of the reference (b) and batched (c) engines, and per evaluated sample."""
    out = {}
    for name, t in trainer.items():
        steps = t.get("steps_per_round")
        if not steps:
            continue
        out[name] = {
            "reference": t["b"] / steps if "b" in t else None,
            "batched": t["c"] / steps if "c" in t else None,
            "eval": t["eval_s_per_sample"],
        }
    return out


def compare_targets(trainer: dict, selection: dict) -> list[dict]:
    """The GPU targets against what was measured: one row per target (name, value, target, met)."""
    rows = []

    def add(name, value, target, smaller_is_better):
        met = None if value is None else (value <= target if smaller_is_better else value >= target)
        rows.append(
            {
                "target": name,
                "value": value,
                "goal": ("<= " if smaller_is_better else ">= ") + f"{target:g}",
                "met": met,
            }
        )

    lenet, vgg = trainer.get("lenet5", {}), trainer.get("vgg11", {})
    add(
        "LeNet-5: 500 rounds with the batched engine [s]",
        500 * lenet["c"] if "c" in lenet else None,
        TARGETS["lenet5_500_rounds_s"],
        True,
    )
    add(
        "LeNet-5: DataLoader loop / batched",
        lenet["a"] / lenet["c"] if {"a", "c"} <= set(lenet) else None,
        TARGETS["lenet5_a_over_c"],
        False,
    )
    add(
        "VGG-11: DataLoader loop / batched",
        vgg["a"] / vgg["c"] if {"a", "c"} <= set(vgg) else None,
        TARGETS["vgg11_a_over_c"],
        False,
    )
    for label in ("round1", "steady"):
        got = selection.get(label)
        add(
            f"selection K={selection.get('K', 0):,} M={selection.get('M', 0):,} ({label}) [s]",
            None if got is None else got["torch_s"],
            TARGETS["selection_round_s"],
            True,
        )
    return rows


def _estimate(records_dir: Path) -> dict:
    from repro import paper_tier

    size = paper_tier.tier_size("paper", records_dir=records_dir)
    tot = size.loc["total"]
    return {
        "gpu_hours": float(tot["GPU hours"]),
        "gpu_hours_reference_engine": float(tot["GPU hours, reference engine"]),
        "sources": size.attrs["sources"],
        "by_model": size.attrs["by_model"],
    }


def _device_info(device: str) -> dict:
    import platform

    import torch

    from fedlib.training.numerics import describe

    info = {
        "device": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "cuda_build": torch.version.cuda,
        "numerics": describe(),
    }
    if torch.device(device).type == "cuda":
        props = torch.cuda.get_device_properties(torch.device(device))
        info.update(
            device=torch.cuda.get_device_name(torch.device(device)),
            gpu_memory_gb=round(props.total_memory / 2**30, 1),
            cudnn=torch.backends.cudnn.version(),
        )
    return info


def _print_summary(record: dict, log) -> None:
    log("\n## targets")
    for row in record["targets"]:
        value = "not measured" if row["value"] is None else f"{row['value']:.3f}"
        verdict = {True: "met", False: "MISSED", None: "-"}[row["met"]]
        log(f"   {row['target']:<52s} {value:>12s}  goal {row['goal']:<8s} {verdict}")
    est = record.get("estimate")
    if est:
        by = ", ".join(f"{m} {v['GPU hours']:,.0f} h" for m, v in est["by_model"].items())
        log(
            f"\n## paper tier: ~{est['gpu_hours']:,.0f} GPU hours (reference engine alone "
            f"~{est['gpu_hours_reference_engine']:,.0f}); {by}; sources: {est['sources']}"
        )


# --------------------------------------------------------------------------------------------- entry point
def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = parser or argparse.ArgumentParser(prog="python -m fedlib gpu-check", description=__doc__.splitlines()[0])
    p.add_argument(
        "--out-dir",
        default=str(ROOT / "benchmarks" / "results"),
        help="where the benchmark record goes (default %(default)s)",
    )
    p.add_argument("--skip-tests", action="store_true", help="do not run the CUDA tests")
    p.add_argument(
        "--cpu-smoke",
        action="store_true",
        help="run every step on the CPU with tiny sizes (checks the command; not a measurement)",
    )
    return p


def run(args, log=print) -> int:
    """The command (see the module docstring); returns the exit status."""
    import torch

    if not args.cpu_smoke and not torch.cuda.is_available():
        print(no_cuda_message(), file=sys.stderr)
        return 1
    from fedlib.training.numerics import configure

    plan = Plan.smoke() if args.cpu_smoke else Plan.full()
    if args.skip_tests:
        plan = replace(plan, run_tests=False)
    t0 = time.perf_counter()
    configure(plan.device)  # TF32 off, deterministic kernels: the settings the equivalence claims hold under
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    record = {
        "kind": "gpu-check",
        "cuda": plan.device == "cuda",
        "smoke": bool(args.cpu_smoke),
        "created_utc": stamp,
        **_device_info(plan.device),
    }
    log(f"# gpu-check on {record['device']} (torch {record['torch']}, CUDA {record['cuda_build']})")
    record["tests"] = run_tests(plan, log)
    record["trainer"] = run_trainer(plan, log)
    record["selection"] = run_selection(plan, log)
    record["step_times"] = step_times(record["trainer"]) if record["cuda"] else {}
    record["targets"] = compare_targets(record["trainer"], record["selection"])
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"gpu-check-{stamp}{'-cpu-smoke' if args.cpu_smoke else ''}.json"
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    record["estimate"] = _estimate(out_dir)
    record["wall_seconds"] = round(time.perf_counter() - t0, 1)
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    _print_summary(record, log)
    log(f"\nrecord: {path} ({record['wall_seconds']:.0f} s)")
    failed = record["tests"].get("ran") and record["tests"].get("returncode") != 0
    return 2 if failed else 0


def main(argv=None) -> int:
    return run(build_parser().parse_args(argv))
