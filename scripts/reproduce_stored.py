"""Retrain stored runs and compare them with their stored tables, bit for bit (wall times aside).

A stored table (``results/<tier>/<experiment>/<key>.csv``, written by ``fedlib.results.store_run``) holds the
trainer's per-round numbers rounded to 5 decimals; this script trains the run's configuration again (from the
JSON beside it, with ``--threads`` torch threads) and compares the CSV text it would store with the stored one,
every column but ``seconds``.  Runs of the lying-clients group are retrained with their liars
(``fedlib.adversarial_runs``).  Exit status 1 when any run differs.

Examples::

    python scripts/reproduce_stored.py --experiment fedentropy          # every stored run of the group
    python scripts/reproduce_stored.py --experiment table1 --limit 2    # the first two (sorted by key)
    python scripts/reproduce_stored.py --csv results/quick/table1/<key>.csv

The stored runs were trained with one torch thread (``--threads 1``, the default here); on CPU the thread count
changes floating-point sums, so another count gives other numbers.
"""
from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def retrain_table(csv_path) -> str:
    """The CSV text ``store_run`` would write for the run stored at ``csv_path``, trained again now."""
    from fedlib.config import ExperimentConfig
    from fedlib.runs import compact_table

    csv_path = Path(csv_path)
    meta = json.loads(csv_path.with_suffix(".json").read_text())
    config = ExperimentConfig.from_dict(meta["config"])
    if "liar_spec" in meta:
        from fedlib import adversarial_runs
        from fedlib.adversarial import LiarSpec

        table, liars = adversarial_runs.run_with_liars(config, LiarSpec(**meta["liar_spec"]))
        compact = compact_table(table)
        compact["liars_picked"] = adversarial_runs._liars_picked(table, liars)
    else:
        from fedlib.trainer import run_experiment

        compact = compact_table(run_experiment(config, progress=False).table)
    return compact.to_csv(index=False)


def _without_seconds(text: str):
    import pandas as pd

    t = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    return t.drop(columns=[c for c in ("seconds",) if c in t.columns])


def compare(csv_path) -> str | None:
    """None when the retrained run equals the stored table (text of every cell but ``seconds``), else where not."""
    stored = _without_seconds(Path(csv_path).read_text())
    again = _without_seconds(retrain_table(csv_path))
    if list(stored.columns) != list(again.columns):
        return f"columns differ: stored {list(stored.columns)}, retrained {list(again.columns)}"
    if len(stored) != len(again):
        return f"rows differ: stored {len(stored)}, retrained {len(again)}"
    diff = stored.ne(again)
    if not diff.to_numpy().any():
        return None
    row, col = next((r, c) for r in range(len(stored)) for c in stored.columns if diff.iloc[r][c])
    return (f"first difference in row {row} (round {stored.iloc[row]['round']}), column {col!r}: "
            f"stored {stored.iloc[row][col]!r}, retrained {again.iloc[row][col]!r}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results-dir", default=str(ROOT / "results"), help="stored tables (default: results/)")
    p.add_argument("--tier", default="quick")
    p.add_argument("--experiment", default=None, help="one experiment group (folder under <results-dir>/<tier>)")
    p.add_argument("--csv", action="append", default=[], help="one stored CSV (repeatable)")
    p.add_argument("--limit", type=int, default=None, help="at most this many runs of --experiment")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default %(default)s)")
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    paths = [Path(c) for c in args.csv]
    if args.experiment:
        found = sorted((Path(args.results_dir) / args.tier / args.experiment).glob("*.csv"))
        paths += found[:args.limit] if args.limit is not None else found
    if not paths:
        p.error("no stored run given: use --experiment or --csv")
    bad = 0
    for path in paths:
        t0 = time.perf_counter()
        problem = compare(path)
        bad += problem is not None
        print(f"{'same' if problem is None else 'DIFFERENT'}  {path}  ({time.perf_counter() - t0:.1f} s)"
              + (f"\n    {problem}" if problem else ""), flush=True)
    print(f"{len(paths) - bad} of {len(paths)} stored runs reproduced bit for bit", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
