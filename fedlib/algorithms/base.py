"""The algorithm contract of fedlib's federated trainer.

Everything an algorithm does is a function of tensors, so that the trainer can run one client at a time
(``fedlib.training.trainer``, ``fedlib.training.local.local_train``) or many clients at once with ``torch.func.vmap``
over a
leading client axis (a batched trainer).  The vocabulary:

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
  -> (new_client_state, client_state_delta)`` -- called for every client that trained *and uploaded*,
  after local training.  ``client_state_delta`` (``dict[str, Tensor]``) is what the client uploads on top of its
  model (e.g. SCAFFOLD's ``Δc_i``); the trainer stores it in ``result.state_delta`` before ``aggregate``.
* ``aggregate(global_params, results, weights, server_state) -> (new_global_params, new_server_state)``.
  ``results`` is a non-empty list of ``fedlib.training.local.LocalResult`` of the clients that uploaded this round (in
  the order they were picked), ``weights`` a float64 numpy array of their FedAvg weights ``n_k / Σ n_j`` (sums
  to 1 over the uploading clients).  If no client uploads, the trainer keeps the global model and server state
  and does not call ``aggregate``.

A batched trainer produces the same ``LocalResult`` objects (unstacking its outputs) and calls the server-side
hooks unchanged.

Round shape (server side; the trainer's one round loop, ``fedlib.training.trainer.Experiment.run_round``, calls them, as
Flower's server calls a strategy's ``configure_fit``/``aggregate_fit``).  ``experiment`` is the trainer's
``Experiment``: the services of ``RoundServices`` (selection, local training, evaluation, data) and the run's
set-up.  The defaults give the per-round shape of FedAvg and its relatives; an algorithm with another shape
overrides only what differs (FedEntropy: its own client draw and a judgement of the uploads; FedConcat: two phases
with their own models, run length and checkpointed state):

* ``num_rounds(experiment) -> int`` -- table rounds of the run (default ``config.rounds``).  A ``ValueError``
  means the configured ``rounds`` does not suit the algorithm (the trainer reports it as a config error).
* ``init_round_state(experiment, global_params)`` -- the algorithm's own state of the run beside ``server_state``
  (any object; default None), kept in ``TrainState.algorithm_state``; ``round_state_to_checkpoint(round_state)``
  and ``round_state_from_checkpoint(experiment, data)`` store it with tensors and plain containers only.
* ``configure_round(experiment, state, rnd) -> RoundPlan`` -- the round's learning rate, phase and picked clients
  (default: ``lr · lr_decay^(rnd−1)``, phase ``"global"``, the run's selector).  The trainer then draws
  availability: which picked clients drop out and how many epochs each of the others trains.
* ``fit_round(experiment, state, plan, todo) -> RoundResult`` -- local training of ``todo`` (``[(client,
  epochs)]``) and aggregation into ``state``.  Default: every client trains from the global model
  (``experiment.train_clients``), the clients with data are judged (``judge_round``) and the kept ones are
  averaged with ``aggregate``.
* ``judge_round(experiment, state, trained) -> (kept, extra_bytes)`` -- which of the trained ``(client,
  LocalResult)`` pairs (all with data) upload their models, and what the judgement itself costs in bytes (default:
  all, 0).

The trainer turns the ``RoundResult`` into the table row: train loss, evaluation (when due), bytes and the
entropy columns -- the same for every algorithm.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import ClassVar, Protocol

import numpy as np
import torch
import torch.nn.functional as F

from fedlib._validate import check_parameter_names, parameter_checks

__all__ = [
    "Algorithm",
    "HParams",
    "RoundPlan",
    "RoundResult",
    "RoundServices",
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
        raise ValueError("weighted_average needs at least one dict (got none).")
    w = [float(x) for x in np.asarray(weights, dtype=np.float64).reshape(-1)]
    if len(w) != len(dicts):
        raise ValueError(f"weights has {len(w)} entries but there are {len(dicts)} dicts.")
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


@dataclass
class RoundPlan:
    """One round as ``Algorithm.configure_round`` plans it: table round ``round`` (from 1), learning rate ``lr``,
    the table's ``phase``, the ``picked`` clients in pick order, and ``info`` (the algorithm's own, e.g.
    FedConcat's ``RoundInfo``)."""

    round: int
    lr: float
    picked: list
    phase: str = "global"
    info: object = None


@dataclass
class RoundResult:
    """What a round did, as ``Algorithm.fit_round`` reports it for the table row.

    ``trained``: clients that trained, in training order; ``kept``: clients whose uploads entered the aggregation;
    ``losses``: the ``LocalResult`` whose ``train_loss`` the row averages (weights ``num_samples``);
    ``bytes_uploaded``: the round's uploads; ``evaluate``: False when the round leaves no global model to test
    (the test columns are then NaN); ``model``: the architecture of ``state.global_params`` when it is not the
    experiment's model.
    """

    trained: list
    kept: list
    losses: list
    bytes_uploaded: int
    evaluate: bool = True
    model: torch.nn.Module | None = None


class RoundServices(Protocol):
    """What the trainer's experiment offers the round-shape hooks (``fedlib.training.trainer.Experiment``)."""

    config: object  # the ExperimentConfig
    model: torch.nn.Module  # the architecture (its own tensors are not used)
    device: torch.device
    num_params: int  # trainable scalars of the model
    num_classes: int
    server_counts: np.ndarray  # (K, C) label counts the server sees (DP-noised with label DP)
    total_rounds: int
    train_transform: Callable  # the batch transform of local training, ``(x, generator) -> x`` (augment, normalise)

    def select(self, state) -> list:
        """The round's clients from the run's selector (selection stream, selector state in ``state``)."""

    def train_clients(self, state, todo, rnd: int, lr: float) -> list:
        """``[(client, LocalResult)]``: each ``(client, epochs)`` of ``todo`` trained from the global model with
        the algorithm's client hooks (client states updated in ``state``)."""

    def client_data(self, client: int) -> tuple:
        """``(x, y)``: the client's training inputs (uint8, on the device) and labels."""

    def client_inputs(self, client: int) -> torch.Tensor:
        """The client's training inputs as the model sees them in evaluation (normalised, not augmented)."""

    def local_hyper_params(self, lr: float, epochs: int):
        """``fedlib.training.local.LocalHyperParams`` of the run with learning rate ``lr`` and ``epochs``."""

    def client_torch_rng(self, rnd: int, client: int):
        """Context manager: the global torch RNG seeded for ``client`` in round ``rnd`` (dropout layers), restored
        after."""


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
    ``upload_factor``        model-sized tensors a client uploads per round (1: its model; SCAFFOLD: 2, model
                             and Δc_i); the trainer charges ``4 · p · upload_factor`` bytes per uploading client.
    """

    name = "base"
    HParams: ClassVar[type] = HParams
    has_after_step = False
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

    # -- round shape (server side; see the module docstring) ------------------------------------------
    def num_rounds(self, experiment: RoundServices) -> int:
        """``config.rounds`` table rounds."""
        return experiment.config.rounds

    def init_round_state(self, experiment: RoundServices, global_params: Params):
        """No state beside ``server_state``."""
        return None

    def round_state_to_checkpoint(self, round_state) -> dict | None:
        """Nothing to store."""
        return None

    def round_state_from_checkpoint(self, experiment: RoundServices, data: dict):
        """Nothing stored."""
        return None

    def configure_round(self, experiment: RoundServices, state, rnd: int) -> RoundPlan:
        """``lr · lr_decay^(rnd−1)``, phase ``"global"``, the clients of the run's selector."""
        return RoundPlan(rnd, decayed_lr(experiment.config, rnd - 1), experiment.select(state))

    def fit_round(self, experiment: RoundServices, state, plan: RoundPlan, todo) -> RoundResult:
        """Train ``todo`` from the global model; FedAvg-weighted ``aggregate`` of the uploads ``judge_round`` keeps.

        Every trained client with data reports its train loss; each kept client uploads ``upload_factor``
        model-sized tensors (``4 · p · upload_factor`` bytes) on top of what the judgement costs.
        """
        trained = experiment.train_clients(state, todo, plan.round, plan.lr)
        with_data = [(k, r) for k, r in trained if r.num_samples > 0]
        kept, extra_bytes = self.judge_round(experiment, state, with_data) if with_data else (with_data, 0)
        if kept:
            n = np.array([r.num_samples for _, r in kept], dtype=np.float64)
            state.global_params, state.server_state = self.aggregate(
                state.global_params, [r for _, r in kept], n / n.sum(), state.server_state
            )
        nbytes = 4 * experiment.num_params * int(self.upload_factor) * len(kept) + extra_bytes
        return RoundResult(
            trained=[k for k, _ in trained],
            kept=[k for k, _ in kept],
            losses=[r for _, r in with_data],
            bytes_uploaded=nbytes,
        )

    def judge_round(self, experiment: RoundServices, state, trained: list) -> tuple[list, int]:
        """Every trained client uploads; no judgement, no extra bytes."""
        return trained, 0
