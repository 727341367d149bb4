"""Defences of FedEntOpt against clients that lie about their label counts (not in the paper; §VI of v2 asks for
them): :func:`cap_totals` and the share cap (:func:`share_allowance`, :func:`over_allowance`), both options of
:class:`~fedlib.selection.selectors.FedEntOptSelector`, off by default, using only what the server sees.
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
    """``counts`` (K, C) with every row whose positive total exceeds ``factor * quantile(totals)`` scaled down to
    that total (its label shares kept). ``quantile`` in (0, 1], ``factor`` > 0; negative entries (DP noise) do not
    count towards a total and are scaled with their row; a sparse matrix comes back as a ``csr_array``.

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


def share_allowance(share_cap: float, clients_per_round: int, num_clients: int, round_index: int) -> int:
    """How many of the first ``round_index`` rounds (1-based) a client may be in: ``ceil(f * M / K * t)``.

    >>> [share_allowance(1.5, 10, 100, t) for t in (1, 6, 7, 20)]
    [1, 1, 2, 3]
    """
    share_cap = check_float("share_cap", share_cap, low=1.0)
    clients_per_round = check_int("clients_per_round", clients_per_round, low=1)
    num_clients = check_int("num_clients", num_clients, low=clients_per_round)
    round_index = check_int("round_index", round_index, low=1)
    return int(math.ceil(share_cap * clients_per_round / num_clients * round_index - _CEIL_SLACK))


def over_allowance(picks, share_cap: float, clients_per_round: int, round_index: int) -> np.ndarray:
    """Mask of the clients whose ``picks`` (before round ``round_index``) reach that round's allowance: the
    share cap leaves them out of a step's candidates unless every selectable client is among them.

    >>> over_allowance([0, 1, 2, 1], 1.0, 1, 4).tolist()  # allowance ceil(1/4 * 4) = 1
    [False, True, True, True]
    """
    picks = np.asarray(picks, dtype=np.int64)
    return picks >= share_allowance(share_cap, clients_per_round, picks.size, round_index)
