"""FedEntropy (Ling et al., arXiv:2205.12038): maximum-entropy judgement on soft labels and ε-greedy positive/negative
device pools."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from fedlib._validate import ParameterError, check_bool, check_float, check_int, check_rng
from fedlib.algorithms.base import Algorithm, HParams
from fedlib.selection.metrics import entropy_bits, pooled_entropy

__all__ = [
    "DEFAULT_EPSILON",
    "FedEntropy",
    "aggregate_soft_label",
    "soft_label_entropy",
    "mean_soft_label",
    "model_soft_label",
    "max_entropy_judgement",
    "epsilon_greedy_sample",
    "update_pools",
    "reselection_entropy",
]

#: ε of the ε-greedy pool draw: probability of drawing from the positive pool (FedEntropy §3.4 and §4.1,
#: "we set the threshold ε to 0.8"; the official code draws from the negative pool when ``random() > 0.8``).
DEFAULT_EPSILON = 0.8

#: Tolerance (bits) by which removing a client must raise the entropy before it is dropped.  Guards the strict
#: ``>`` of Algorithm 1 (line 9) against rounding (e.g. two identical soft labels); 0 gives the bare inequality.
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


def mean_soft_label(logits) -> np.ndarray:
    """Average soft label of one client, Eq. (2) of FedEntropy: :math:`p_k = \\frac{1}{l_k} \\sum_i \\phi_k(x_k^i)`.

    :math:`\\phi_k(x)` is the softmax output of the client's **locally trained** model (FedEntropy §3.3: "the
    softmax layer output of the k-th local model"; Algorithm 2 line 11 returns :math:`p_k` from
    ``ClientUpdate`` after local training; the official code evaluates the trained model in ``eval()`` mode on
    the client's training data).  All samples count, correctly predicted or not.

    Parameters
    ----------
    logits : array_like or torch.Tensor
        ``(l_k, C)`` logits of the local model on all of the client's local samples.

    Returns
    -------
    np.ndarray
        ``(C,)`` float64 probability vector.

    Examples
    --------
    >>> mean_soft_label([[0.0, 0.0], [0.0, 0.0]]).tolist()
    [0.5, 0.5]
    """
    t = logits.detach() if isinstance(logits, torch.Tensor) else torch.as_tensor(np.asarray(logits))
    allowed = "a non-empty 2-D array (num_samples, num_classes) of finite numbers"
    if t.ndim != 2 or t.shape[0] < 1 or t.shape[1] < 1:
        raise ParameterError(None, "logits", logits, allowed, got=f"shape {tuple(t.shape)}")
    if not torch.is_floating_point(t):
        t = t.to(torch.float64)
    if not torch.all(torch.isfinite(t)):
        raise ParameterError(None, "logits", logits, allowed, got="NaN or inf entries")
    return torch.softmax(t.to(torch.float64), dim=1).mean(0).cpu().numpy()


@torch.no_grad()
def model_soft_label(
    model: torch.nn.Module, params: Mapping[str, torch.Tensor], x: torch.Tensor, *, batch_size: int = 512
) -> np.ndarray:
    """Eq. (2) for a model given as ``params``: softmax of ``functional_call(model, params, x)`` in eval mode, averaged.

    Parameters
    ----------
    model : torch.nn.Module
        Architecture (its own tensors are not used).
    params : mapping of str to Tensor
        The client's model state **after** local training (``LocalResult.params``).
    x : torch.Tensor
        The client's local training inputs in model-input form (normalised, not augmented), on the model's device.
    batch_size : int, default 512
        Evaluation chunk size (does not change the result beyond rounding).

    Returns
    -------
    np.ndarray
        ``(C,)`` float64 probability vector.
    """
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
    """Size-weighted aggregate soft label of Eq. (4): :math:`\\bar p = \\sum_i \\mathcal{L}[i]\\,\\mathcal{P}[i] /
    \\sum_i \\mathcal{L}[i]`.

    Parameters
    ----------
    soft_labels : array_like
        ``(n, C)`` per-client soft labels :math:`\\mathcal{P}`.
    weights : array_like
        ``(n,)`` positive dataset sizes :math:`\\mathcal{L}`.

    Examples
    --------
    >>> aggregate_soft_label([[1.0, 0.0], [0.0, 1.0]], [3, 1]).tolist()
    [0.75, 0.25]
    """
    p = _check_soft_labels(soft_labels)
    w = _check_weights(weights, p.shape[0])
    return (w[:, None] * p).sum(0) / w.sum()


def soft_label_entropy(soft_labels, weights) -> float:
    """``getEntropy`` of FedEntropy, Eqs. (3)-(4): :math:`-\\sum_c \\bar p[c] \\log_2 \\bar p[c]` of the aggregate soft
    label (bits).

    Examples
    --------
    >>> soft_label_entropy([[1.0, 0.0], [0.0, 1.0]], [1, 1])
    1.0
    """
    return float(entropy_bits(aggregate_soft_label(soft_labels, weights)))


def _entropy_of(p: np.ndarray, w: np.ndarray, members: list[int]) -> float:
    agg = (w[members, None] * p[members]).sum(0) / w[members].sum()
    return float(entropy_bits(agg))


def max_entropy_judgement(soft_labels, weights, *, tol: float = DEFAULT_TOL) -> np.ndarray:
    """Maximum entropy judgement, Algorithm 1 of FedEntropy: greedily drop clients whose removal raises the entropy.

    With :math:`\\mathcal{A}` the clients still kept (initially all), each pass computes
    :math:`H = \\mathrm{getEntropy}(\\mathcal{A})` (Eq. 4: entropy of the :math:`\\mathcal{L}`-weighted mean soft
    label over :math:`\\mathcal{A}`) and, for every :math:`k \\in \\mathcal{A}`,
    :math:`H_{-k} = \\mathrm{getEntropy}(\\mathcal{A} \\setminus \\{k\\})`.  If some :math:`H_{-k} > H`, the one
    client with the largest :math:`H_{-k}` moves from :math:`\\mathcal{A}` to the dropped set
    :math:`\\mathcal{R}` and the pass repeats; otherwise the search stops.  Exactly one client is dropped per pass.

    Rules (from Algorithm 1 and the official code): candidates are scanned in input order and the running
    maximum is replaced only on a strict ``>``, so among equal :math:`H_{-k}` the **first** client in input
    order is dropped; a removal must raise the entropy by more than ``tol`` bits.  The last remaining client is
    never dropped (the aggregate of an empty set is undefined), so at least one client is always kept.

    Parameters
    ----------
    soft_labels : array_like
        ``(n, C)`` mean soft labels :math:`p_k` of the selected clients (Eq. 2).
    weights : array_like
        ``(n,)`` positive local dataset sizes :math:`l_k`.
    tol : float, default 1e-12
        Minimum entropy gain (bits) for a removal; 0 gives Algorithm 1's bare strict inequality.

    Returns
    -------
    np.ndarray
        ``(n,)`` bool mask, True for the kept (positive) clients :math:`\\mathcal{A}`.

    Examples
    --------
    Two clients with a uniform soft label and one with a one-hot soft label: dropping the one-hot client lifts
    the aggregate ``[2/3, 1/3]`` (0.918 bits) to ``[1/2, 1/2]`` (1 bit).

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
    positive, num_selected: int, rng: np.random.Generator, *, epsilon: float = DEFAULT_EPSILON
) -> np.ndarray:
    """Draw one round's candidates from the positive or negative pool, ε-greedy (FedEntropy §3.4, Algorithm 2 lines
    4-8).

    With probability :math:`\\epsilon` the round draws from the positive pool :math:`S_p`, otherwise from the
    negative pool :math:`S_n`: ``u = rng.random()``; positive if ``u < epsilon``.  ``num_selected`` clients are
    drawn uniformly without replacement from that pool; "if the number of devices in one pool is insufficient,
    our approach will randomly select the remaining devices from the other pool" (§3.4), so a short pool is
    taken whole and the rest is drawn uniformly from the other pool.

    Parameters
    ----------
    positive : array_like of bool
        ``(N,)`` pool membership: True = positive pool, False = negative pool (each client is in exactly one).
    num_selected : int
        Clients per round, :math:`N \\times C`, ``1 <= num_selected <= N``.
    rng : np.random.Generator
        Source of all randomness (one ``random()`` for the branch, then one or two ``choice`` calls).
    epsilon : float, default 0.8
        Probability of drawing from the positive pool.

    Returns
    -------
    np.ndarray
        ``(num_selected,)`` int64 client indices: the primary pool's draw first, then the fill-up draw.

    Examples
    --------
    >>> import numpy as np
    >>> sorted(epsilon_greedy_sample([True] * 4, 4, np.random.default_rng(0)).tolist())
    [0, 1, 2, 3]
    """
    pos = np.asarray(positive, dtype=bool).reshape(-1)
    n = pos.shape[0]
    num_selected = check_int("num_selected", num_selected, low=1, high=n)
    check_rng("rng", rng)
    epsilon = check_float("epsilon", epsilon, low=0.0, high=1.0)
    use_positive = rng.random() < epsilon
    primary = np.flatnonzero(pos if use_positive else ~pos)
    other = np.flatnonzero(~pos if use_positive else pos)
    take = min(num_selected, primary.size)
    first = rng.choice(primary, size=take, replace=False) if take else np.zeros(0, dtype=np.int64)
    rest = num_selected - take
    second = rng.choice(other, size=rest, replace=False) if rest else np.zeros(0, dtype=np.int64)
    return np.concatenate([first, second]).astype(np.int64)


def update_pools(positive, selected, kept_mask) -> np.ndarray:
    """Pool update of Algorithm 2 (lines 5/7 and 22): :math:`S_p \\leftarrow (S_p \\setminus S_t) \\cup \\mathcal{A}`,
    :math:`S_n \\leftarrow (S_n \\setminus S_t) \\cup \\mathcal{R}`.

    Every selected client moves to the pool of this round's judgement; the others stay where they are.

    Parameters
    ----------
    positive : array_like of bool
        ``(N,)`` membership before the round (True = positive pool).
    selected : array_like of int
        ``(n,)`` the round's clients :math:`S_t`.
    kept_mask : array_like of bool
        ``(n,)`` judgement for ``selected`` (True = kept, :math:`\\mathcal{A}`).

    Returns
    -------
    np.ndarray
        ``(N,)`` bool membership after the round (a new array).

    Examples
    --------
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


def reselection_entropy(label_counts, selected, kept_mask) -> float:
    """Entropy (bits) of the TRUE pooled label distribution of the clients FedEntropy keeps (FedEntOpt v2, Fig. 1).

    :math:`H\\big(L / \\lVert L \\rVert_1\\big)` with :math:`L = \\sum_{k \\in \\mathcal{A}} l^{(k)}`, the summed
    true label-count vectors of the kept clients :math:`\\mathcal{A}` (not their soft labels).  This is the
    "re-selection" curve of Fig. 1, comparable with the entropy of FedEntOpt's and random selection's subsets.

    Parameters
    ----------
    label_counts : array_like
        ``(N, C)`` true per-client label counts.
    selected : array_like of int
        The round's clients :math:`S_t`.
    kept_mask : array_like of bool
        Judgement for ``selected``.

    Examples
    --------
    >>> reselection_entropy([[4, 0], [0, 4], [4, 0]], [0, 1, 2], [True, True, False])
    1.0
    """
    sel = np.asarray(selected, dtype=np.int64).reshape(-1)
    kept = np.asarray(kept_mask, dtype=bool).reshape(-1)
    _check_kept_mask(sel, kept, kept_mask)
    return pooled_entropy(label_counts, sel[kept])


class FedEntropy(Algorithm):
    """FedEntropy (Ling, Yue, Xia, Hu, Wang & Chen, arXiv:2205.12038, Algorithm 2) on top of FedAvg.

    Round ``t`` (Algorithm 2): (1) :meth:`sample` draws :math:`N \\times C` clients ε-greedily from the positive
    or negative pool; (2) **all** of them train locally from the global model (the FedAvg loss, i.e. the base
    class's client hooks) and report their mean soft label :math:`p_k` (Eq. 2, :func:`model_soft_label` on the
    trained model); (3) :meth:`judge` runs the maximum entropy judgement (Algorithm 1) and moves each client
    into the pool of its verdict; (4) only the kept clients upload, and the global model is their
    FedAvg average :math:`w_g = \\sum_{i \\in \\mathcal{A}} l_i w_i / \\sum_{i \\in \\mathcal{A}} l_i`
    (the inherited :meth:`aggregate`, given the kept clients' results and renormalised weights).

    The pools live in ``server_state["positive"]``, a ``(N,)`` bool tensor (True = positive pool); initially
    every client is positive (Algorithm 2 line 2).

    **In fedlib's trainer** (the round hooks of ``fedlib.algorithms.base``): with ``selector="random"`` the
    round's clients S_t come from FedEntropy's own pools (:meth:`sample` on the ``selection`` stream; this *is*
    the paper's device selection); with any other selector (e.g. ``"fedentopt"``) that selector picks S_t and
    FedEntropy only judges (the pools are still updated but not used).  All of S_t that do not drop out train as
    usual; every trained client with data reports the soft label of its trained model (:meth:`client_report`: eval
    mode, its un-augmented training inputs), :meth:`keep` judges them, and only the kept clients' models
    are FedAvg-averaged (weights n_k renormalised over the kept clients).  Bytes: every trained client uploads its
    soft label (C float32 = 4·C bytes), only the kept clients their models (§3.1 and "Communication Overhead"
    of the paper), so a round costs ``4·C·(#trained with data) + 4·p·(#kept)``.  The table's ``train_loss``
    averages over all trained clients (they all trained); ``kept`` is the judgement's positive set.

    Parameters
    ----------
    epsilon : float, default 0.8
        Probability of drawing the round's clients from the positive pool (§3.4, §4.1).
    use_pools : bool, default True
        False gives the ablation "FedEntropy without positive/negative device pools" (§4.3, Fig. 3b): every
        client stays in the positive pool, so the draw is uniform, but the judgement still filters uploads.
    tol : float, default 1e-12
        Entropy gain (bits) a removal must exceed in the judgement (see :func:`max_entropy_judgement`).
    """

    name = "fedentropy"
    has_client_report = True

    @dataclass(frozen=True)
    class HParams(HParams):
        """The parameters above (class docstring)."""

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
        self, server_state: Mapping[str, torch.Tensor], num_selected: int, rng: np.random.Generator
    ) -> np.ndarray:
        """The round's clients :math:`S_t` (:func:`epsilon_greedy_sample` on ``server_state["positive"]``)."""
        positive = server_state["positive"].cpu().numpy()
        return epsilon_greedy_sample(positive, num_selected, rng, epsilon=self.hparams.epsilon)

    def judge(self, selected, soft_labels, sizes, server_state: Mapping[str, torch.Tensor]):
        """Maximum entropy judgement of the round and the pool update.

        Parameters
        ----------
        selected : array_like of int
            :math:`S_t` in the order of ``soft_labels``.
        soft_labels : array_like
            ``(n, C)`` mean soft labels of the selected clients' trained models (Eq. 2).
        sizes : array_like
            ``(n,)`` their local dataset sizes :math:`l_k`.
        server_state : mapping
            Holds ``"positive"``.

        Returns
        -------
        (np.ndarray, dict)
            The ``(n,)`` kept mask (True = upload and aggregate) and the new server state.
        """
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
