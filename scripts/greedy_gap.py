"""Compute the tables of the greedy-gap page into results/greedy_gap/ (about 10 minutes on one core).

    python scripts/greedy_gap.py                 # all parts
    python scripts/greedy_gap.py --parts paper   # one part: paper, improved, coverage_sizes, growth

Parts (every setting's seed streams as on the other label-only pages, :mod:`fedlib.seeds`):

``paper``           CIFAR-10 and CIFAR-100(20), C=2 and Dir(0.1), K = 100, M = 10, Q = 0 and the paper's buffer
                    (70 % of K for C=2, 50 % for Dir, §V-A5), 500 rounds, seeds 0-2: every round's greedy pick and
                    its swap improvement; every EXACT_EVERY-th round the branch and bound within NODE_LIMIT nodes.
``improved``        the same settings, FedEntOpt and FedEntOpt with every pick improved by swaps as a selector of its
                    own: the picks per client (for H_norm), mean entropy and coverage over the rounds.
``coverage_sizes``  §V-B5's large pools: K = 150 and 200, M = 3, 5, 7, Dir(0.1), Q = 50 %, seed 0, 100 rounds.
``growth``          Dir(0.1) federations of K = 100 to 100,000 clients, M = 10 and 50, C = 10 and 100, no buffer.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from fedlib.label_only.simulate import run_selection  # noqa: E402
from fedlib.seeds import stream_rng  # noqa: E402
from fedlib.selection.selectors import FedEntOptSelector, buffer_size_from_fraction  # noqa: E402
from repro import greedy_gap  # noqa: E402
from repro.label_studies import federation_counts  # noqa: E402

OUT = ROOT / "results" / "greedy_gap"
PROFILES = {"cifar10": "CIFAR-10", "cifar100-20": "CIFAR-100"}
PARTITIONS = {"C=2": 0.7, "Dir(0.1)": 0.5}  # the paper's best buffer per partition (§V-A5)
NUM_CLIENTS, CLIENTS_PER_ROUND, NUM_ROUNDS, SEEDS = 100, 10, 500, (0, 1, 2)
EXACT_EVERY, NODE_LIMIT = 50, 3000  # exact rounds per run: 500 / 50 = 10; ~0.5 s each at K = 100
SIZES = {"pool_sizes": (150, 200), "subset_sizes": (3, 5, 7), "num_rounds": 100, "seed": 0, "exact_every": 20}
GROWTH_CELLS = [(k, m, c) for c in (10, 100) for k in (100, 1000, 10000) for m in (10, 50)] + [(100000, 50, 10)]
GROWTH_ROUNDS = 5
FLOAT = "%.10f"


def paper_settings():
    """(profile, dataset, partition, Q) of the paper part: Q = 0 and the paper's buffer."""
    for profile, dataset in PROFILES.items():
        for partition, fraction in PARTITIONS.items():
            for q in (0, buffer_size_from_fraction(fraction, NUM_CLIENTS)):
                yield profile, dataset, partition, q


def paper_part() -> pd.DataFrame:
    frames = []
    for profile, dataset, partition, q in paper_settings():
        for seed in SEEDS:
            counts = greedy_gap.paper_counts(profile, partition, NUM_CLIENTS, seed)
            frame = greedy_gap.round_gaps(
                counts,
                clients_per_round=CLIENTS_PER_ROUND,
                num_rounds=NUM_ROUNDS,
                buffer_size=q,
                seed=seed,
                exact_every=EXACT_EVERY,
                node_limit=NODE_LIMIT,
            )
            frames.append(frame.assign(dataset=dataset, partition=partition, buffer_size=q, seed=seed))
            print(f"paper {dataset} {partition} Q={q} seed {seed} done", flush=True)
    frame = pd.concat(frames, ignore_index=True)
    return frame[["dataset", "partition", "buffer_size", "seed", *frame.columns[:-4]]]


def improved_part() -> pd.DataFrame:
    rows = []
    for profile, dataset, partition, q in paper_settings():
        for seed in SEEDS:
            counts = greedy_gap.paper_counts(profile, partition, NUM_CLIENTS, seed)
            picked, entropy, covers = greedy_gap.improved_run(
                counts, clients_per_round=CLIENTS_PER_ROUND, num_rounds=NUM_ROUNDS, buffer_size=q, seed=seed
            )
            greedy = run_selection(
                counts,
                FedEntOptSelector(buffer_size=q),
                CLIENTS_PER_ROUND,
                NUM_ROUNDS,
                seed=stream_rng(seed, "selection"),
            )
            for method, (p, e, c) in {
                "FedEntOpt": (greedy.picked, greedy.entropy, greedy.covers),
                "FedEntOpt + swaps": (picked, entropy, covers),
            }.items():
                rows.append(
                    {
                        "dataset": dataset,
                        "partition": partition,
                        "buffer_size": q,
                        "seed": seed,
                        "method": method,
                        "mean_entropy": e.mean(),
                        "coverage": c.mean(),
                        "times_picked": " ".join(map(str, np.bincount(p.ravel(), minlength=NUM_CLIENTS))),
                    }
                )
    return pd.DataFrame(rows)


def coverage_sizes_part() -> pd.DataFrame:
    frames = []
    for profile, dataset in PROFILES.items():
        for k in SIZES["pool_sizes"]:
            counts = federation_counts(profile, "dirichlet", k, SIZES["seed"], beta=0.1, max_redraws=1000)
            for m in SIZES["subset_sizes"]:
                frame = greedy_gap.round_gaps(
                    counts,
                    clients_per_round=m,
                    num_rounds=SIZES["num_rounds"],
                    buffer_size=buffer_size_from_fraction(0.5, k),
                    seed=SIZES["seed"],
                    exact_every=SIZES["exact_every"],
                    node_limit=NODE_LIMIT,
                )
                frames.append(frame.assign(dataset=dataset, num_clients=k, clients_per_round=m))
                print(f"sizes {dataset} K={k} M={m} done", flush=True)
    frame = pd.concat(frames, ignore_index=True)
    return frame[["dataset", "num_clients", "clients_per_round", *frame.columns[:-3]]]


def growth_part() -> pd.DataFrame:
    return greedy_gap.growth_gaps(GROWTH_CELLS, num_rounds=GROWTH_ROUNDS, seed=0)


PARTS = {"paper": paper_part, "improved": improved_part, "coverage_sizes": coverage_sizes_part, "growth": growth_part}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    for part in args.parts.split(","):
        if part not in PARTS:
            parser.error(f"--parts: unknown part {part!r}; allowed: {', '.join(PARTS)}")
        start = time.perf_counter()
        path = greedy_gap.table_path(part, OUT)
        PARTS[part]().to_csv(path, index=False, float_format=FLOAT, compression={"method": "infer", "mtime": 0})
        print(f"{part}: {time.perf_counter() - start:.0f} s -> {path}", flush=True)


if __name__ == "__main__":
    main()
