"""Plausibility defences of FedEntOpt against clients that lie about their label counts.

FedEntOpt trusts the label counts the clients upload (§VI of the v2 paper: "adversarial clients could still
misguide the client selection ... dedicated defenses are needed").  Two server-side rules, both options of
:class:`fedlib.selection.selectors.FedEntOptSelector` and both off by default (then the selector is Algorithm 1
exactly):

``total_cap_quantile`` q, ``total_cap_factor`` f  (:func:`cap_totals`)
    Before scoring, every client whose reported total ``n_k`` exceeds ``cap = f * quantile_q(n_1..n_K)`` has its
    whole count vector scaled by ``cap / n_k`` (its label proportions are kept, its mass is not).  The quantile of
    the reported totals is robust: fewer than a share ``1 - q`` of liars cannot move it beyond the honest
    totals.  An inflated total then no longer dominates the pooled vector ``L`` of the round.  Totals are taken
    over the positive entries (DP noise kept as negative counts does not count), the quantile is numpy's default
    (linear interpolation).

``share_cap`` f  (:func:`share_allowance`, :func:`over_allowance`)
    No client is picked in more than ``ceil(f * M / K * t)`` of the first ``t`` rounds, ``M / K`` being the
    fair share: in round ``t`` the clients that already have that many picks are left out of the candidates
    (the random first pick included).  If at some step every unbuffered client is over its allowance, that step
    ignores the cap (the round still gets its M clients); :func:`over_allowance` is the mask, recomputed once per
    round.  ``f >= 1`` (a client may always get its fair share).  This needs per-client pick counts, so with
    ``share_cap`` the selector state is ``(buffer, rounds_done, picks)`` instead of the buffer alone.

Neither rule uses the clients' data; both see only what the server sees.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from fedlib._validate import check_float, check_int

__all__ = ["cap_totals", "share_allowance", "over_allowance"]

#: Slack below an integer when rounding ``f * M / K * t`` up, so that e.g. 0.1 * 30 = 3.0000000000000004 gives 3.
_CEIL_SLACK = 1e-9


def cap_totals(counts, quantile: float, factor: float = 1.0) -> np.ndarray:
    """Counts with every row's positive total capped at ``factor * quantile(totals)`` (rows scaled, see above).

    Parameters
    ----------
    counts : numpy.ndarray or scipy.sparse matrix, shape (K, C)
        The counts the server sees (negative entries allowed; they do not count towards a total and are
        scaled with their row). A sparse matrix is returned as a ``scipy.sparse.csr_array``.
    quantile : float
        q in (0, 1].
    factor : float
        f > 0.

    Examples
    --------
    >>> cap_totals(np.array([[2, 2], [1, 3], [10, 10], [0, 4]]), 0.5, 1.0).tolist()
    [[2.0, 2.0], [1.0, 3.0], [2.0, 2.0], [0.0, 4.0]]
    """
    quantile = check_float("total_cap_quantile", quantile, low=0.0, high=1.0, low_open=True)
    factor = check_float("total_cap_factor", factor, low=0.0, low_open=True)
    if sp.issparse(counts):  # a scipy.sparse matrix stays sparse (cross-device federations)
        csr = sp.csr_array(counts, dtype=float, copy=True)
        rows = np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))
        totals = np.bincount(rows, weights=np.maximum(csr.data, 0.0), minlength=csr.shape[0])
        cap = factor * float(np.quantile(totals, quantile))
        csr.data *= np.divide(cap, totals, out=np.ones_like(totals), where=totals > cap)[rows]
        return csr
    arr = np.asarray(counts, dtype=float)
    totals = np.maximum(arr, 0.0).sum(axis=1)
    cap = factor * float(np.quantile(totals, quantile))
    scale = np.divide(cap, totals, out=np.ones_like(totals), where=totals > cap)
    return arr * scale[:, None]


def share_allowance(share_cap: float, num_selected: int, num_clients: int, round_index: int) -> int:
    """How many of the first ``round_index`` rounds (1-based) a client may be in: ``ceil(f * M / K * t)``.

    Examples
    --------
    >>> [share_allowance(1.5, 10, 100, t) for t in (1, 6, 7, 20)]
    [1, 1, 2, 3]
    """
    share_cap = check_float("share_cap", share_cap, low=1.0)
    num_selected = check_int("num_selected", num_selected, low=1)
    num_clients = check_int("num_clients", num_clients, low=num_selected)
    round_index = check_int("round_index", round_index, low=1)
    return int(math.ceil(share_cap * num_selected / num_clients * round_index - _CEIL_SLACK))


def over_allowance(picks, share_cap: float, num_selected: int, round_index: int) -> np.ndarray:
    """Boolean mask of the clients whose ``picks`` (per client, before round ``round_index``) already reach their
    allowance for that round, i.e. the clients the share cap leaves out of it.

    Examples
    --------
    >>> over_allowance([0, 1, 2, 1], 1.0, 1, 4).tolist()  # allowance ceil(1/4 * 4) = 1
    [False, True, True, True]
    """
    picks = np.asarray(picks, dtype=np.int64)
    return picks >= share_allowance(share_cap, num_selected, picks.size, round_index)
