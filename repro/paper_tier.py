"""The whole paper tier: its size and estimated cost, a dry run of every group, and a resumable run.

``python -m fedlib paper --dry-run`` (``dry_run``) walks the paper tier before anyone spends GPU hours on it:

1. every run of every group (``repro.tiers.tier_groups("paper")``: Tables I-IV, Fig. 2, large pools, the buffer
   study, FedEntropy) is built and validated (``ExperimentConfig.validate``);
2. every Dir(β) federation is partitioned on the data set's real label counts (``fedlib.data.profiles``) with the
   tier's ``min_partition_size``, for every seed the tier runs, through the trainer's random stream;
3. every statement of the paper the tier lists (``statements.yaml``) is judged on stand-ins of every planned
   run (``repro.scorecard.walk``): one the tier's runs could not judge raises ``DryRunError``;
4. tiny fake files are written in each data set's real on-disk format (``repro.fake_data``), and a covering set
   of runs -- every data set, every (data set, model), every (data set, K), every method, every (algorithm,
   model) pair, DP, dropout, stragglers, FedConcat, FedEntropy -- trains ONE round on them on the CPU through
   the path the real run takes (``repro.results.ensure_runs``: run cache, checkpoint, stored table).  The fake
   round changes only what tiny files and a CPU force: ``rounds = 1`` (FedConcat: 1 encoder + 1 classifier
   round), ``local_epochs = 1`` (no code path depends on E; stragglers then draw 1 epoch), ``min_partition_size =
   0`` (the real minimum is checked in step 2), the fake data root, ``device="cpu"``;
   ``small_images=True`` also has the loaders resize the 224 x 224 medical images to ``SMALL_IMAGE_SIZE`` (64)
   (EfficientNet on 224 x 224 takes seconds per step on a CPU).
   The first problem raises ``DryRunError`` naming the group and the run.

``tier_size`` counts the tier (runs, distinct runs -- Table II's baselines are Table I's runs --, rounds, local
sample passes, client steps) and estimates its GPU hours with ``repro.cost_model``: a step model (per client
step the larger of its kernel-launch time and its arithmetic time; evaluation per test sample likewise) with counted
ops and FLOPs and ASSUMED per-op and FLOP rates, replaced by the seconds per step measured by
``python -m fedlib gpu-check`` where a record exists under ``benchmarks/results/`` (LeNet-5 and VGG-11).  The
estimate is given for the engines the tier runs on a GPU (batched for LeNet-5 and VGG-11, the reference engine
for EfficientNet, whose BatchNorm the batched engine does not vmap, and for FedConcat) and for the reference engine
alone.  The CPU column uses the per-sample figures measured on a quiet 2-core CPU in ``benchmarks/README.md``
(LeNet-5 and VGG-11 only).

``run_tier`` runs every group, missing runs only: finished runs are read back from ``results_dir``, a run that was
interrupted resumes from its last checkpoint in ``run_root`` (every ``checkpoint_every`` rounds), so starting the
command again after a crash continues where it stopped (``tests/test_paper_tier.py`` kills it mid-sweep).
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from pathlib import Path

import pandas as pd

from fedlib._validate import ParameterError
from repro import tiers

__all__ = [
    "DryRunError",
    "CPU_SAMPLES_PER_SECOND",
    "tier_runs",
    "tier_size",
    "dry_run_plan",
    "dry_run",
    "run_tier",
    "format_size",
    "size_html",
]

#: Measured on a quiet 2-core CPU (benchmarks/README.md): LeNet-5, paper round (10 clients x 5 epochs x ~500
#: images) in 1.824 s; VGG-11, 10 clients x 1 epoch x 128 images in 4.329 s.
CPU_SAMPLES_PER_SECOND = {"lenet5": 25_000 / 1.824, "vgg11": 1_280 / 4.329}
#: Training/test sizes of the data sets without a verified label profile (fedlib.data.profiles.UNAVAILABLE_PROFILES).
_SIZES_WITHOUT_PROFILE = {"tissuemnist": (165_466, 47_280)}
#: A forward pass costs about a third of a training step (the CPU column; every round evaluates the test set).
_EVAL_COST = 1.0 / 3.0


#: Side of the medical images in a dry run with ``small_images``: EfficientNet's last stages then still see 2 x 2
#: maps (at 32 x 32 they are 1 x 1, and BatchNorm cannot train on a client batch of one image).
SMALL_IMAGE_SIZE = 64


class DryRunError(RuntimeError):
    """A run of the tier fails; the message names the group and the run's coordinates."""


def tier_runs(tier: str = "paper", groups=None, rounds: int | None = None) -> list:
    """Every ``repro.tiers.PlannedRun`` of ``tier`` (its groups, or ``groups``), group by group."""
    names = tiers.tier_groups(tier) if groups is None else tuple(groups)
    for g in names:
        if g not in tiers.GROUPS:
            raise ParameterError(
                None, "groups", groups, ", ".join(map(repr, tiers.tier_groups(tier))), got=f"the group {g!r}"
            )
    return [r for g in names for r in tiers.group_configs(tier, g, rounds=rounds)]


# ------------------------------------------------------------------------------------------------- size and cost
def _data_sizes(dataset: str) -> tuple[int, int]:
    from fedlib.data.profiles import PROFILES

    if dataset in PROFILES:
        p = PROFILES[dataset]
        return p.num_train, p.num_test or 0
    return _SIZES_WITHOUT_PROFILE[dataset]


def _table_rounds(c) -> int:
    """Rounds in the run's table (FedConcat: the encoder budget plus its classifier rounds)."""
    return c.rounds + (int(c.algorithm_params.get("classifier_rounds", 200)) if c.algorithm == "fedconcat" else 0)


def _sample_passes(c) -> tuple[float, float]:
    """Expected training sample passes (local SGD) and test samples evaluated over the run."""
    n_train, n_test = _data_sizes(c.dataset)
    epochs = c.local_epochs * (1 - c.straggler_fraction) + c.straggler_fraction * (c.local_epochs + 1) / 2
    train = c.rounds * c.clients_per_round * (1 - c.dropout_prob) * epochs * n_train / c.num_clients
    return train, _table_rounds(c) * n_test


def tier_size(tier: str = "paper", groups=None, records_dir=None) -> pd.DataFrame:
    """One row per group and a ``total`` row: runs, distinct runs, rounds, training sample passes and
    client steps (millions), the estimated hours on one GPU (``repro.cost_model``: the tier's engines, of
    which evaluation, and the reference engine alone) and on a 2-core CPU (where measured).  Measured step times come
    from the newest ``gpu-check`` record in ``records_dir`` (default ``benchmarks/results``); ``df.attrs`` says
    which models used them."""
    from repro.cost_model import measured_step_times, run_seconds, run_steps
    from repro.results import run_key

    measured = measured_step_times(records_dir)
    rows, seen, sources = [], set(), {}
    for r in tier_runs(tier, groups):
        c = r.config
        key = run_key(c)
        new = key not in seen
        seen.add(key)
        train, test = _sample_passes(c) if new else (0.0, 0.0)
        n_train = _data_sizes(c.dataset)[0]
        fast_train, fast_eval, src = run_seconds(c, n_train, test, "batched", measured)
        ref_train, ref_eval, _ = run_seconds(c, n_train, test, "reference", measured)
        sources[c.model] = src
        cpu = CPU_SAMPLES_PER_SECOND.get(c.model)
        rows.append(
            {
                "group": r.group,
                "model": c.model,
                "runs": 1,
                "distinct runs": int(new),
                "rounds": _table_rounds(c) if new else 0,
                "sample passes (M)": train / 1e6,
                "steps (M)": run_steps(c, n_train) / 1e6 if new else 0.0,
                "GPU hours": (fast_train + fast_eval) / 3600 if new else 0.0,
                "of which eval": fast_eval / 3600 if new else 0.0,
                "GPU hours, reference engine": (ref_train + ref_eval) / 3600 if new else 0.0,
                "CPU hours (2 cores)": (train + _EVAL_COST * test) / cpu / 3600 if cpu else math.nan,
            }
        )
    df = pd.DataFrame(rows)
    by_model = df.groupby("model", sort=False)[["GPU hours", "GPU hours, reference engine"]].sum()
    out = df.drop(columns="model").groupby("group", sort=False).sum(min_count=1)
    out.loc["total"] = out.sum(min_count=1)
    out.attrs = {
        "sources": sources,
        "by_model": by_model.to_dict("index"),
        "record": None if measured is None else measured["file"],
        "record_device": None if measured is None else measured["device"],
    }
    return out


_FLOAT_COLUMNS = (
    "sample passes (M)",
    "steps (M)",
    "GPU hours",
    "of which eval",
    "GPU hours, reference engine",
    "CPU hours (2 cores)",
)


def _size_parts(size: pd.DataFrame, tier: str) -> tuple[str, pd.DataFrame, list[str]]:
    """(headline, the table with its numbers formatted, notes on what its columns assume)."""
    from repro.cost_model import STEP_MODEL

    shown = size.copy()
    for c in _FLOAT_COLUMNS:
        shown[c] = shown[c].map(lambda v: "–" if pd.isna(v) else f"{v:,.1f}")
    tot = size.loc["total"]
    src = size.attrs.get("sources", {})
    modelled = sorted(m for m, v in src.items() if v == "step model")
    measured = sorted(m for m, v in src.items() if v == "measured")
    how = (
        f"measured by gpu-check on {size.attrs['record_device']} ({size.attrs['record']}) for {', '.join(measured)}; "
        if measured
        else "no gpu-check record (benchmarks/results/): "
    )
    headline = (
        f"tier '{tier}': {int(tot['runs'])} runs ({int(tot['distinct runs'])} distinct), "
        f"{int(tot['rounds']):,} rounds, {tot['steps (M)']:,.0f} M client steps, ~{tot['GPU hours']:,.0f} GPU "
        f"hours on one GPU (~{tot['GPU hours, reference engine']:,.0f} on the reference engine alone)"
    )
    notes = [
        "GPU hours by model (tier's engines / reference engine): "
        + ", ".join(
            f"{m} {v['GPU hours']:,.0f} / {v['GPU hours, reference engine']:,.0f}"
            for m, v in size.attrs.get("by_model", {}).items()
        ),
        "GPU hours: training with the batched engine for LeNet-5 and VGG-11 and the "
        "reference engine for EfficientNet and FedConcat, plus evaluating the test set every round; "
        + how
        + (
            f"step model for {', '.join(modelled)} (repro.cost_model: per client step the larger of counted "
            f"ops x {STEP_MODEL.t_op * 1e6:.0f} us and 3 x counted forward FLOPs x B over an ASSUMED rate, "
            f"{STEP_MODEL.gpu}). "
            if modelled
            else ""
        )
        + "CPU hours: LeNet-5 and VGG-11 figures measured on a quiet 2-core CPU (benchmarks/README.md); – where "
        "none was measured.",
    ]
    return headline, shown, notes


def format_size(size: pd.DataFrame, tier: str = "paper") -> str:
    """The size table as text, with what its columns assume."""
    headline, shown, notes = _size_parts(size, tier)
    return "\n".join([headline, shown.to_string(), *notes])


def size_html(size: pd.DataFrame, tier: str = "paper") -> str:
    """The size table as a book page shows it (HTML that wraps to the text column), with what it assumes."""
    import html

    from repro.notebook import frame_html

    headline, shown, notes = _size_parts(size, tier)
    return (
        f"<p>{html.escape(headline)}</p>"
        + frame_html(shown.reset_index())
        + "".join(f"<p><small>{html.escape(n)}</small></p>" for n in notes)
    )


# ---------------------------------------------------------------------------------------------------- dry run
def _features(r) -> set:
    c = r.config
    params = {k: v for k, v in c.algorithm_params.items() if k != "classifier_rounds"}
    method = r.label.get("method", c.algorithm)
    return {
        ("group", r.group),
        ("dataset", c.dataset),
        ("dataset-model", c.dataset, c.model),
        ("dataset-K", c.dataset, c.num_clients),
        ("method", method),
        ("selector", c.selector),
        ("algorithm-model", c.algorithm, json.dumps(params, sort_keys=True), c.model.split("-")[0]),
        ("partition", c.partition),
        ("dp", c.label_dp_epsilon is not None),
        ("dropout", c.dropout_prob > 0),
        ("stragglers", c.straggler_fraction > 0),
    }


def dry_run_plan(tier: str = "paper", groups=None) -> list:
    """The covering set of runs the dry run trains: in the tier's order, every run that covers a feature (data
    set, (data set, model), (data set, K), method, selector, (algorithm with its parameters, model family: LeNet-5,
    VGG-11, EfficientNet), partition, DP, dropout, stragglers, group) no earlier run covered."""
    covered, plan = set(), []
    for r in tier_runs(tier, groups):
        f = _features(r)
        if not f <= covered:
            covered |= f
            plan.append(r)
    return plan


def _check_partitions(runs, log) -> int:
    """Partition every Dir(β) federation on the real label counts with the tier's minimum; returns the count."""
    from fedlib.data.partition import dirichlet_partition
    from fedlib.data.profiles import PROFILES
    from fedlib.seeds import stream_rng

    feds = sorted(
        {
            (r.config.dataset, r.config.num_clients, r.config.beta, r.config.min_partition_size, r.config.seed)
            for r in runs
            if r.config.partition == "dirichlet"
        }
    )
    skipped = sorted({f[0] for f in feds if f[0] not in PROFILES})
    checked = 0
    for ds, k, beta, min_size, seed in feds:
        if ds not in PROFILES:
            continue
        t0 = time.perf_counter()
        try:
            parts = dirichlet_partition(
                class_counts=PROFILES[ds].train_counts,
                num_clients=k,
                beta=beta,
                rng=stream_rng(seed, "partition"),
                min_partition_size=min_size,
            )
        except ValueError as exc:
            raise DryRunError(
                f"partition of {ds} (K={k}, Dir({beta}), min_partition_size={min_size}, seed {seed}) fails: {exc}"
            ) from exc
        checked += 1
        if time.perf_counter() - t0 > 1.0:
            log(f"   partition {ds} K={k} seed {seed}: {time.perf_counter() - t0:.1f} s")
        assert min(p.size for p in parts) >= min_size
    if skipped:
        log(
            f"   no label profile, partitions not checked on real counts: {', '.join(skipped)} "
            "(fedlib.data.profiles.UNAVAILABLE_PROFILES)"
        )
    return checked


def _fake_config(r, data_root: Path, small_images: bool):
    c = r.config
    changes = dict(
        rounds=1,
        local_epochs=1,
        data_root=str(data_root),
        download=False,
        device="cpu",
        min_partition_size=0,
        checkpoint_every=1,
    )
    if c.algorithm == "fedconcat":
        changes["algorithm_params"] = {**c.algorithm_params, "encoder_rounds": 1, "classifier_rounds": 1}
    if small_images and c.dataset in ("pathmnist", "tissuemnist", "brain-tumor-mri"):
        changes["dataset_options"] = {**c.dataset_options, "image_size": SMALL_IMAGE_SIZE}
    return c.replace(**changes)


def _write_fake_data(plan, root: Path) -> None:
    from fedlib.data.datasets import load_dataset
    from fedlib.data.profiles import PROFILES
    from repro.fake_data import write_fake_dataset

    needed: dict = {}
    for r in plan:
        c = r.config
        key = (c.dataset, int(c.dataset_options.get("size", 28)))
        needed[key] = max(needed.get(key, 0), c.num_clients)
    for (ds, size), k in sorted(needed.items()):
        classes = PROFILES[ds].num_classes if ds in PROFILES else 8
        # ~3 images per client, so that some of the M picked clients of a round hold data under Dir(0.1)
        write_fake_dataset(ds, root, train_per_class=max(4, math.ceil(3 * k / classes)), test_per_class=2, size=size)
        load_dataset(ds, data_root=root, **({"size": size} if size != 28 else {}))  # the real loader reads it


def dry_run(tier: str = "paper", *, workdir=None, groups=None, small_images: bool = False, log=print) -> pd.DataFrame:
    """Walk ``tier`` (see the module docstring); returns one row per trained run (group, label, seconds, clients
    trained, test accuracy).  Raises ``DryRunError`` naming the group and run on the first problem."""
    from repro.results import ensure_runs

    t_start = time.perf_counter()
    runs = tier_runs(tier, groups)
    log(f"dry run of tier '{tier}': {len(runs)} runs in {len(dict.fromkeys(r.group for r in runs))} groups validated")
    n = _check_partitions(runs, log)
    log(f"   {n} Dir(beta) partitions of the real label counts reach the tier's minimum client size")
    if groups is None:
        judged = _walk_statements(tier)
        log(f"   {judged} statements of the paper judged on stand-ins of every planned run (scorecard.walk)")
    plan = dry_run_plan(tier, groups)
    tmp = tempfile.TemporaryDirectory(prefix="fedlib-dry-run-") if workdir is None else None
    work = Path(tmp.name if tmp is not None else workdir)
    try:
        _write_fake_data(plan, work / "data")
        log(f"   fake files written under {work / 'data'}; training {len(plan)} runs for one round each")
        rows = []
        for i, r in enumerate(plan, 1):
            cfg = _fake_config(r, work / "data", small_images)
            name = f"{r.group} {r.label}"
            t0 = time.perf_counter()
            try:
                info = ensure_runs(
                    [r._replace(config=cfg)],
                    tier,
                    results_dir=work / "results",
                    run_root=str(work / "runs"),
                    log=lambda s: None,
                )
            except Exception as exc:  # noqa: BLE001 -- re-raised with the run's name
                raise DryRunError(f"{name}: {type(exc).__name__}: {exc}") from exc
            if info["skipped"]:
                raise DryRunError(f"{name}: {info['skipped'][0][1]}")
            rows.append(
                {
                    "group": r.group,
                    "run": json.dumps(r.label),
                    "dataset": cfg.dataset,
                    "model": cfg.model,
                    "seconds": time.perf_counter() - t0,
                }
            )
            log(f"   [{i}/{len(plan)}] {name}: ok, {rows[-1]['seconds']:.1f} s")
        done = pd.DataFrame(rows)
        _check_trained(plan, tier, work / "results")
        log(f"dry run passed: {len(plan)} runs trained, {time.perf_counter() - t_start:.0f} s in all")
        return done
    finally:
        if tmp is not None:
            tmp.cleanup()


def _walk_statements(tier: str) -> int:
    """Every statement the tier lists, judged on stand-ins of the runs it plans; raises ``DryRunError`` naming
    those its runs could not judge (the card would stay empty there after the real run)."""
    from repro.scorecard import walk

    judged, problems = walk(tier)
    if problems:
        raise DryRunError(
            f"{len(problems)} statements of the paper cannot be judged from tier '{tier}''s runs: "
            + "; ".join(f"{sid} ({why})" for sid, why in problems)
        )
    return judged


def _check_trained(plan, tier: str, results_dir: Path) -> None:
    """Every fake round trained at least one client and evaluated the model (else the round proved nothing)."""
    from repro.results import load_run

    for r in plan:
        for p in sorted((results_dir / tier / r.group).glob("*.csv")):
            table, meta = load_run(p)
            if meta["label"] != r.label:
                continue
            last = table[table["round"] >= 1]
            if not (last["num_trained"] > 0).any():
                raise DryRunError(
                    f"{r.group} {r.label}: no picked client held fake data, so the round trained "
                    "nothing; enlarge the fake data (repro.paper_tier._write_fake_data)"
                )
            if not last["test_accuracy"].notna().any():
                raise DryRunError(f"{r.group} {r.label}: the round was not evaluated")


# ------------------------------------------------------------------------------------------------ the real run
def run_tier(
    tier: str = "paper",
    *,
    results_dir=None,
    run_root="runs",
    groups=None,
    rounds: int | None = None,
    overrides: dict | None = None,
    workers: int = 1,
    log=print,
) -> dict:
    """Train every missing run of ``tier`` group by group and store it (``repro.results.ensure_runs``).

    Restartable: stored runs are read back, an interrupted run resumes from its last checkpoint under
    ``run_root``.  ``overrides`` (ExperimentConfig fields, e.g. ``{"data_root": ...}``) apply to every run.
    Returns ``{group: ensure_runs' counts}``."""
    from repro.results import ensure_runs

    out = {}
    for g in tiers.tier_groups(tier) if groups is None else tuple(groups):
        runs = tier_runs(tier, [g], rounds)
        if overrides:
            runs = [r._replace(config=r.config.replace(**overrides).validate()) for r in runs]
        log(f"== {tier}/{g}: {len(runs)} runs")
        info = ensure_runs(
            runs, tier, results_dir=results_dir, run_root=str(run_root), workers=workers, log=lambda s: log("   " + s)
        )
        log(
            f"   trained {info['trained']}, copied {info['copied']}, already stored {info['already']}, "
            f"skipped {len(info['skipped'])}; {info['wall_seconds']:.1f} s"
        )
        out[g] = info
    return out
