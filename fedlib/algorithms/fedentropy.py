"""FedEntropy (Ling et al., arXiv:2205.12038): maximum-entropy judgement on soft labels and ε-greedy positive/negative
device pools."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from fedlib._validate import ParameterError, check_bool, check_float, check_int, check_rng
from fedlib.algorithms.base import Algorithm, HParams
from fedlib.selection.metrics import entropy_bits

__all__ = [
    "DEFAULT_EPSILON",
    "FedEntropy",
    "aggregate_soft_label",
    "soft_label_entropy",
    "model_soft_label",
    "max_entropy_judgement",
    "epsilon_greedy_sample",
    "update_pools",
]

#: ε: probability of drawing from the positive pool (FedEntropy §3.4 and §4.1, "we set the threshold ε to 0.8").
DEFAULT_EPSILON = 0.8

#: Entropy gain (bits) a removal must exceed: guards the strict ``>`` of Algorithm 1 (line 9) against rounding.
DEFAULT_TOL = 1e-12


def _check_soft_labels(soft_labels) -> np.ndarray:
    arr = np.asarray(soft_labels.detach().cpu() if isinstance(soft_labels, torch.Tensor) else soft_labels)
    allowed = "a 2-D array (num_clients, num_classes) of finite, non-negative numbers"
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ParameterError(None, "soft_labels", soft_labels, allowed, got=f"shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.number):
        raise ParameterError(None, "soft_labels", soft_labels, allowed, got=f"dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    bad = ~(np.isfinite(arr) & (arr >= 0))
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise ParameterError(None, "soft_labels", soft_labels, allowed, got=f"{arr[i, j]} for client {i}, class {j}")
    return arr


def _check_weights(weights, n: int) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    allowed = f"one finite dataset size l_k > 0 per client ({n})"
    if w.shape[0] != n:
        raise ParameterError(None, "weights", weights, allowed, got=f"{w.shape[0]} entries")
    if not np.all(np.isfinite(w)) or np.any(w <= 0):
        k = int(np.flatnonzero(~(np.isfinite(w) & (w > 0)))[0])
        raise ParameterError(None, "weights", weights, allowed, got=f"{w[k]} for client {k}")
    return w


@torch.no_grad()
def model_soft_label(
    model: torch.nn.Module, params: Mapping[str, torch.Tensor], x: torch.Tensor, *, batch_size: int = 512
) -> np.ndarray:
    """Mean soft label of a client, FedEntropy Eq. (2): :math:`p_k = \\frac{1}{l_k} \\sum_i \\phi_k(x_k^i)`, the
    softmax of the **trained** model ``params`` in eval mode over the client's un-augmented inputs ``x``, as
    ``(C,)`` float64 (``batch_size`` only chunks the evaluation)."""
    from torch.func import functional_call

    batch_size = check_int("batch_size", batch_size, low=1)
    if x.shape[0] < 1:
        allowed = "at least one sample (a client without data has no soft label)"
        raise ParameterError(None, "x", x, allowed, got=f"shape {tuple(x.shape)}")
    was_training = model.training
    model.eval()
    try:
        total = None
        for chunk in x.split(batch_size):
            probs = torch.softmax(functional_call(model, dict(params), (chunk,)).to(torch.float64), dim=1).sum(0)
            total = probs if total is None else total + probs
    finally:
        model.train(was_training)
    return (total / x.shape[0]).cpu().numpy()


def aggregate_soft_label(soft_labels, weights) -> np.ndarray:
    """Size-weighted aggregate soft label, Eq. (4): :math:`\\bar p = \\sum_i l_i p_i / \\sum_i l_i` for ``(n, C)``
    soft labels and ``(n,)`` positive dataset sizes.

    >>> aggregate_soft_label([[1.0, 0.0], [0.0, 1.0]], [3, 1]).tolist()
    [0.75, 0.25]
    """
    p = _check_soft_labels(soft_labels)
    w = _check_weights(weights, p.shape[0])
    return (w[:, None] * p).sum(0) / w.sum()


def soft_label_entropy(soft_labels, weights) -> float:
    """``getEntropy`` of FedEntropy, Eqs. (3)-(4): entropy in bits of the aggregate soft label.

    >>> soft_label_entropy([[1.0, 0.0], [0.0, 1.0]], [1, 1])
    1.0
    """
    return float(entropy_bits(aggregate_soft_label(soft_labels, weights)))


def _entropy_of(p: np.ndarray, w: np.ndarray, members: list[int]) -> float:
    agg = (w[members, None] * p[members]).sum(0) / w[members].sum()
    return float(entropy_bits(agg))


def max_entropy_judgement(soft_labels, weights, *, tol: float = DEFAULT_TOL) -> np.ndarray:
    """Maximum entropy judgement, Algorithm 1 of FedEntropy: ``(n,)`` mask of the kept clients :math:`\\mathcal{A}`.

    Each pass drops the one client whose removal raises :func:`soft_label_entropy` of the kept set the most (by more
    than ``tol`` bits; ties: the first in input order, as the official code) and repeats; it stops when no removal
    helps. The last client is never dropped.

    >>> max_entropy_judgement([[0.5, 0.5], [0.5, 0.5], [1.0, 0.0]], [1, 1, 1]).tolist()
    [True, True, False]
    """
    p = _check_soft_labels(soft_labels)
    w = _check_weights(weights, p.shape[0])
    tol = check_float("tol", tol, low=0.0)
    kept = list(range(p.shape[0]))
    while len(kept) > 1:
        best = _entropy_of(p, w, kept)
        index = None
        for k in kept:
            h = _entropy_of(p, w, [j for j in kept if j != k])
            if h > best + (tol if index is None else 0.0):
                best, index = h, k
        if index is None:
            break
        kept.remove(index)
    mask = np.zeros(p.shape[0], dtype=bool)
    mask[kept] = True
    return mask


def epsilon_greedy_sample(
    positive, clients_per_round: int, rng: np.random.Generator, *, epsilon: float = DEFAULT_EPSILON
) -> np.ndarray:
    """The round's ``clients_per_round`` clients, ε-greedy (FedEntropy §3.4, Algorithm 2 lines 4-8).

    One ``rng.random() < epsilon`` picks the positive pool (``positive`` True), else the negative one; clients are
    drawn from it uniformly without replacement, and a short pool is taken whole and filled up from the other
    ("randomly select the remaining devices from the other pool"). Returns int64 indices, primary draw first.

    >>> import numpy as np
    >>> sorted(epsilon_greedy_sample([True] * 4, 4, np.random.default_rng(0)).tolist())
    [0, 1, 2, 3]
    """
    pos = np.asarray(positive, dtype=bool).reshape(-1)
    n = pos.shape[0]
    clients_per_round = check_int("clients_per_round", clients_per_round, low=1, high=n)
    check_rng("rng", rng)
    epsilon = check_float("epsilon", epsilon, low=0.0, high=1.0)
    use_positive = rng.random() < epsilon
    primary = np.flatnonzero(pos if use_positive else ~pos)
    other = np.flatnonzero(~pos if use_positive else pos)
    take = min(clients_per_round, primary.size)
    first = rng.choice(primary, size=take, replace=False) if take else np.zeros(0, dtype=np.int64)
    rest = clients_per_round - take
    second = rng.choice(other, size=rest, replace=False) if rest else np.zeros(0, dtype=np.int64)
    return np.concatenate([first, second]).astype(np.int64)


def update_pools(positive, selected, kept_mask) -> np.ndarray:
    """Pool update of Algorithm 2 (lines 5/7 and 22): every ``selected`` client moves to the pool of its verdict
    (``kept_mask`` True: positive), the others stay; a new ``(N,)`` bool array.

    >>> update_pools([True, True, False], [0, 2], [False, True]).tolist()
    [False, True, True]
    """
    pos = np.array(positive, dtype=bool).reshape(-1)
    sel = np.asarray(selected, dtype=np.int64).reshape(-1)
    kept = np.asarray(kept_mask, dtype=bool).reshape(-1)
    _check_kept_mask(sel, kept, kept_mask)
    if sel.size and (sel.min() < 0 or sel.max() >= pos.size):
        allowed = f"client indices in [0, {pos.size - 1}]"
        raise ParameterError(None, "selected", selected, allowed, got=f"indices from {sel.min()} to {sel.max()}")
    pos[sel] = kept
    return pos


def _check_kept_mask(sel: np.ndarray, kept: np.ndarray, kept_mask) -> None:
    if sel.shape != kept.shape:
        allowed = f"one entry per selected client ({sel.size})"
        raise ParameterError(None, "kept_mask", kept_mask, allowed, got=f"{kept.size} entries")


class FedEntropy(Algorithm):
    """FedEntropy (Ling, Yue, Xia, Hu, Wang & Chen, arXiv:2205.12038, Algorithm 2) on top of FedAvg.

    A round: :meth:`sample` draws the clients ε-greedily from the pools (``server_state["positive"]``, all positive
    at first); all of them train with the FedAvg hooks and report their soft label (:meth:`client_report`);
    :meth:`judge` runs the maximum entropy judgement and moves each client to the pool of its verdict; only the
    kept clients upload and are FedAvg-averaged (weights renormalised over them). With a selector other than
    ``"random"`` that selector picks and FedEntropy only judges. Bytes: 4·C per reporting client, 4·p per kept one.

    ``use_pools=False`` is the ablation without device pools (§4.3, Fig. 3b); ``tol``: see
    :func:`max_entropy_judgement`.
    """

    name = "fedentropy"
    has_client_report = True

    @dataclass(frozen=True)
    class HParams(HParams):
        epsilon: float = DEFAULT_EPSILON
        use_pools: bool = True
        tol: float = DEFAULT_TOL

        def __post_init__(self):
            object.__setattr__(self, "epsilon", check_float("epsilon", self.epsilon, low=0.0, high=1.0))
            check_bool("use_pools", self.use_pools)
            object.__setattr__(self, "tol", check_float("tol", self.tol, low=0.0))

    def init_server_state(self, global_params, *, num_clients: int) -> dict[str, torch.Tensor]:
        """``{"positive": ones(N, bool)}``: Algorithm 2 line 2, :math:`S_p = \\{1..N\\}`, :math:`S_n = \\emptyset`."""
        num_clients = check_int("num_clients", num_clients, low=1)
        return {"positive": torch.ones(num_clients, dtype=torch.bool)}

    def sample(
        self, server_state: Mapping[str, torch.Tensor], clients_per_round: int, rng: np.random.Generator
    ) -> np.ndarray:
        """The round's clients :math:`S_t` (:func:`epsilon_greedy_sample` on ``server_state["positive"]``)."""
        positive = server_state["positive"].cpu().numpy()
        return epsilon_greedy_sample(positive, clients_per_round, rng, epsilon=self.hparams.epsilon)

    def judge(self, selected, soft_labels, sizes, server_state: Mapping[str, torch.Tensor]):
        """The ``(n,)`` kept mask of the round's clients ``selected`` (soft labels and sizes in their order) and the
        new server state with the pools updated."""
        kept = max_entropy_judgement(soft_labels, sizes, tol=self.hparams.tol)
        state = dict(server_state)
        if self.hparams.use_pools:
            positive = update_pools(server_state["positive"].cpu().numpy(), selected, kept)
            state["positive"] = torch.as_tensor(positive, dtype=torch.bool)
        return kept, state

    # ---------------------------------------------------------------- round hooks (fedlib.algorithms.base)

    def client_report(self, model, params, x, *, batch_size: int) -> np.ndarray:
        """The soft label of the client's trained model (Eq. 2, :func:`model_soft_label`)."""
        return model_soft_label(model, params, x, batch_size=batch_size)

    def keep(self, plan, clients, reports, sizes, server_state):
        """:meth:`judge` of the trained clients on their soft labels."""
        return self.judge(clients, np.stack(reports), sizes, server_state)
