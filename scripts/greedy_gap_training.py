"""Quick-tier training: FedEntOpt against FedEntOpt with swap-improved picks, seed-paired.

    python scripts/greedy_gap_training.py     # 10 runs of ~25 s on one core -> results/greedy_gap/training.csv

The label-only measurement (scripts/greedy_gap.py) finds that a better subset changes label coverage where M
clients of two classes each barely cover the classes (CIFAR-100's 20 superclasses, C=2, M = 10). The quick tier
(repro.tiers: 5,000 real MNIST digits, LeNet-5, K = 20, M = 5, 20 rounds) under C=2 is as tight (5 clients x 2
classes = 10 classes), so one comparison there says whether the better subsets matter for accuracy: the quick
tier's FedEntOpt (Q = 70 % of K, §V-A5) and the same configuration with ``selector="fedentopt-swap"``
(:class:`repro.swap_selector.SwapImprovedSelector`, registered on ``import repro``), seeds SEEDS, same federation,
same first picks' random stream. Torch runs on one thread (training is deterministic on CPU for a thread count).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from fedlib.training.trainer import run_experiment  # noqa: E402
from repro import tiers  # noqa: E402
from repro.greedy_gap import table_path  # noqa: E402

SEEDS = (0, 1, 2, 3, 4)
PARTITION = "C=2"
METHODS = {"FedEntOpt": "fedentopt", "FedEntOpt + swaps": "fedentopt-swap"}
COLUMNS = ["round", "test_accuracy", "entropy_bits", "covers_all_classes", "picked"]


def configs(seed: int) -> dict:
    """The quick tier's FedEntOpt run of ``seed`` under C=2, and the same with the swap-improved selector."""
    base = tiers.tier_config("quick", method="FedEntOpt", partition_name=PARTITION, seed=seed)
    return {method: base.replace(selector=name) for method, name in METHODS.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=f"writes {table_path('training')}")
    parser.parse_args(argv)  # no options: --help prints what the script writes, before any run
    torch.set_num_threads(1)
    frames = []
    for seed in SEEDS:
        for method, config in configs(seed).items():
            start = time.perf_counter()
            table = run_experiment(config, progress=False).table
            frames.append(table[COLUMNS].assign(method=method, seed=seed))
            print(
                f"{method} seed {seed}: {time.perf_counter() - start:.0f} s, final accuracy "
                f"{table.test_accuracy.iloc[-1]:.3f}",
                flush=True,
            )
    frame = pd.concat(frames, ignore_index=True)
    frame = frame[frame["round"] > 0][["method", "seed", *COLUMNS]]
    frame.to_csv(table_path("training"), index=False, float_format="%.10f")
    print(f"-> {table_path('training')}")


if __name__ == "__main__":
    main()
