"""Command line: ``python -m fedlib run ...`` (one experiment), ``python -m fedlib sweep ...`` (a grid) and
``python -m fedlib paper [--dry-run]`` (the whole paper tier, ``fedlib.paper_tier``).

Examples::

    python -m fedlib run --dataset cifar10-subset --data-root ../shared/data --partition dirichlet --beta 0.1 \\
        --clients 100 --per-round 10 --selector fedentopt --buffer 0.5 --algorithm fedavg --model lenet5 \\
        --rounds 20 --seed 0
    python -m fedlib sweep --dataset cifar10-subset --data-root ../shared/data --clients 100 --per-round 10 \\
        --selectors random,fedentopt --buffer 0.5 --algorithms fedavg --partitions dir0.1 --seeds 0,1,2 --rounds 20

``--buffer`` is FedEntOpt's Q: a number below 1 with a decimal point is a fraction of K (``0.5`` = 50%),
an integer is a client count.  Partitions in sweeps: ``dir<β>`` (e.g. ``dir0.1``), ``c<j>`` (quantity
skew, e.g. ``c2``) or ``iid``; the paper's ``Dir(0.1)`` and ``C=2`` work too (``fedlib.partition.parse_partition``).
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

from .config import ConfigError, ExperimentConfig

__all__ = ["main", "build_parser", "results_table"]

#: option dest -> (algorithm, parameter name)
_ALGO_SHORTCUTS = {"mu": ("fedprox", "mu"), "alpha": ("fedrs", "alpha"), "tau": ("fedlc", "tau"),
                   "fe_epsilon": ("fedentropy", "epsilon"), "fc_clusters": ("fedconcat", "num_clusters"),
                   "fc_classifier_rounds": ("fedconcat", "classifier_rounds")}


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
            raise ConfigError(f"{flag} expects key=value (got {item!r}).")
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
        raise ConfigError(f"--buffer must be a fraction of K in [0, 1] written with a decimal point (e.g. 0.5) "
                          f"or an integer number of clients (got {text!r}).") from None


def _partition(text: str) -> dict:
    """``--partitions`` entry -> config fields (``fedlib.partition.partition_fields``); errors are ``ConfigError``."""
    from .partition import partition_fields

    try:
        return partition_fields(text.strip())
    except ValueError as exc:
        raise ConfigError(f"--partitions: {exc}") from None


def _common(p: argparse.ArgumentParser) -> None:
    d = ExperimentConfig()
    g = p.add_argument_group("data")
    g.add_argument("--dataset", default=d.dataset, help="data set name (default %(default)s)")
    g.add_argument("--data-root", default=None, help="folder with the data files")
    g.add_argument("--dataset-option", action="append", metavar="K=V", help="option passed to load_dataset")
    g.add_argument("--download", action="store_true", help="let torchvision download missing data")
    g = p.add_argument_group("federation")
    g.add_argument("--clients", type=int, default=d.num_clients, help="pool size K (default %(default)s)")
    g.add_argument("--per-round", type=int, default=d.clients_per_round, help="clients per round M")
    g.add_argument("--buffer", default=None, help="FedEntOpt buffer Q: fraction (0.5) or count (50)")
    g.add_argument("--selector-param", action="append", metavar="K=V", help="extra selector parameter")
    g.add_argument("--algo-param", action="append", metavar="K=V", help="extra algorithm parameter")
    g.add_argument("--mu", type=float, help="FedProx proximal weight μ (default 1e-4)")
    g.add_argument("--alpha", type=float, help="FedRS α (default 0.5)")
    g.add_argument("--tau", type=float, help="FedLC τ (default 1.0)")
    g.add_argument("--fe-epsilon", type=float, help="FedEntropy ε: probability of drawing from the positive pool "
                                                    "(default 0.8)")
    g.add_argument("--fc-clusters", type=int, help="FedConcat clusters K (default 5)")
    g.add_argument("--fc-classifier-rounds", type=int, help="FedConcat classifier rounds T_c (default 200)")
    g.add_argument("--min-partition-size", type=int, default=d.min_partition_size)
    g = p.add_argument_group("training")
    g.add_argument("--model", default=d.model, help="lenet5, vgg11, efficientnet-b0, efficientnet-b3")
    g.add_argument("--rounds", type=int, default=d.rounds,
                   help="communication rounds (default %(default)s; FedConcat: the FedAvg-equivalent budget)")
    g.add_argument("--epochs", type=int, default=d.local_epochs, help="local epochs E (default %(default)s)")
    g.add_argument("--batch-size", type=int, default=d.batch_size)
    g.add_argument("--lr", type=float, default=d.lr)
    g.add_argument("--lr-decay", type=float, default=d.lr_decay)
    g.add_argument("--momentum", type=float, default=d.momentum)
    g.add_argument("--weight-decay", type=float, default=None,
                   help="default per model: 5e-4 (LeNet-5, EfficientNet), 1e-3 (VGG-11)")
    g.add_argument("--no-augment", action="store_true", help="train without data augmentation")
    g = p.add_argument_group("privacy and availability")
    g.add_argument("--dp-epsilon", type=float, default=None, help="Laplace label DP ε (default: off)")
    g.add_argument("--dp-negative", default=d.dp_negative, help="clip or keep negative noisy counts")
    g.add_argument("--dropout", type=float, default=d.dropout_prob, help="client dropout probability")
    g.add_argument("--stragglers", type=float, default=d.straggler_fraction, help="straggler fraction of the pool")
    g = p.add_argument_group("bookkeeping")
    g.add_argument("--eval-every", type=int, default=d.eval_every)
    g.add_argument("--checkpoint-every", type=int, default=d.checkpoint_every)
    g.add_argument("--device", default=d.device)
    g.add_argument("--engine", default=d.engine, choices=["reference", "batched"],
                   help="train a round's clients one by one or in one batched call (same results; default %(default)s)")
    g.add_argument("--run-root", default="runs", help="where results are cached (default %(default)s)")
    g.add_argument("--no-progress", action="store_true", help="no progress bars")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m fedlib", description="FedEntOpt and federated-learning baselines.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run one experiment", description="Run one federated experiment.")
    r.add_argument("--partition", default="dirichlet", help="dirichlet, quantity or iid")
    r.add_argument("--beta", type=float, default=None, help="Dir(β) concentration (default 0.1)")
    r.add_argument("--classes-per-client", type=int, default=None, help="j for quantity skew C=j")
    r.add_argument("--selector", default="random", help="random, fedentopt, kl, dc")
    r.add_argument("--algorithm", default="fedavg",
                   help="fedavg, fedprox, fednova, scaffold, fedrs, fedlc, fedentropy, fedconcat")
    r.add_argument("--seed", type=int, default=0)
    _common(r)
    s = sub.add_parser("sweep", help="run a grid and print a results table",
                       description="Run every combination of seeds × selectors × algorithms × partitions and "
                                   "print the mean ± std over seeds of the last-10-round mean test accuracy.")
    s.add_argument("--seeds", default="0,1,2", help="comma list (default %(default)s)")
    s.add_argument("--selectors", default="random,fedentopt", help="comma list (default %(default)s)")
    s.add_argument("--algorithms", default="fedavg", help="comma list (default %(default)s)")
    s.add_argument("--partitions", default="dir0.1", help="comma list of dir<β>, c<j>, iid (default %(default)s)")
    s.add_argument("--csv", default=None, help="also write the per-run summary to this CSV file")
    _sweep_backend(s)
    _common(s)
    _paper_parser(sub)
    from .gpu_check import build_parser as _gpu_check_parser

    _gpu_check_parser(sub.add_parser("gpu-check", help="the first command on a GPU machine: CUDA tests, benchmarks, "
                                     "a benchmark record (fedlib.gpu_check)", description="Run the CUDA tests and the "
                                     "trainer and selection benchmarks; write a record under benchmarks/results/."))
    return p


def _sweep_backend(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("backend (fedlib.distributed; --backend ray needs pip install -e \".[ray]\")")
    g.add_argument("--backend", default="serial", choices=["serial", "ray"],
                   help="serial: one run after the other here; ray: every run a Ray task (default %(default)s)")
    g.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads per run (serial default: torch's; ray default: --cpus-per-run)")
    g.add_argument("--ray-address", default=None,
                   help="connect to this Ray cluster ('auto', 'ray://<head>:10001'); default: start Ray here")
    g.add_argument("--ray-cpus", type=int, default=None, help="CPUs of a local Ray instance (default: all)")
    g.add_argument("--ray-gpus", type=int, default=None, help="GPUs of a local Ray instance (default: all)")
    g.add_argument("--cpus-per-run", type=float, default=1.0, help="Ray CPUs per run (default %(default)s)")
    g.add_argument("--gpus-per-run", type=float, default=1.0,
                   help="Ray GPUs per run on --device cuda (0.5: two runs per GPU; default %(default)s)")
    g.add_argument("--max-retries", type=int, default=3,
                   help="reruns of a run whose Ray worker died; it resumes from its checkpoint (default %(default)s)")


def _ray_options(args):
    from .distributed import RayOptions

    try:
        return RayOptions(address=args.ray_address, num_cpus=args.ray_cpus, num_gpus=args.ray_gpus,
                          cpus_per_run=args.cpus_per_run, gpus_per_run=args.gpus_per_run, threads=args.threads,
                          max_retries=args.max_retries)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"Ray backend: {exc}") from None


def _paper_parser(sub) -> None:
    pp = sub.add_parser("paper", help="the whole paper tier: its size, a dry run, or all of it (resumable)",
                        description="Print the paper tier's size and estimated cost; with --dry-run walk every "
                                    "experiment for one round on tiny fake files on the CPU (fedlib.paper_tier); "
                                    "without it train every missing run, resuming an interrupted one.")
    pp.add_argument("--dry-run", action="store_true", help="one round of a covering set of runs on fake data")
    pp.add_argument("--small-images", action="store_true", help="dry run: resize the 224x224 medical sets to 64x64")
    pp.add_argument("--size-only", action="store_true", help="print the size and cost estimate and stop")
    pp.add_argument("--groups", default=None, help="comma list of experiment groups (default: all of the tier)")
    pp.add_argument("--rounds", type=int, default=None, help="override the tier's number of rounds")
    pp.add_argument("--set", action="append", metavar="K=V", dest="overrides",
                    help="ExperimentConfig field for every run, e.g. device=cuda:1 (changes the run keys)")
    pp.add_argument("--data-root", default=None, help="folder with the data files")
    pp.add_argument("--results-dir", default=None, help="stored tables (default: the repository's results/)")
    pp.add_argument("--run-root", default="runs", help="run cache with checkpoints (default %(default)s)")
    pp.add_argument("--workdir", default=None, help="dry run: keep its fake files and runs here")
    pp.add_argument("--workers", type=int, default=1, help="parallel training processes")


def _cmd_paper(args) -> int:
    from . import paper_tier

    groups = [g.strip() for g in args.groups.split(",") if g.strip()] if args.groups else None
    if args.dry_run:
        paper_tier.dry_run("paper", workdir=args.workdir, groups=groups, small_images=args.small_images,
                           log=lambda m: print(m, flush=True))
    print(paper_tier.format_size(paper_tier.tier_size("paper", groups)), flush=True)
    if args.dry_run or args.size_only:
        return 0
    overrides = _kv(args.overrides, "--set")
    if args.data_root is not None:
        overrides["data_root"] = args.data_root
    paper_tier.run_tier("paper", results_dir=args.results_dir, run_root=args.run_root, groups=groups,
                        rounds=args.rounds, overrides=overrides, workers=args.workers,
                        log=lambda m: print(m, flush=True))
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
            raise ConfigError(f"--{flag} is a parameter of {owner!r}, not of algorithm {algorithm!r}.")
    return params


def _selector_params(args, selector: str, strict: bool) -> dict:
    params = _kv(args.selector_param, "--selector-param")
    buf = _buffer_params(args.buffer)
    if buf:
        if selector == "fedentopt":
            params.update(buf)
        elif strict:
            raise ConfigError(f"--buffer is a parameter of selector 'fedentopt', not of {selector!r}.")
    return params


def _config(args, *, seed, selector, algorithm, part: dict, strict: bool) -> ExperimentConfig:
    return ExperimentConfig(
        dataset=args.dataset, dataset_options=_kv(args.dataset_option, "--dataset-option"),
        data_root=args.data_root, download=args.download, **part, min_partition_size=args.min_partition_size,
        num_clients=args.clients, clients_per_round=args.per_round, selector=selector,
        selector_params=_selector_params(args, selector, strict), algorithm=algorithm,
        algorithm_params=_algorithm_params(args, algorithm, strict), model=args.model, rounds=args.rounds,
        local_epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, lr_decay=args.lr_decay,
        momentum=args.momentum, weight_decay=args.weight_decay, augment=not args.no_augment,
        label_dp_epsilon=args.dp_epsilon, dp_negative=args.dp_negative, dropout_prob=args.dropout,
        straggler_fraction=args.stragglers, eval_every=args.eval_every, checkpoint_every=args.checkpoint_every,
        seed=seed, device=args.device, engine=args.engine)


def results_table(summaries: pd.DataFrame) -> pd.DataFrame:
    """Group per-run summaries by (partition, selector, algorithm): mean ± std over seeds."""
    g = summaries.groupby(["partition", "selector", "algorithm"], sort=False)
    out = g.agg(accuracy_mean=("final_accuracy", "mean"), accuracy_std=("final_accuracy", "std"),
                seeds=("seed", "count"), seconds_per_round=("seconds_per_round", "mean")).reset_index()
    out["accuracy_std"] = out["accuracy_std"].fillna(0.0)
    out["accuracy (%)"] = [f"{100 * m:.2f} ± {100 * s:.2f}" for m, s in zip(out.accuracy_mean, out.accuracy_std)]
    return out


def _cmd_run(args) -> int:
    from .trainer import run_experiment

    part = {"partition": args.partition, "beta": args.beta, "classes_per_client": args.classes_per_client}
    cfg = _config(args, seed=args.seed, selector=args.selector, algorithm=args.algorithm, part=part, strict=True)
    res = run_experiment(cfg, run_root=args.run_root, progress=not args.no_progress)
    t = res.table
    print(t[["round", "test_accuracy", "test_loss", "num_trained", "entropy_bits", "covers_all_classes",
             "seconds"]].to_string(index=False))
    s = res.summary()
    print(f"\nrun dir: {res.run_dir}{' (read back from cache)' if res.from_cache else ''}")
    print(f"final accuracy (mean of last 10 rounds): {100 * s['final_accuracy']:.2f}%  "
          f"seconds/round: {s['seconds_per_round']:.2f}  uploaded: {s['total_bytes'] / 1e6:.2f} MB")
    return 0


def _cmd_sweep(args) -> int:
    from tqdm.auto import tqdm

    from .trainer import run_experiment

    if args.backend == "ray":
        from .distributed import RAY_MISSING

        try:
            import ray  # noqa: F401
        except ImportError:
            raise ConfigError(f"--backend ray: {RAY_MISSING}.") from None
        _ray_options(args)  # options are checked before any work
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    selectors = [s.strip() for s in args.selectors.split(",") if s.strip()]
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    partitions = [p.strip() for p in args.partitions.split(",") if p.strip()]
    jobs = []
    for part_name, selector, algorithm, seed in itertools.product(partitions, selectors, algorithms, seeds):
        cfg = _config(args, seed=seed, selector=selector, algorithm=algorithm, part=_partition(part_name),
                      strict=False)
        if args.backend == "ray":  # every configuration is checked before any training starts
            from .distributed import check_config

            check_config(cfg, len(jobs))
        else:
            cfg.validate()
        jobs.append((part_name, cfg))
    if args.threads is not None and args.threads < 1:
        raise ConfigError(f"--threads must be >= 1 (got {args.threads}).")
    rows = []
    if args.backend == "ray":
        from .distributed import run_configs

        options = _ray_options(args)
        with tqdm(total=len(jobs), desc="sweep (ray)", unit="run", disable=args.no_progress) as bar:
            outs = run_configs([cfg for _, cfg in jobs], args.run_root, options, on_done=lambda i, s: bar.update(1))
    else:
        if args.threads is not None:
            import torch

            torch.set_num_threads(args.threads)
        outs = []
        for part_name, cfg in tqdm(jobs, desc="sweep", unit="run", disable=args.no_progress):
            res = run_experiment(cfg, run_root=args.run_root, progress=not args.no_progress)
            outs.append({**res.summary(), "run_dir": str(res.run_dir), "cached": res.from_cache})
    for (part_name, cfg), out in zip(jobs, outs):
        rows.append({"partition": part_name, "selector": cfg.selector, "algorithm": cfg.algorithm, "seed": cfg.seed,
                     **out})
    summaries = pd.DataFrame(rows)
    if args.csv:
        summaries.to_csv(args.csv, index=False)
    table = results_table(summaries)
    print(table[["partition", "selector", "algorithm", "seeds", "accuracy (%)", "seconds_per_round"]]
          .to_string(index=False))
    return 0


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "paper":
            return _cmd_paper(args)
        if args.command == "gpu-check":
            from .gpu_check import run

            return run(args)
        return _cmd_run(args) if args.command == "run" else _cmd_sweep(args)
    except (ConfigError, ValueError, TypeError) as exc:
        if isinstance(exc, ConfigError) or "config field" in str(exc):
            print(f"error: {exc}", file=sys.stderr)
            return 2
        raise
