"""The algorithm contract of fedlib's federated trainer.

Everything an algorithm does is a function of tensors, so that the trainer can run one client at a time
(``fedlib.training.local.local_train``) or many at once with ``torch.func.vmap`` over a leading client axis
(``fedlib.training.batched``).  The vocabulary:

``params``
    ``dict[str, Tensor]``: the model's state as used with ``torch.func.functional_call(model, params, (x,))``.
    It holds every named parameter *and* every named buffer of the model (``fedlib.training.local.model_state``).
    Only the keys in ``trainable`` (the model's ``named_parameters`` with ``requires_grad``) are trained; the
    other keys (buffers such as batch-norm statistics) are carried along and averaged by ``weighted_average``.
``ctx`` (client context)
    ``dict[str, Tensor]``: everything client-specific the client-side hooks need, built by
    ``client_context`` before local training.  All values are tensors of a fixed shape per algorithm (for a
    given model and number of classes), so a batched caller stacks the dicts of M clients key by key along a
    new leading axis (``torch.stack([ctx_k[key] for k in clients])``) and vmaps over that axis.
``server_state`` / ``client_state``
    ``dict[str, Tensor]`` (possibly empty): persistent algorithm state of the server and of each client
    (e.g. SCAFFOLD's control variates).  They are checkpointed with ``torch.save`` so they must hold
    tensors only.
``hp``
    ``fedlib.training.local.LocalHyperParams``: the client optimiser settings of one round (lr after decay,
    momentum, weight decay, batch size, epochs of that client).

Hooks (what a vmapped caller stacks):

Client side, called inside local training, must be pure tensor functions (no Python control flow on tensor
values, no in-place ops on inputs, no ``.item()``) so they can run under ``vmap`` and ``torch.func.grad``:

* ``loss(logits, y, *, params, global_params, ctx) -> Tensor`` -- scalar training loss of one mini-batch.
  ``logits`` (B, C), ``y`` (B,) int64.  Batched: ``logits``, ``y``, ``params``, ``ctx`` carry the client axis;
  ``global_params`` is shared (``in_dims=None``) -- it is the same for all clients of a round.
* ``correct_grads(grads, *, ctx) -> grads`` -- applied to the gradient of ``loss`` w.r.t. the trainable
  parameters before the SGD step (before weight decay is added).  Batched: ``grads`` and ``ctx`` carry the
  client axis.
* ``after_step(params, *, ctx, lr) -> params`` -- applied to the trainable parameters after every SGD step,
  outside the momentum buffer (e.g. SCAFFOLD as NIID-Bench codes it: ``y ← y − lr·(c − c_i)``).  Called only when
  the algorithm sets ``has_after_step = True``.  Batched: ``params`` and ``ctx`` carry the client axis.

Client side, called once per client and round *outside* the training loop (plain Python is fine):

* ``client_context(client_id, label_counts, server_state, client_state) -> dict[str, Tensor]``.
  ``label_counts`` is the client's TRUE per-class training-label count vector (float tensor, shape (C,)) --
  the client knows its own labels; label DP only concerns what the server sees for selection.
  A batched caller calls it once per client and stacks the results.

Server side (plain Python over lists of clients; not vmapped):

* ``init_server_state(global_params, *, num_clients) -> dict[str, Tensor]``
* ``init_client_state(global_params) -> dict[str, Tensor]`` -- state of one client before it ever trains.
* ``update_client_state(client_state, result, *, global_params, server_state, ctx, hp)
  -> (new_client_state, client_state_delta)`` -- called for every client that trained.  ``client_state_delta``
  (``dict[str, Tensor]``) is what the client uploads on top of its model (e.g. SCAFFOLD's ``Δc_i``); the trainer
  stores it in ``result.state_delta`` before ``aggregate``.
* ``aggregate(global_params, results, weights, server_state) -> (new_global_params, new_server_state)``.
  ``results`` is a non-empty list of ``fedlib.training.local.LocalResult`` of the clients that uploaded this round (in
  the order they were picked), ``weights`` a float64 numpy array of their FedAvg weights ``n_k / Σ n_j`` (sums
  to 1 over the uploading clients).  If no client uploads, ``aggregate`` is not called.

Round hooks (pure: given values, they return values; the trainer's round loop,
``fedlib.training.trainer.Experiment.run_round``, calls them at its named points, as Flower's server asks a
strategy).  The defaults give FedAvg's round; FedEntropy overrides ``sample``, ``client_report`` and ``keep``,
FedConcat ``num_rounds``, the run state, ``plan_round``, ``start_params`` and ``aggregate_round``:

* ``num_rounds(rounds, model, *, num_clients, num_selected) -> int`` -- table rounds of the run (default
  ``rounds``); a ``ValueError`` means ``rounds`` does not suit the algorithm.
* ``init_run_state(global_params, *, model, label_counts, config)`` -- the algorithm's own state of the run (any
  object, default None); ``run_state_to_checkpoint`` / ``run_state_from_checkpoint`` store it as tensors and
  plain containers.
* ``plan_round(rnd, run_state, *, config, model) -> (RoundPlan, run_state)`` -- the round's phase, learning rate
  and the model its clients train.
* ``sample(server_state, num_selected, rng) -> clients or None`` -- the algorithm's own client draw, used in place
  of random selection (None: the run's selector).
* ``start_params(client, global_params, run_state) -> params`` -- the model a client trains from.
* ``client_report(model, params, x, *, batch_size)`` -- what a trained client reports beside its model (only
  when ``has_client_report``; 4 bytes per entry).
* ``keep(plan, clients, reports, sizes, server_state) -> (mask, server_state)`` -- which trained clients upload.
* ``aggregate_round(plan, results, weights, global_params, server_state, run_state) -> (global_params,
  server_state, run_state)`` -- the round's aggregation of the kept uploads (default: ``aggregate``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from fedlib._validate import ParameterError, check_parameter_names, parameter_checks

__all__ = [
    "Algorithm",
    "HParams",
    "RoundPlan",
    "decayed_lr",
    "weighted_average",
    "tree_sub",
    "tree_add",
    "tree_scale",
    "zeros_like_params",
]

Params = dict[str, torch.Tensor]


def weighted_average(dicts: Sequence[Mapping[str, torch.Tensor]], weights) -> Params:
    """Key-wise ``Σ_k w_k d_k`` for floating tensors.

    Integer tensors (e.g. ``num_batches_tracked``) are not averaged: the value of the first dict is kept.
    The sum is computed in float64 and cast back to the tensor's dtype, in the order of ``dicts``.
    """
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


def tree_sub(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor], keys=None) -> Params:
    """``a - b`` key-wise (over ``keys`` or all keys of ``a``)."""
    keys = a.keys() if keys is None else keys
    return {k: a[k] - b[k] for k in keys}


def tree_add(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor], keys=None) -> Params:
    """``a + b`` key-wise (over ``keys`` or all keys of ``a``)."""
    keys = a.keys() if keys is None else keys
    return {k: a[k] + b[k] for k in keys}


def tree_scale(a: Mapping[str, torch.Tensor], s: float) -> Params:
    """``s * a`` key-wise."""
    return {k: v * s for k, v in a.items()}


def zeros_like_params(params: Mapping[str, torch.Tensor], keys=None) -> Params:
    """Zero tensors shaped like ``params`` (over ``keys`` or all floating keys)."""
    keys = [k for k, v in params.items() if torch.is_floating_point(v)] if keys is None else keys
    return {k: torch.zeros_like(params[k]) for k in keys}


@dataclass(frozen=True)
class RoundPlan:
    """One round as ``Algorithm.plan_round`` plans it: table round ``round`` (from 1), the table's ``phase``,
    learning rate ``lr``; ``model``: the architecture the clients train and the global model is tested with (None:
    the run's); ``local``: the algorithm whose client hooks train (None: the run's); ``max_batches``: mini-batches
    per client (None: ``epochs`` epochs); ``evaluate``: False when the round leaves no global model to test."""

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
    """An algorithm's hyper-parameters, declared once: a frozen dataclass whose fields are the parameters
    ``make_algorithm`` takes, with their defaults; ``__post_init__`` checks them with the ``fedlib._validate``
    checks (and may store a value in its canonical form, e.g. ``1`` as ``1.0``).  This base has no fields."""

    def as_dict(self) -> dict:
        """``{field: value}`` in declaration order."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


class Algorithm:
    """Base class: FedAvg behaviour for every hook (see the module docstring for the contract).

    Subclasses override only the hooks they change.  The hyper-parameters are declared once, as the fields of
    the nested frozen dataclass ``HParams`` (a subclass of :class:`HParams`; the base one has none):
    ``Algorithm(**params)`` builds ``self.hparams = type(self).HParams(**params)``; an unknown or bad parameter
    is a ``fedlib._validate.ParameterError`` naming the algorithm.  Every field reads as an attribute of the
    algorithm too (``FedProx().mu``) but cannot be set on it: a run with other hyper-parameters is another
    algorithm.  ``params_dict`` (configs, reports, ``repr``) is ``hparams.as_dict()``.

    The algorithm object itself is not frozen: ``bind`` sets ``trainable`` per model.  Attributes:

    ``name``                 registry name.
    ``hparams``              the hyper-parameters (a frozen ``HParams``).
    ``trainable``            tuple of the trainable keys of ``params``; set by the trainer via
                             ``bind(trainable_keys)`` before any hook is called.
    ``needs_label_counts``   True if ``client_context`` uses the client's label counts (FedRS, FedLC); these
                             stay on the client and are not uploaded.
    ``uploads_label_counts`` True if the algorithm itself makes every client upload its label counts once
                             (e.g. FedConcat's clustering); the trainer then charges 4·C·K bytes at round 0,
                             as it does for label-based selectors.
    ``has_after_step``       True if ``after_step`` changes the parameters (the engines skip it otherwise).
    ``has_client_report``    True if every trained client reports ``client_report`` (FedEntropy's soft label).
    ``upload_factor``        model-sized tensors a client uploads per round (1: its model; SCAFFOLD: 2, model
                             and Δc_i); the trainer charges ``4 · p · upload_factor`` bytes per uploading client.
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
        """The algorithm's hyper-parameters (for configs and reports): the fields of ``hparams``."""
        return self.hparams.as_dict()

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params_dict().items())
        return f"{type(self).__name__}({args})"

    # -- client side (pure tensor functions; vmappable) -----------------------------------------------
    def loss(
        self,
        logits: torch.Tensor,
        y: torch.Tensor,
        *,
        params: Params,
        global_params: Params,
        ctx: Mapping[str, torch.Tensor],
    ) -> torch.Tensor:
        """Mean cross-entropy of the mini-batch (the FedAvg loss)."""
        return F.cross_entropy(logits, y)

    def correct_grads(self, grads: Params, *, ctx: Mapping[str, torch.Tensor]) -> Params:
        """Identity (FedAvg)."""
        return grads

    def after_step(self, params: Params, *, ctx: Mapping[str, torch.Tensor], lr: float) -> Params:
        """Identity (FedAvg); only called when ``has_after_step`` is True."""
        return params

    # -- client side (once per client and round) ------------------------------------------------------
    def client_context(
        self,
        client_id: int,
        label_counts: torch.Tensor,
        server_state: Mapping[str, torch.Tensor],
        client_state: Mapping[str, torch.Tensor],
    ) -> dict[str, torch.Tensor]:
        """No context (FedAvg)."""
        return {}

    # -- server side -----------------------------------------------------------------------------------
    def init_server_state(self, global_params: Params, *, num_clients: int) -> dict[str, torch.Tensor]:
        """No server state (FedAvg)."""
        return {}

    def init_client_state(self, global_params: Params) -> dict[str, torch.Tensor]:
        """No client state (FedAvg)."""
        return {}

    def update_client_state(self, client_state, result, *, global_params, server_state, ctx, hp):
        """Client state unchanged, nothing extra uploaded (FedAvg)."""
        return client_state, {}

    def aggregate(self, global_params: Params, results, weights, server_state):
        """FedAvg: ``w ← Σ_k p_k w_k`` with ``p_k = n_k / Σ_j n_j`` over the uploading clients."""
        return weighted_average([r.params for r in results], weights), server_state

    # -- round hooks (pure; see the module docstring) ---------------------------------------------------
    def num_rounds(self, rounds: int, model, *, num_clients: int, num_selected: int) -> int:
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

    def sample(self, server_state, num_selected: int, rng: np.random.Generator):
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
