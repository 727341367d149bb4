"""FedConcat (Diao, Li & He, AAAI 2024): cluster clients by label distribution, FedAvg per cluster, concatenate the
frozen encoders, train a joint classifier."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from fedlib._validate import ParameterError, check_count_matrix, check_float, check_int, check_optional, check_rng
from fedlib.algorithms.base import Algorithm, HParams, RoundPlan, decayed_lr, weighted_average
from fedlib.algorithms.kmeans import kmeans
from fedlib.seeds import stream_rng
from fedlib.training.local import LocalResult, make_generator

__all__ = [
    "DEFAULT_NUM_CLUSTERS",
    "DEFAULT_CLASSIFIER_ROUNDS",
    "FedConcatState",
    "ConcatModel",
    "FedConcat",
    "label_distributions",
    "cluster_clients",
    "last_linear_name",
    "make_encoder",
    "encoder_keys",
    "fedconcat_round_split",
    "aggregate_clusters",
]

#: Clusters: FedConcat's default ("a division of the 40 clients into K = 5 clusters") and FedEntOpt §V-A5
#: ("FedConcat employs five clusters").
DEFAULT_NUM_CLUSTERS = 5
#: Classifier rounds T_c: FedConcat's default ("200 rounds allocated for training the classifier").
DEFAULT_CLASSIFIER_ROUNDS = 200

Params = dict[str, torch.Tensor]
#: The trainable keys of a :class:`ConcatModel`: its head.
HEAD_KEYS = ("head.weight", "head.bias")


# --------------------------------------------------------------------------- clustering (Stage 1-A)


def label_distributions(label_counts) -> np.ndarray:
    """Per-client label distributions, FedConcat Eq. (2): :math:`P_i(y) = (N_{i,1}/N_i, \\dots, N_{i,m}/N_i)`.

    Negative counts (DP noise) are clipped to 0; an all-zero client gets the uniform distribution.

    >>> label_distributions([[3, 1], [0, 2]]).tolist()
    [[0.75, 0.25], [0.0, 1.0]]
    """
    arr = np.maximum(check_count_matrix("label_counts", label_counts, allow_negative=True), 0.0)
    total = arr.sum(1, keepdims=True)
    uniform = np.full_like(arr, 1.0 / arr.shape[1])
    return np.divide(arr, total, out=uniform, where=total > 0)


def cluster_clients(label_counts, num_clusters: int, rng: np.random.Generator, *, n_init: int = 10) -> np.ndarray:
    """Stage 1-A of FedConcat: K-means (``n_init`` k-means++ restarts from ``rng``) on the label distributions
    (Eq. 2) of the ``(N, C)`` counts; ``(N,)`` int64 clusters numbered by first appearance (fewer than K values
    when fewer than K distinct distributions exist).

    >>> import numpy as np
    >>> cluster_clients([[9, 1], [8, 2], [1, 9], [0, 10]], 2, np.random.default_rng(0)).tolist()
    [0, 0, 1, 1]
    """
    dist = label_distributions(label_counts)
    num_clusters = check_int("num_clusters", num_clusters, low=1, high=dist.shape[0])
    return kmeans(dist, num_clusters, rng, n_init=n_init).labels


# --------------------------------------------------------------------------- models


def last_linear_name(model: nn.Module) -> str:
    """Name of the last ``nn.Linear`` (in ``named_modules`` order): the classifier FedConcat splits off; its input
    is the encoder's feature (84-d for LeNet-5, 512-d for VGG-11)."""
    names = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    if not names:
        allowed = "a model with an nn.Linear classifier layer"
        raise ParameterError(None, "model", model, allowed, got=f"a {type(model).__name__} without an nn.Linear layer")
    return names[-1]


def make_encoder(model: nn.Module) -> tuple[nn.Module, int]:
    """A copy of ``model`` with its last linear layer replaced by ``nn.Identity``, and the feature width; its
    parameter names are the model's minus the classifier's (:func:`encoder_keys`)."""
    head_name = last_linear_name(model)
    head = model.get_submodule(head_name)
    encoder = copy.deepcopy(model)
    parent, _, child = head_name.rpartition(".")
    setattr(encoder.get_submodule(parent), child, nn.Identity())
    return encoder, int(head.in_features)


def encoder_keys(model: nn.Module, params: Mapping[str, torch.Tensor]) -> list[str]:
    """Keys of ``params`` that belong to the encoder (all but the last linear layer's)."""
    prefix = last_linear_name(model) + "."
    return [k for k in params if not k.startswith(prefix)]


class ConcatModel(nn.Module):
    """FedConcat's global model (Stage 3): ``head(concat(E_1(x), ..., E_K(x)))``, ``head`` a
    ``Linear(K * feature_dim, num_classes)``; the K frozen encoders (copies of ``encoder``) always run in eval mode.
    """

    def __init__(self, encoder: nn.Module, num_encoders: int, feature_dim: int, num_classes: int):
        super().__init__()
        num_encoders = check_int("num_encoders", num_encoders, low=1)
        feature_dim = check_int("feature_dim", feature_dim, low=1)
        num_classes = check_int("num_classes", num_classes, low=1)
        self.encoders = nn.ModuleList(copy.deepcopy(encoder) for _ in range(num_encoders))
        for p in self.encoders.parameters():
            p.requires_grad_(False)
        self.feature_dim = feature_dim
        self.num_classes = num_classes
        self.head = nn.Linear(num_encoders * feature_dim, num_classes)
        self.encoders.eval()

    def train(self, mode: bool = True) -> "ConcatModel":
        """Set ``head`` to ``mode``; the frozen encoders stay in eval mode."""
        super().train(mode)
        self.encoders.eval()
        return self

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, K * feature_dim)`` concatenated encoder features."""
        return torch.cat([enc(x) for enc in self.encoders], dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, num_classes)``."""
        return self.head(self.features(x))


def concat_params(
    model: nn.Module, cluster_params: Sequence[Mapping[str, torch.Tensor]], head: Mapping[str, torch.Tensor]
) -> Params:
    """Parameter dict of :class:`ConcatModel` from the K cluster models' states and a head state."""
    keys = encoder_keys(model, cluster_params[0])
    out: Params = {}
    for j, params in enumerate(cluster_params):
        out.update({f"encoders.{j}.{k}": params[k].detach().clone() for k in keys})
    out.update({f"head.{k}": v.detach().clone() for k, v in head.items()})
    return out


def _init_head(in_features: int, num_classes: int, generator: torch.Generator, like: torch.Tensor) -> Params:
    """PyTorch's default ``nn.Linear`` initialisation, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), from ``generator``."""
    bound = 1.0 / math.sqrt(in_features)
    w = torch.rand((num_classes, in_features), generator=generator, dtype=torch.float64) * 2 * bound - bound
    b = torch.rand((num_classes,), generator=generator, dtype=torch.float64) * 2 * bound - bound
    return {"weight": w.to(dtype=like.dtype, device=like.device), "bias": b.to(dtype=like.dtype, device=like.device)}


# --------------------------------------------------------------------------- round split


def fedconcat_round_split(
    total_rounds: int,
    *,
    num_clusters: int,
    model_params: int,
    classifier_params: int,
    participation: float = 1.0,
    classifier_rounds: int = DEFAULT_CLASSIFIER_ROUNDS,
) -> tuple[int, int]:
    """``(T_e, T_c)``: encoder rounds that give FedConcat the communication budget of T FedAvg rounds.

    FedConcat's cost model ("Communication"): FedAvg costs :math:`2wNT`, FedConcat :math:`2wN(T_e + K/2 + cKT_c)`.
    With M of N clients per round the per-round terms scale with M, the one-time encoder broadcast with N:

    .. math:: T_e = \\Big\\lfloor T - \\frac{K}{2}\\,\\frac{N}{M} - \\frac{s}{w}\\,T_c \\Big\\rfloor ,

    :math:`w` = ``model_params``, :math:`s` = ``classifier_params`` (:math:`KdC + C`), :math:`N/M` =
    1 / ``participation``. A budget that leaves no encoder round is a ``ValueError``.

    >>> fedconcat_round_split(500, num_clusters=5, model_params=62_006, classifier_params=4_210, participation=0.1)
    (461, 200)
    """
    total_rounds = check_int("total_rounds", total_rounds, low=1)
    num_clusters = check_int("num_clusters", num_clusters, low=1)
    model_params = check_int("model_params", model_params, low=1)
    classifier_params = check_int("classifier_params", classifier_params, low=1)
    participation = check_float("participation", participation, low=0.0, high=1.0, low_open=True)
    classifier_rounds = check_int("classifier_rounds", classifier_rounds, low=0)
    exact = total_rounds - num_clusters / (2.0 * participation) - classifier_params / model_params * classifier_rounds
    encoder_rounds = math.floor(exact + 1e-9)
    if encoder_rounds < 1:
        least = math.ceil(total_rounds - exact + 1.0 - 1e-9)
        raise ParameterError(
            None,
            "total_rounds",
            total_rounds,
            f"an integer >= {least}, which leaves an encoder round after the classifier phase "
            f"(classifier_rounds={classifier_rounds}) and the encoder broadcast",
            got=f"{total_rounds} (leaves {exact:.2f} encoder rounds)",
            hint="Or lower classifier_rounds, or give encoder_rounds explicitly.",
        )
    return encoder_rounds, classifier_rounds


# --------------------------------------------------------------------------- rounds


def aggregate_clusters(cluster_params: Sequence[Params], assignment, results: Sequence[LocalResult]) -> list[Params]:
    """Stage 2 for one round: FedAvg inside every cluster over its members in ``results`` (with data); a cluster
    without one keeps its model. ``assignment`` is the ``(N,)`` cluster of every client."""
    assignment = np.asarray(assignment, dtype=np.int64)
    out = list(cluster_params)
    for j in range(len(cluster_params)):
        members = [r for r in results if assignment[r.client_id] == j and r.num_samples > 0]
        if not members:
            continue
        sizes = np.array([r.num_samples for r in members], dtype=np.float64)
        out[j] = weighted_average([r.params for r in members], sizes / sizes.sum())
    return out


@dataclass
class FedConcatState:
    """Where a FedConcat run stands (:meth:`FedConcat.plan`, advanced by the round hooks): the cluster of every
    client, T_e and T_c, rounds done, the K cluster models, the :class:`ConcatModel` and its ``params`` (None until
    the classifier phase) and one ``history`` record per round.
    """

    assignment: np.ndarray
    encoder_rounds: int
    classifier_rounds: int
    cluster_params: list
    round: int = 0
    model: ConcatModel | None = None
    params: Params | None = None
    history: list = field(default_factory=list)

    @property
    def total_rounds(self) -> int:
        """T_e + T_c."""
        return self.encoder_rounds + self.classifier_rounds

    @property
    def done(self) -> bool:
        """True once all T_e + T_c rounds ran."""
        return self.round >= self.total_rounds

    def next_phase(self) -> tuple[str, int]:
        """The next round's phase ("encoder" or "classifier") and round within it (the lr schedule restarts)."""
        if self.round < self.encoder_rounds:
            return "encoder", self.round
        return "classifier", self.round - self.encoder_rounds


class FedConcat(Algorithm):
    """FedConcat (Diao, Li & He, "Exploiting Label Skews in Federated Learning with Model Concatenation", AAAI 2024).

    Algorithm 1: (1) K-means on the clients' label distributions (:func:`cluster_clients`); (2) ``encoder_rounds``
    rounds in which every cluster trains its own full model by FedAvg among its picked members (a cluster without
    one skips the round); (3) ``classifier_rounds`` rounds in which a fresh linear head over the K frozen,
    concatenated encoders (:class:`ConcatModel`) is trained by FedAvg over all picked clients.

    In the trainer ``config.rounds`` is the FedAvg budget T; ``encoder_rounds=None`` derives T_e from it
    (:func:`fedconcat_round_split`, FedEntOpt §V-A5). Clusters come from stream ``clustering``, the head from
    ``head_init``. The lr decay restarts at the first classifier round; encoder rounds have no global model, so
    their test columns are NaN. Bytes: 4·p per trained client in encoder rounds, 4·s in classifier rounds, plus
    the label upload at round 0.

    ``classifier_local_batches``: None trains ``hp.epochs`` epochs and averages the heads with FedAvg weights (the
    paper); an int ``b`` takes ``b`` mini-batches and averages uniformly (the released code, ``b = 3``).
    """

    name = "fedconcat"
    #: Every client uploads its label distribution once (Stage 1-A).
    uploads_label_counts = True

    @dataclass(frozen=True)
    class HParams(HParams):
        num_clusters: int = DEFAULT_NUM_CLUSTERS
        encoder_rounds: int | None = None
        classifier_rounds: int = DEFAULT_CLASSIFIER_ROUNDS
        classifier_local_batches: int | None = None
        kmeans_restarts: int = 10

        def __post_init__(self):
            for name, low, optional in (
                ("num_clusters", 1, False),
                ("encoder_rounds", 0, True),
                ("classifier_rounds", 0, False),
                ("classifier_local_batches", 1, True),
                ("kmeans_restarts", 1, False),
            ):
                value = getattr(self, name)
                value = check_optional(check_int, name, value, low=low) if optional else check_int(name, value, low=low)
                object.__setattr__(self, name, value)

    # ---------------------------------------------------------------- planning

    def round_split(
        self, total_rounds: int, model: nn.Module, *, num_clients: int, clients_per_round: int
    ) -> tuple[int, int]:
        """``(encoder_rounds, classifier_rounds)`` for a FedAvg budget of ``total_rounds`` with M of N clients."""
        if self.hparams.encoder_rounds is not None:
            return self.hparams.encoder_rounds, self.hparams.classifier_rounds
        num_clients = check_int("num_clients", num_clients, low=1)
        clients_per_round = check_int("clients_per_round", clients_per_round, low=1, high=num_clients)
        head = model.get_submodule(last_linear_name(model))
        k = min(self.hparams.num_clusters, num_clients)
        w = sum(p.numel() for p in model.parameters())
        s = k * head.in_features * head.out_features + head.out_features
        return fedconcat_round_split(
            total_rounds,
            num_clusters=k,
            model_params=int(w),
            classifier_params=int(s),
            participation=clients_per_round / num_clients,
            classifier_rounds=self.hparams.classifier_rounds,
        )

    def build_concat_model(
        self, model: nn.Module, cluster_params: Sequence[Params], generator: torch.Generator
    ) -> tuple[ConcatModel, Params]:
        """Stage 3 set-up: the :class:`ConcatModel` and its parameters (frozen encoders, fresh head from
        ``generator``)."""
        encoder, feature_dim = make_encoder(model)
        num_classes = int(model.get_submodule(last_linear_name(model)).out_features)
        concat = ConcatModel(encoder, len(cluster_params), feature_dim, num_classes)
        like = next(iter(cluster_params[0].values()))
        head = _init_head(len(cluster_params) * feature_dim, num_classes, generator, like)
        return concat, concat_params(model, cluster_params, head)

    def plan(
        self,
        model: nn.Module,
        init_params: Mapping[str, torch.Tensor],
        *,
        label_counts,
        total_rounds: int,
        clients_per_round: int,
        rng: np.random.Generator,
    ) -> FedConcatState:
        """Stage 1 and set-up: round split, clustering, K cluster models all equal to ``init_params``."""
        check_rng("rng", rng)
        counts = check_count_matrix("label_counts", label_counts, allow_negative=True)
        t_e, t_c = self.round_split(
            total_rounds, model, num_clients=counts.shape[0], clients_per_round=clients_per_round
        )
        hp = self.hparams  # Stage 1-A (K capped at N)
        assignment = cluster_clients(counts, min(hp.num_clusters, counts.shape[0]), rng, n_init=hp.kmeans_restarts)
        params0 = {k: v.detach().clone() for k, v in init_params.items()}
        cluster_params = [dict(params0) for _ in range(int(assignment.max()) + 1)]
        return FedConcatState(assignment, t_e, t_c, cluster_params)

    # ---------------------------------------------------------------- round hooks (fedlib.algorithms.base)

    def num_rounds(self, rounds: int, model, *, num_clients: int, clients_per_round: int) -> int:
        """T_e + T_c for the FedAvg budget ``rounds`` (:meth:`round_split`)."""
        try:
            t_e, t_c = self.round_split(rounds, model, num_clients=num_clients, clients_per_round=clients_per_round)
        except ParameterError as exc:  # the FedAvg budget ``rounds`` is round_split's total_rounds
            if exc.part is None and exc.name == "total_rounds":
                exc.amend(name="rounds")
            raise
        return int(t_e + t_c)

    def init_run_state(self, global_params, *, model, label_counts, config) -> FedConcatState:
        """:meth:`plan` on the label counts the server sees (stream ``clustering``)."""
        return self.plan(
            model,
            global_params,
            label_counts=label_counts,
            total_rounds=config.rounds,
            clients_per_round=config.clients_per_round,
            rng=stream_rng(config.seed, "clustering"),
        )

    def run_state_to_checkpoint(self, fc: FedConcatState) -> dict:
        """``fc`` as tensors and plain containers (``torch.load(weights_only=True)`` reads it back; the
        ``ConcatModel`` itself is rebuilt from the architecture)."""
        return {
            "kind": "fedconcat",
            "assignment": torch.as_tensor(np.asarray(fc.assignment, dtype=np.int64)),
            "encoder_rounds": int(fc.encoder_rounds),
            "classifier_rounds": int(fc.classifier_rounds),
            "cluster_params": [dict(p) for p in fc.cluster_params],
            "round": int(fc.round),
            "params": None if fc.params is None else dict(fc.params),
            "history": [dict(h) for h in fc.history],
        }

    def run_state_from_checkpoint(self, d: dict, *, model, device) -> FedConcatState:
        """Inverse of :meth:`run_state_to_checkpoint`, on ``device``."""
        to = lambda p: {k: v.to(device) for k, v in p.items()}  # noqa: E731
        fc = FedConcatState(
            assignment=d["assignment"].cpu().numpy().astype(np.int64),
            encoder_rounds=int(d["encoder_rounds"]),
            classifier_rounds=int(d["classifier_rounds"]),
            cluster_params=[to(p) for p in d["cluster_params"]],
            round=int(d["round"]),
            history=[dict(h) for h in d["history"]],
        )
        if d["params"] is not None:
            # rebuild the architecture only; its head initialisation (from a throw-away generator) is discarded
            fc.model, _ = self.build_concat_model(model, fc.cluster_params, torch.Generator())
            fc.model.to(device)
            fc.params = to(d["params"])
        return fc

    def plan_round(self, rnd: int, fc: FedConcatState, *, config, model) -> tuple[RoundPlan, FedConcatState]:
        """The next round's phase and ``lr · lr_decay^(phase_round)``; a classifier round trains the head of the
        concatenated model (built at the first one, head from stream ``head_init``) and is tested with it."""
        if fc.done:
            raise ValueError(f"the run has had all its {fc.total_rounds} rounds; nothing left to plan.")
        phase, phase_round = fc.next_phase()
        lr = decayed_lr(config, phase_round)
        if phase == "encoder":
            return RoundPlan(rnd, "encoder", lr, evaluate=False), fc
        if fc.model is None:  # Stage 3 set-up: the concatenated model with a fresh head
            head_gen = make_generator(int(stream_rng(config.seed, "head_init").integers(2**62)), "cpu")
            fc.model, fc.params = self.build_concat_model(model, fc.cluster_params, head_gen)
        fc.model.to(next(iter(fc.params.values())).device)
        batches = self.hparams.classifier_local_batches
        return RoundPlan(rnd, "classifier", lr, model=fc.model, local=_head_algorithm(), max_batches=batches), fc

    def start_params(self, client: int, global_params, fc: FedConcatState):
        """Encoder rounds: the client's cluster model; classifier rounds: the concatenated model."""
        if fc.round < fc.encoder_rounds:
            return fc.cluster_params[fc.assignment[client]]
        return fc.params

    def aggregate_round(self, plan, results, weights, global_params, server_state, fc: FedConcatState):
        """Stage 2 (FedAvg in every cluster, :func:`aggregate_clusters`) or Stage 3 (the heads, FedAvg weights or
        uniform with ``classifier_local_batches``); the global model is the concatenated one once it exists."""
        (phase, phase_round), ids = fc.next_phase(), [int(r.client_id) for r in results]
        if plan.phase == "encoder":
            fc.cluster_params = aggregate_clusters(fc.cluster_params, fc.assignment, results)
        elif results:
            if self.hparams.classifier_local_batches is not None:
                weights = np.full(len(results), 1.0 / len(results))
            heads = weighted_average([{k: r.params[k] for k in HEAD_KEYS} for r in results], weights)
            fc.params = {**fc.params, **heads}
        record = {"round_index": fc.round, "phase": phase, "phase_round": phase_round, "picked": ids}
        if plan.phase == "encoder":
            record["clusters_trained"] = sorted({int(fc.assignment[k]) for k in ids})
        fc.round += 1
        fc.history.append(record)
        return (global_params if fc.params is None else fc.params), server_state, fc


def _head_algorithm() -> Algorithm:
    """FedAvg's client hooks training only the head of a :class:`ConcatModel`."""
    return Algorithm().bind(HEAD_KEYS)
