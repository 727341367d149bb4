"""The algorithm contract of fedlib's federated trainer.

Every client-side hook is a pure tensor function, so the trainer can run one client at a time
(``fedlib.training.local``) or many with ``torch.func.vmap`` (``fedlib.training.batched``).

Vocabulary: ``params`` is ``dict[str, Tensor]``, the model state for ``functional_call`` (parameters and buffers;
only the keys in ``trainable`` are trained). ``ctx`` is a client's context, tensors of fixed shapes that a batched
caller stacks key by key. ``server_state``/``client_state`` are tensor dicts (checkpointed). ``hp`` is a
``LocalHyperParams``.

Client hooks, inside local training (vmappable: no Python control flow on tensor values, no in-place ops):
``loss(logits, y, *, params, global_params, ctx)``, ``correct_grads(grads, *, ctx)`` (before weight decay) and
``after_step(params, *, ctx, lr)`` (only when ``has_after_step``). Once per client and round:
``client_context(client_id, label_counts, server_state, client_state)``; ``label_counts`` are the client's true
counts.

Server hooks: ``init_server_state``, ``init_client_state``, ``update_client_state(...) -> (state, delta)`` (the
delta is uploaded, stored in ``result.state_delta``) and ``aggregate(global_params, results, weights,
server_state)`` with FedAvg weights ``n_k / sum n_j`` over the uploading clients (never called with none).

Round hooks (pure; ``fedlib.training.trainer.Experiment.run_round`` calls them; the defaults give FedAvg's round):
``num_rounds``, ``init_run_state`` and its checkpoint pair, ``plan_round``, ``sample``, ``start_params``,
``client_report``, ``keep`` and ``aggregate_round``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from fedlib._validate import ParameterError, check_parameter_names, parameter_checks

__all__ = ["Algorithm", "HParams", "RoundPlan", "decayed_lr", "weighted_average"]

Params = dict[str, torch.Tensor]


def weighted_average(dicts: Sequence[Mapping[str, torch.Tensor]], weights) -> Params:
    """Key-wise ``Σ_k w_k d_k``, summed in float64 in the order of ``dicts``; integer tensors keep the first value."""
    if len(dicts) == 0:
        raise ParameterError(None, "dicts", dicts, "at least one dict of tensors")
    w = [float(x) for x in np.asarray(weights, dtype=np.float64).reshape(-1)]
    if len(w) != len(dicts):
        raise ParameterError(None, "weights", weights, f"one weight per dict ({len(dicts)})", got=f"{len(w)} weights")
    out: Params = {}
    for key, first in dicts[0].items():
        if not torch.is_floating_point(first):
            out[key] = first.clone()
            continue
        acc = torch.zeros_like(first, dtype=torch.float64)
        for wk, d in zip(w, dicts):
            acc += wk * d[key].to(torch.float64)
        out[key] = acc.to(first.dtype)
    return out


@dataclass(frozen=True)
class RoundPlan:
    """One round as ``Algorithm.plan_round`` plans it. ``model`` and ``local`` (the algorithm whose client hooks
    train) default to the run's (None); ``max_batches`` None: ``epochs`` epochs; ``evaluate`` False: nothing to test."""

    round: int
    phase: str
    lr: float
    model: torch.nn.Module | None = None
    local: object = None
    max_batches: int | None = None
    evaluate: bool = True


def decayed_lr(config, step: int) -> float:
    """``config.lr · config.lr_decay^step``: the learning rate ``step`` rounds into a schedule."""
    return config.lr * config.lr_decay**step


@dataclass(frozen=True)
class HParams:
    """An algorithm's hyper-parameters: a frozen dataclass whose fields (with defaults) are what ``make_algorithm``
    takes; ``__post_init__`` checks them and may store a canonical form (``1`` as ``1.0``). This base has none."""


class Algorithm:
    """Base class: FedAvg behaviour for every hook (contract: module docstring); subclasses override what they change.

    The hyper-parameters are the fields of the nested frozen dataclass ``HParams``: ``Algorithm(**params)`` builds
    ``self.hparams`` (a bad parameter is a ``ParameterError`` naming the algorithm); each field reads as an
    attribute (``FedProx().mu``) but cannot be set. ``bind`` sets ``trainable``, the trained keys of ``params``.

    Class flags: ``needs_label_counts`` (``client_context`` uses the client's own counts), ``uploads_label_counts``
    (every client uploads its counts once: 4·C·K bytes at round 0), ``has_after_step``, ``has_client_report``
    (FedEntropy's soft label) and ``upload_factor`` (model-sized uploads per client and round; SCAFFOLD: 2).
    """

    name = "base"
    HParams: ClassVar[type] = HParams
    has_after_step = False
    has_client_report = False
    needs_label_counts = False
    uploads_label_counts = False
    upload_factor = 1

    def __init__(self, **params) -> None:
        part = f"algorithm {self.name!r}"
        check_parameter_names(part, params, [f.name for f in fields(self.HParams)])
        with parameter_checks(part):
            object.__setattr__(self, "hparams", self.HParams(**params))
        self.trainable: tuple[str, ...] = ()

    def __getattr__(self, name: str):
        # only called when normal lookup fails: a hyper-parameter reads as an attribute of the algorithm
        hparams = self.__dict__.get("hparams")
        if hparams is not None and name in hparams.__dataclass_fields__:
            return getattr(hparams, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name: str, value) -> None:
        if name == "hparams" or name in self.HParams.__dataclass_fields__:
            raise AttributeError(
                f"{name} is a hyper-parameter of {type(self).__name__} (frozen): build another "
                f"algorithm, e.g. make_algorithm({self.name!r}, {name}=...)."
            )
        object.__setattr__(self, name, value)

    # -- set-up ------------------------------------------------------------------------------------------
    def bind(self, trainable_keys) -> "Algorithm":
        """Tell the algorithm which keys of ``params`` are trainable (the order is the model's)."""
        self.trainable = tuple(trainable_keys)
        return self

    def params_dict(self) -> dict:
        """The algorithm's hyper-parameters (for configs and reports), in declaration order."""
        return {f.name: getattr(self.hparams, f.name) for f in fields(self.hparams)}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params_dict().items())
        return f"{type(self).__name__}({args})"

    # -- client side (pure tensor functions; vmappable) -----------------------------------------------
    def loss(self, logits: torch.Tensor, y: torch.Tensor, *, params: Params, global_params: Params, ctx: Params):
        """Mean cross-entropy of the mini-batch (the FedAvg loss)."""
        return F.cross_entropy(logits, y)

    def correct_grads(self, grads: Params, *, ctx: Params) -> Params:
        """Identity (FedAvg)."""
        return grads

    def after_step(self, params: Params, *, ctx: Params, lr: float) -> Params:
        """Identity (FedAvg); only called when ``has_after_step`` is True."""
        return params

    # -- client side (once per client and round) ------------------------------------------------------
    def client_context(self, client_id: int, label_counts: torch.Tensor, server_state: Params, client_state: Params):
        """No context (FedAvg)."""
        return {}

    # -- server side -----------------------------------------------------------------------------------
    def init_server_state(self, global_params: Params, *, num_clients: int) -> Params:
        """No server state (FedAvg)."""
        return {}

    def init_client_state(self, global_params: Params) -> Params:
        """No client state (FedAvg)."""
        return {}

    def update_client_state(self, client_state, result, *, global_params, server_state, ctx, hp):
        """Client state unchanged, nothing extra uploaded (FedAvg)."""
        return client_state, {}

    def aggregate(self, global_params: Params, results, weights, server_state):
        """FedAvg: ``w ← Σ_k p_k w_k`` with ``p_k = n_k / Σ_j n_j`` over the uploading clients."""
        return weighted_average([r.params for r in results], weights), server_state

    # -- round hooks (pure; see the module docstring) ---------------------------------------------------
    def num_rounds(self, rounds: int, model, *, num_clients: int, clients_per_round: int) -> int:
        """``rounds`` table rounds."""
        return rounds

    def init_run_state(self, global_params: Params, *, model, label_counts, config):
        """No state beside ``server_state``."""
        return None

    def run_state_to_checkpoint(self, run_state) -> dict | None:
        """Nothing to store."""
        return None

    def run_state_from_checkpoint(self, data: dict, *, model, device):
        """Nothing stored."""
        return None

    def plan_round(self, rnd: int, run_state, *, config, model) -> tuple[RoundPlan, object]:
        """Phase ``"global"``, ``lr · lr_decay^(rnd−1)``, the run's model."""
        return RoundPlan(rnd, "global", decayed_lr(config, rnd - 1)), run_state

    def sample(self, server_state, clients_per_round: int, rng: np.random.Generator):
        """No draw of its own: the run's selector picks."""
        return None

    def start_params(self, client: int, global_params: Params, run_state) -> Params:
        """Every client trains from the global model."""
        return global_params

    def client_report(self, model, params: Params, x: torch.Tensor, *, batch_size: int):
        """Nothing beside the model (only called when ``has_client_report``)."""
        return None

    def keep(self, plan: RoundPlan, clients: list, reports: list, sizes: np.ndarray, server_state):
        """Every trained client uploads."""
        return np.ones(len(clients), dtype=bool), server_state

    def aggregate_round(self, plan: RoundPlan, results: list, weights, global_params, server_state, run_state):
        """``aggregate`` of the kept uploads (none: the global model and server state stay)."""
        if results:
            global_params, server_state = self.aggregate(global_params, results, weights, server_state)
        return global_params, server_state, run_state
