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
from fedlib.training.local import (
    LocalResult,
    make_generator,
)

__all__ = [
    "DEFAULT_NUM_CLUSTERS",
    "DEFAULT_CLASSIFIER_ROUNDS",
    "RoundInfo",
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

    Negative entries (e.g. from DP noise on the uploaded counts) are clipped to 0 first; a client whose
    clipped counts are all zero gets the uniform distribution.

    Examples
    --------
    >>> label_distributions([[3, 1], [0, 2]]).tolist()
    [[0.75, 0.25], [0.0, 1.0]]
    """
    arr = np.maximum(check_count_matrix("label_counts", label_counts, allow_negative=True), 0.0)
    total = arr.sum(1, keepdims=True)
    uniform = np.full_like(arr, 1.0 / arr.shape[1])
    return np.divide(arr, total, out=uniform, where=total > 0)


def cluster_clients(label_counts, num_clusters: int, rng: np.random.Generator, *, n_init: int = 10) -> np.ndarray:
    """Stage 1-A of FedConcat: K-means on the label distributions (Eq. 2) of all clients.

    Parameters
    ----------
    label_counts : array_like
        ``(N, C)`` label counts the server received.
    num_clusters : int
        K, ``1 <= K <= N``.
    rng : np.random.Generator
        Seeds the k-means++ restarts (:func:`fedlib.algorithms.kmeans.kmeans`).
    n_init : int, default 10
        K-means restarts (the one with the lowest inertia is kept).

    Returns
    -------
    np.ndarray
        ``(N,)`` int64 cluster of every client, numbered by first appearance (client 0 is in cluster 0).
        A cluster can only be empty when fewer than K distinct distributions exist; then the labels use
        fewer than K values.

    Examples
    --------
    >>> import numpy as np
    >>> cluster_clients([[9, 1], [8, 2], [1, 9], [0, 10]], 2, np.random.default_rng(0)).tolist()
    [0, 0, 1, 1]
    """
    dist = label_distributions(label_counts)
    num_clusters = check_int("num_clusters", num_clusters, low=1, high=dist.shape[0])
    return kmeans(dist, num_clusters, rng, n_init=n_init).labels


# --------------------------------------------------------------------------- models


def last_linear_name(model: nn.Module) -> str:
    """Name of the last ``nn.Linear`` in ``model.named_modules()`` order: the classifier FedConcat splits off.

    Its input is the encoder's feature ("all layers but the last layer"); for LeNet-5 that is the 84-d output of
    the second hidden layer (after its ReLU), for VGG-11 the 512-d flattened conv feature.
    """
    names = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    if not names:
        allowed = "a model with an nn.Linear classifier layer"
        raise ParameterError(None, "model", model, allowed, got=f"a {type(model).__name__} without an nn.Linear layer")
    return names[-1]


def _set_submodule(model: nn.Module, name: str, module: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, module)


def make_encoder(model: nn.Module) -> tuple[nn.Module, int]:
    """Copy of ``model`` with its last linear layer replaced by ``nn.Identity`` and the feature size.

    The encoder's parameter names are the model's minus the classifier's (``<head>.weight``/``<head>.bias``),
    so a model state restricted to :func:`encoder_keys` drives it with ``functional_call``.

    Returns
    -------
    (nn.Module, int)
        The encoder and its output width (the head's ``in_features``; 84 for LeNet-5).
    """
    head_name = last_linear_name(model)
    head = model.get_submodule(head_name)
    encoder = copy.deepcopy(model)
    _set_submodule(encoder, head_name, nn.Identity())
    return encoder, int(head.in_features)


def encoder_keys(model: nn.Module, params: Mapping[str, torch.Tensor]) -> list[str]:
    """Keys of ``params`` that belong to the encoder (all but the last linear layer's)."""
    prefix = last_linear_name(model) + "."
    return [k for k in params if not k.startswith(prefix)]


class ConcatModel(nn.Module):
    """FedConcat's global model (Stage 3): ``head(concat(E_1(x), ..., E_K(x)))`` with frozen encoders.

    ``encoders.{j}.*`` are K copies of the encoder architecture (their tensors come from the cluster models);
    ``head`` is ``Linear(K * feature_dim, num_classes)``.  The encoders always run in eval mode (they are
    frozen: no batch-norm statistic updates, no dropout), whatever mode the module is put in.

    Parameters
    ----------
    encoder : nn.Module
        Encoder architecture from :func:`make_encoder` (copied K times).
    num_encoders : int
        K.
    feature_dim : int
        Output width of one encoder.
    num_classes : int
        Output logits.
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
    """Encoder rounds T_e that give FedConcat the communication budget of T FedAvg rounds.

    FedConcat's cost model ("Communication" section): with model size :math:`w`, FedAvg over T rounds costs
    :math:`2wNT`; FedConcat costs :math:`2wN(T_e + K/2 + cKT_c)` -- up- and download of one model per
    encoder round, a one-time download of the K encoders by every client, and up/download of the
    concatenated classifier (:math:`cKw` scalars) per classifier round.  With M of N clients per round the
    per-round terms scale with M and the one-time broadcast with N, so equal budgets give

    .. math:: T_e = \\Big\\lfloor T - \\frac{K}{2}\\,\\frac{N}{M} - \\frac{s}{w}\\,T_c \\Big\\rfloor ,

    where :math:`s` is the concatenated classifier's size (``classifier_params`` :math:`= KdC + C`, the
    paper's :math:`cKw`) and :math:`N/M` = 1 / ``participation``.  For full participation this is the paper's
    :math:`T = T_e + K/2 + cKT_c`.  Flooring keeps FedConcat within the budget.

    Worked values: LeNet-5 on CIFAR-10 has :math:`w` = 62,006 and :math:`s = 5 \\cdot 84 \\cdot 10 + 10` = 4,210
    for K = 5.  FedEntOpt's setting (T = 500, M/N = 10 %, :math:`T_c` = 200) gives
    :math:`T_e = \\lfloor 500 - 25 - 13.58 \\rfloor = 461`.  The FedConcat paper's own setting (T = 50, full
    participation) gives 33; the paper reports 31 for its simple CNN (its counting of :math:`c` is not given).

    Parameters
    ----------
    total_rounds : int
        T, the FedAvg round budget (FedEntOpt: 500 for CIFAR-style data).
    num_clusters : int
        K.
    model_params : int
        :math:`w`, scalars of one client model.
    classifier_params : int
        :math:`s`, scalars of the concatenated classifier.
    participation : float, default 1.0
        M / N in (0, 1].
    classifier_rounds : int, default 200
        :math:`T_c` (FedConcat's default).

    Returns
    -------
    (int, int)
        ``(encoder_rounds, classifier_rounds)``.

    Raises
    ------
    ValueError
        If the budget leaves fewer than one encoder round (the message gives the computed value).

    Examples
    --------
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


@dataclass(frozen=True)
class RoundInfo:
    """Where a FedConcat round sits.

    ``round_index`` counts all rounds from 0 (encoder rounds first, then classifier rounds); ``phase`` is
    ``"encoder"`` or ``"classifier"``; ``phase_round`` counts from 0 within the phase (the per-phase learning-rate
    schedule: the classifier is a fresh model).
    """

    round_index: int
    phase: str
    phase_round: int


def aggregate_clusters(cluster_params: Sequence[Params], assignment, results: Sequence[LocalResult]) -> list[Params]:
    """Stage 2 of FedConcat for one round: FedAvg inside every cluster over its clients that trained.

    Cluster :math:`j` becomes :math:`\\sum_{k \\in S_t \\cap S_j} n_k w_k / \\sum_{k \\in S_t \\cap S_j} n_k`; a
    cluster none of whose clients was picked (or only clients without data) keeps its model.

    Parameters
    ----------
    cluster_params : sequence of dict
        The K cluster models before the round.
    assignment : array_like of int
        ``(N,)`` cluster of every client.
    results : sequence of LocalResult
        The round's trained clients (``client_id`` and ``num_samples`` set).
    """
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
    """Where a FedConcat run stands (the result of :meth:`FedConcat.plan`, advanced by the round hooks).

    ``assignment``       (N,) cluster of every client.
    ``encoder_rounds``, ``classifier_rounds``  the round split T_e, T_c.
    ``round``            rounds done so far (0 … T_e + T_c).
    ``cluster_params``   the cluster models (full models: encoder + cluster head); final after T_e rounds.
    ``model``            the :class:`ConcatModel` (None until the classifier phase starts); ``params`` its state
                         (frozen encoders + the head being trained).
    ``history``          one dict per round: ``round_index``, ``phase``, ``phase_round``, ``picked`` and, in the
                         encoder phase, ``clusters_trained``.
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

    def next_round(self) -> RoundInfo:
        """The :class:`RoundInfo` of the next round."""
        if self.round < self.encoder_rounds:
            return RoundInfo(self.round, "encoder", self.round)
        return RoundInfo(self.round, "classifier", self.round - self.encoder_rounds)


class FedConcat(Algorithm):
    """FedConcat (Diao, Li & He, "Exploiting Label Skews in Federated Learning with Model Concatenation", AAAI 2024).

    Algorithm 1 of the paper, three stages:

    1. **Clustering** (Stage 1-A): K-means (:func:`cluster_clients`) on the clients' label distributions.
    2. **Averaging** (Stage 2), ``encoder_rounds`` rounds: every cluster trains its own full model (encoder
       and cluster classifier) with FedAvg among its members; all K start from the same initial model.
    3. **Post-training** (Stage 3), ``classifier_rounds`` rounds: the K encoders (all layers but the last
       linear one) are frozen and concatenated (:class:`ConcatModel`), and a fresh linear classifier over the
       ``K * d`` features is trained by FedAvg over all clients.

    **Partial participation** (how selection meets clusters): each round the trainer's selector picks M of the
    N clients from the whole population (FedConcat's code draws one random participation set per round and
    intersects it with each cluster); every picked client trains the model of **its own** cluster, each
    cluster is averaged over its picked members, and a cluster with no picked member skips the round.  One
    model upload per picked client keeps the per-round cost equal to FedAvg's.  In the classifier phase the
    picked clients all train the one global classifier.

    **Round split**: ``encoder_rounds=None`` derives T_e from the FedAvg budget ``total_rounds`` with
    :func:`fedconcat_round_split` (FedEntOpt §V-A5: "the same total communication budget as FedAvg"); the
    classifier gets ``classifier_rounds`` (default 200, the FedConcat paper's).

    **In fedlib's trainer** (the round hooks of ``fedlib.algorithms.base``): ``config.rounds`` is the
    FedAvg-equivalent budget T, and the run lasts T_e + T_c table rounds (:meth:`num_rounds`; as given when
    ``encoder_rounds`` is set).  Clusters come from K-means on the label counts the server sees (DP-noised with
    label DP; stream ``clustering``), the concatenated head from stream ``head_init`` (:mod:`fedlib.seeds`).  Every
    round the trainer's selector picks M clients (availability as for every algorithm); in the encoder phase each
    trained client trains its own cluster's full model, in the classifier phase the head of the concatenated model.
    Learning rate: ``lr · lr_decay^(phase_round)``: the decay restarts at the first classifier round (the classifier
    is a fresh model; continuing the decay past round 461 would leave lr ≈ 1e-6).  There is no single global model
    in the encoder phase, so the table's ``test_accuracy``/``test_loss`` are NaN there (which also keeps encoder
    rounds out of the last-rounds mean); the concatenated model is evaluated after classifier rounds (``eval_every``
    rule, last round always).  Bytes: 4·p per trained client in encoder rounds, 4·s per trained client in classifier
    rounds (s = K·d·C + C, the concatenated head), plus the one-time label upload 4·C·K at round 0; downloads
    (including the one-time broadcast of the K encoders) are not counted, as for every algorithm.  The run's global
    parameters are the concatenated model's (``encoders.<j>.*``, ``head.*``) once the classifier phase has started;
    the table's ``phase`` is ``"encoder"`` or ``"classifier"``.

    Parameters
    ----------
    num_clusters : int, default 5
        K (FedConcat's default, used by FedEntOpt).
    encoder_rounds : int or None, default None
        T_e; None = from the budget.
    classifier_rounds : int, default 200
        T_c.
    classifier_local_batches : int or None, default None
        None: in the classifier phase clients train ``hp.epochs`` epochs and the head is averaged with FedAvg
        weights (the paper's "jointly train a classifier using FedAvg").  An int ``b``: every client takes
        ``b`` mini-batches per round and the heads are averaged uniformly -- what FedConcat's released code
        does (``b = 3``).
    kmeans_restarts : int, default 10
        K-means restarts.
    """

    name = "fedconcat"
    #: Every client uploads its label distribution once (Stage 1-A).
    uploads_label_counts = True

    @dataclass(frozen=True)
    class HParams(HParams):
        """The parameters above (class docstring)."""

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
        self, total_rounds: int, model: nn.Module, *, num_clients: int, num_selected: int
    ) -> tuple[int, int]:
        """``(encoder_rounds, classifier_rounds)`` for a FedAvg budget of ``total_rounds`` with M of N clients."""
        if self.hparams.encoder_rounds is not None:
            return self.hparams.encoder_rounds, self.hparams.classifier_rounds
        num_clients = check_int("num_clients", num_clients, low=1)
        num_selected = check_int("num_selected", num_selected, low=1, high=num_clients)
        head = model.get_submodule(last_linear_name(model))
        k = min(self.hparams.num_clusters, num_clients)
        w = sum(p.numel() for p in model.parameters())
        s = k * head.in_features * head.out_features + head.out_features
        return fedconcat_round_split(
            total_rounds,
            num_clusters=k,
            model_params=int(w),
            classifier_params=int(s),
            participation=num_selected / num_clients,
            classifier_rounds=self.hparams.classifier_rounds,
        )

    def cluster(self, label_counts, rng: np.random.Generator) -> np.ndarray:
        """Stage 1-A: ``(N,)`` cluster of every client (K is capped at N)."""
        counts = check_count_matrix("label_counts", label_counts, allow_negative=True)
        hp = self.hparams
        return cluster_clients(counts, min(hp.num_clusters, counts.shape[0]), rng, n_init=hp.kmeans_restarts)

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
        num_selected: int,
        rng: np.random.Generator,
    ) -> FedConcatState:
        """Stage 1 and set-up: round split, clustering, K cluster models all equal to ``init_params``."""
        check_rng("rng", rng)
        counts = check_count_matrix("label_counts", label_counts, allow_negative=True)
        t_e, t_c = self.round_split(total_rounds, model, num_clients=counts.shape[0], num_selected=num_selected)
        assignment = self.cluster(counts, rng)
        params0 = {k: v.detach().clone() for k, v in init_params.items()}
        cluster_params = [dict(params0) for _ in range(int(assignment.max()) + 1)]
        return FedConcatState(assignment, t_e, t_c, cluster_params)

    # ---------------------------------------------------------------- round hooks (fedlib.algorithms.base)

    def num_rounds(self, rounds: int, model, *, num_clients: int, num_selected: int) -> int:
        """T_e + T_c for the FedAvg budget ``rounds`` (:meth:`round_split`)."""
        try:
            t_e, t_c = self.round_split(rounds, model, num_clients=num_clients, num_selected=num_selected)
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
            num_selected=config.clients_per_round,
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
        info = fc.next_round()
        lr = decayed_lr(config, info.phase_round)
        if info.phase == "encoder":
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
        info, ids = fc.next_round(), [int(r.client_id) for r in results]
        if plan.phase == "encoder":
            fc.cluster_params = aggregate_clusters(fc.cluster_params, fc.assignment, results)
        elif results:
            if self.hparams.classifier_local_batches is not None:
                weights = np.full(len(results), 1.0 / len(results))
            heads = weighted_average([{k: r.params[k] for k in HEAD_KEYS} for r in results], weights)
            fc.params = {**fc.params, **heads}
        record = {"round_index": info.round_index, "phase": info.phase, "phase_round": info.phase_round, "picked": ids}
        if plan.phase == "encoder":
            record["clusters_trained"] = sorted({int(fc.assignment[k]) for k in ids})
        fc.round += 1
        fc.history.append(record)
        return (global_params if fc.params is None else fc.params), server_state, fc


def _head_algorithm() -> Algorithm:
    """FedAvg's client hooks training only the head of a :class:`ConcatModel`."""
    return Algorithm().bind(HEAD_KEYS)
