"""Training with clients that lie about their label counts, stored as the result group ``lying_clients``.

:func:`run_with_liars` builds a run's federation with the trainer, then before round 1 turns the clients
:func:`repro.adversarial.choose_liars` names into liars: their training labels become
:func:`repro.adversarial.liar_labels` and the counts the server sees :func:`repro.adversarial.liar_counts`
(aggregation weights stay the true sample counts: the liars lie to the selection only). The liars are a separate
:class:`~repro.adversarial.LiarSpec`, covered by the stored key (:func:`liar_run_key`); the CSV adds
``liars_picked``. The group (:func:`lying_runs`): :data:`METHODS` at :data:`LIAR_SHARES` of K and without liars,
per partition and seed in :data:`SEEDS`, the same liars for every method.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from fedlib._validate import ParameterError
from fedlib.training.config import ExperimentConfig
from fedlib.training.runs import last_rounds_mean
from repro import reporting
from repro.adversarial import LiarSpec, choose_liars, liar_counts, liar_labels

__all__ = [
    "GROUP",
    "SEEDS",
    "LIAR_SHARES",
    "DEFENCE",
    "METHODS",
    "LiarRun",
    "lying_runs",
    "liar_run_key",
    "run_with_liars",
    "liar_experiment",
    "ensure_lying_runs",
    "load_or_run_lying",
    "liar_picks",
    "accuracy_summary",
]

#: The group's name: its folder under ``results/<tier>/``.
GROUP = "lying_clients"
#: Seeds of the group (more than the quick tier's two: the paired tests need them).
SEEDS = (0, 1, 2, 3, 4)
#: Liar shares of K; the number of liars is ``max(1, round(share * K))``.
LIAR_SHARES = (0.01, 0.10)
#: The defence of the group (:mod:`fedlib.selection.defence`): reported totals capped at 3x the median reported total,
#: and
#: participation capped at 1.5x the fair share M/K; the strict variant caps participation at the fair share itself.
DEFENCE = {"total_cap_quantile": 0.5, "total_cap_factor": 3.0, "share_cap": 1.5}
STRICT_DEFENCE = {**DEFENCE, "share_cap": 1.0}
#: Display name -> (Table I method whose config it uses, FedEntOpt parameters added to it).
METHODS = {
    "FedEntOpt": ("FedEntOpt", {}),
    "FedEntOpt + defence": ("FedEntOpt", DEFENCE),
    "FedEntOpt + strict defence": ("FedEntOpt", STRICT_DEFENCE),
    "Random": ("FedAvg", {}),
}
#: The liars of the group: label-flipped data, uniform report of ten times their size (threat a).
THREAT = {"report": "uniform", "inflation": 10.0, "data": "flipped"}


class LiarRun(NamedTuple):
    """One run of the group: ``label`` (partition, method, liars, liar_pct, seed), ``config``, ``spec``."""

    label: dict
    config: ExperimentConfig
    spec: LiarSpec


def num_liars(share: float, num_clients: int) -> int:
    """``max(1, round(share * K))`` for a share > 0, else 0.

    >>> num_liars(0.01, 20), num_liars(0.10, 20), num_liars(0.10, 100), num_liars(0.0, 20)
    (1, 2, 10, 0)
    """
    return 0 if share <= 0 else max(1, int(round(share * num_clients)))


def lying_runs(
    tier: str = "quick",
    *,
    seeds: Sequence[int] = SEEDS,
    rounds: int | None = None,
    partitions: Sequence[str] = ("Dir(0.1)", "C=2"),
    shares: Sequence[float] = (0.0, *LIAR_SHARES),
    methods: Sequence[str] = tuple(METHODS),
) -> list[LiarRun]:
    """The runs of the group at ``tier`` (see the module docstring)."""
    from repro.tiers import tier_config

    out = []
    for part, share, name, seed in itertools.product(partitions, shares, methods, seeds):
        method, defence = METHODS[name]
        kw = {"partition_name": part, "method": method, "seed": seed}
        if rounds is not None:
            kw["rounds"] = rounds
        cfg = tier_config(tier, **kw)
        if defence:
            cfg = cfg.replace(selector_params={**cfg.selector_params, **defence}).validate()
        n = num_liars(share, cfg.num_clients)
        spec = LiarSpec(n, **THREAT)
        label = {"partition": part, "method": name, "liars": n, "liar_pct": int(round(100 * share)), "seed": seed}
        out.append(LiarRun(label, cfg, spec))
    return out


def liar_run_key(config: ExperimentConfig, spec: LiarSpec) -> str:
    """16 hex digits: SHA-256 over the configuration fields of :func:`repro.results.run_key` and the liar
    spec.

    An honest run (no liars) gets a key of its own too, never the one Table I's run of the same config has: the
    group trains every run with one torch thread (:func:`ensure_lying_runs`), and on CPU the thread count changes
    the floating-point sums, so the same config trained with two threads gives other numbers (quick tier,
    #C = 2, seed 1: 38.1 % with one thread, 35.6 % with two).  The paired tests compare runs that differ by the
    method only.  The configuration enters as :func:`repro.results.key_fields`, as in ``run_key``, so that a new
    default of a field that does not change the run (``dp_negative`` without label DP) keeps the stored keys."""
    from repro import results

    payload = json.dumps(
        {"config": results.key_fields(config), "liars": spec.to_dict()}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def run_with_liars(config: ExperimentConfig, spec: LiarSpec, *, progress: bool = False):
    """Train ``config`` with the liars of ``spec`` (see the module docstring); returns ``(table, liar_ids)``.

    ``table`` is the trainer's per-round table (:data:`fedlib.training.runs.TABLE_COLUMNS`)."""
    from fedlib.training.runs import TABLE_COLUMNS
    from fedlib.training.trainer import run_experiment

    _check_spec(config, spec)
    if spec.num_liars == 0:
        return run_experiment(config, progress=progress).table, np.zeros(0, dtype=np.int64)
    exp, liars = liar_experiment(config, spec)
    state = exp.initial_state()
    while state.round < exp.total_rounds:
        exp.run_round(state)
    return pd.DataFrame(state.rows, columns=list(TABLE_COLUMNS)), liars


def _check_spec(config: ExperimentConfig, spec: LiarSpec) -> None:
    config.validate()
    if not isinstance(spec, LiarSpec):
        raise ParameterError(None, "spec", spec, "a repro.adversarial.LiarSpec", got=f"type {type(spec).__name__}")
    if spec.num_liars > config.num_clients:
        allowed = f"an integer >= 0 and <= num_clients={config.num_clients}"
        raise ParameterError("LiarSpec", "num_liars", spec.num_liars, allowed)


def liar_experiment(config: ExperimentConfig, spec: LiarSpec):
    """``(experiment, liar_ids)``: :class:`fedlib.training.trainer.Experiment` of ``config`` with the liars of ``spec``
    in place (relabelled training data, true counts of what each client holds, fabricated server counts)."""
    import torch

    from fedlib.data.partition import label_count_matrix
    from fedlib.training.trainer import Experiment

    _check_spec(config, spec)
    exp = Experiment(config)
    liars = choose_liars(config.num_clients, spec.num_liars, config.seed)
    held, reported = liar_counts(exp.true_counts, spec, liars)
    y = exp.y_train.clone()
    for k in liars:
        idx = exp.client_index[k]
        new = liar_labels(y[idx].cpu().numpy(), spec.data, exp.num_classes)
        y[idx] = torch.as_tensor(new, dtype=y.dtype, device=y.device)
    exp.y_train = y
    check = label_count_matrix(y.cpu().numpy(), exp.parts, exp.num_classes)
    if not np.array_equal(check, held):  # pragma: no cover -- liar_data_counts and liar_labels must agree
        raise RuntimeError("the relabelled training data and repro.adversarial.liar_counts disagree.")
    exp.true_counts = held.astype(np.float64)
    exp.true_counts_t = torch.as_tensor(exp.true_counts, dtype=torch.float32)
    server = np.array(exp.server_counts, dtype=np.float64, copy=True)
    server[liars] = reported[liars]
    exp.server_counts = server
    return exp, liars


def _liars_picked(table: pd.DataFrame, liars) -> list[int]:
    s = {int(k) for k in liars}
    return [sum(int(k) in s for k in str(p).split()) if isinstance(p, str) and p else 0 for p in table["picked"]]


def store_lying_run(
    table: pd.DataFrame, run: LiarRun, liars, tier: str, *, results_dir=None, wall_seconds: float | None = None
):
    """Write one run's compact table (with ``liars_picked``) and its JSON with :func:`repro.results.store_run`
    under :func:`liar_run_key`; returns the CSV path."""
    from repro import float_env, results

    extra = {"liar_spec": run.spec.to_dict(), "liar_ids": [int(k) for k in liars], "torch_threads": THREADS}
    return results.store_run(
        table,
        run.config,
        tier,
        GROUP,
        run.label,
        results_dir=results_dir,
        wall_seconds=wall_seconds,
        data_source=run.config.dataset,
        float_env=float_env.current(run.config.device, threads=THREADS),
        key=liar_run_key(run.config, run.spec),
        columns={"liars_picked": _liars_picked(table, liars)},
        extra_meta=extra,
    )


def missing_lying_runs(runs: Sequence[LiarRun], tier: str, results_dir=None) -> list[LiarRun]:
    """The runs with no stored table in the group's folder."""
    from repro.results import group_dir

    d = group_dir(results_dir, tier, GROUP)
    return [r for r in runs if not (d / f"{liar_run_key(r.config, r.spec)}.csv").exists()]


#: Torch threads of every run of the group (the thread count changes CPU results; see :func:`liar_run_key`).
THREADS = 1


def _train_lying(config: ExperimentConfig, spec: LiarSpec):
    """One run of the group (a job of ``repro.runner.run_each``): ``(table, liar_ids, wall seconds)``."""
    t0 = time.perf_counter()
    table, liars = run_with_liars(config, spec)
    return table, liars, time.perf_counter() - t0


def ensure_lying_runs(runs: Sequence[LiarRun], tier: str, *, results_dir=None, log=print) -> dict:
    """Train and store every run without a stored table, with :data:`THREADS` torch threads (restored after)."""
    from repro.runner import run_each

    t0 = time.perf_counter()
    todo = missing_lying_runs(runs, tier, results_dir)
    trained = run_each(_train_lying, [(r.config, r.spec) for r in todo], threads=THREADS)
    for n, (i, (table, liars, wall), _) in enumerate(trained, 1):
        store_lying_run(table, todo[i], liars, tier, results_dir=results_dir, wall_seconds=wall)
        acc = 100 * last_rounds_mean(table, 10)
        log(f"[{n}/{len(todo)}] {todo[i].label}: final accuracy {acc:.2f} %, {wall:.1f} s")
    return {"trained": len(todo), "already": len(runs) - len(todo), "wall_seconds": time.perf_counter() - t0}


def load_or_run_lying(tier: str = "quick", results_dir=None, *, run_missing: bool = False, log=print, **grid):
    """The stored runs of the group (:func:`repro.results.load_group`); with ``run_missing`` (quick tier
    only) the missing runs of :func:`lying_runs` ``(tier, **grid)`` are trained first."""
    from repro import results

    if run_missing and tier == "quick":
        info = ensure_lying_runs(lying_runs(tier, **grid), tier, results_dir=results_dir, log=log)
        if info["trained"]:
            log(f"trained {info['trained']} missing runs in {info['wall_seconds']:.0f} s")
    return results.load_group(tier, GROUP, results_dir)


# ----------------------------------------------------------------------------------------------------
# statistics


def liar_picks(frame: pd.DataFrame) -> pd.DataFrame:
    """Per run (partition, liars, method, seed): liars picked per round (``liar_picks_per_round``) and the share of
    rounds in which at least one liar was picked (``liar_rounds``)."""
    keys = [c for c in ("partition", "liars", "liar_pct", "method", "seed") if c in frame.columns]
    g = frame[frame["round"] >= 1].groupby(keys, sort=False)["liars_picked"]
    out = pd.DataFrame({"liar_picks_per_round": g.mean(), "liar_rounds": g.apply(lambda s: float((s > 0).mean()))})
    return out.reset_index()


def accuracy_summary(frame: pd.DataFrame, last: int = 10) -> pd.DataFrame:
    """Per partition, liars and method: the final accuracy's mean and std over seeds in %
    (:func:`repro.reporting.final_accuracy`) and the liars picked per round (mean over rounds and seeds)."""
    keys = [c for c in ("partition", "liars", "liar_pct", "method") if c in frame.columns]
    acc = reporting.final_accuracy(frame, last, by=keys)
    out = acc.rename(columns={"mean": "accuracy_mean", "std": "accuracy_std"})
    if "liars_picked" in frame.columns:
        picks = liar_picks(frame).groupby(keys, sort=False)["liar_picks_per_round"].mean().reset_index()
        out = out.merge(picks, on=keys, how="left")
    return out


def main(argv=None) -> int:
    """``python -m repro.adversarial_runs [--tier quick] [--seeds 0,1] [--dry-run]``: train the missing runs."""
    import argparse

    p = argparse.ArgumentParser(description="Train and store the missing runs of the lying_clients group.")
    p.add_argument("--tier", default="quick")
    p.add_argument("--seeds", default=None, help="comma-separated subset of seeds")
    p.add_argument("--results-dir", default=None)
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args(argv)
    seeds = tuple(int(s) for s in args.seeds.split(",")) if args.seeds else SEEDS
    runs = lying_runs(args.tier, seeds=seeds)
    missing = missing_lying_runs(runs, args.tier, args.results_dir)
    print(f"{args.tier}/{GROUP}: {len(runs)} runs, {len(missing)} missing", flush=True)
    if args.dry_run:
        for r in missing:
            print("   ", r.label)
        return 0
    info = ensure_lying_runs(runs, args.tier, results_dir=args.results_dir, log=lambda s: print("   " + s, flush=True))
    print(info)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
