"""Label metrics of the FedEntOpt paper (v2): Shannon entropy (eq. 5), coverage and H_norm (§V-E)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from fedlib._validate import check_count_matrix, check_int

__all__ = [
    "entropy_bits",
    "pooled_entropy",
    "covers_all_classes",
    "selection_entropy_norm",
]


def entropy_bits(counts, axis: int = -1) -> np.ndarray | float:
    """Shannon entropy in bits of count vectors, each normalised to a distribution (eq. 5 of v2).

    ``H(p) = -sum_c p_c log2 p_c`` with ``p = counts / counts.sum()`` and ``0 log 0 = 0``.
    A vector whose entries are all zero has no distribution; its entropy is defined as 0 here
    (it holds no labels, so it contributes no diversity).

    Parameters
    ----------
    counts : array_like
        Non-negative, finite numbers; 1-D (one vector) or N-D (a batch of vectors along ``axis``).
    axis : int, default -1
        The class axis.

    Returns
    -------
    float or numpy.ndarray
        A float for 1-D input, otherwise an array with ``axis`` removed. Values lie in ``[0, log2 C]``.

    Raises
    ------
    ValueError
        If ``counts`` is empty along ``axis``, holds NaN/inf or negative entries.

    Examples
    --------
    >>> entropy_bits([5, 5, 5, 5])
    2.0
    >>> entropy_bits([[3, 0], [0, 0]]).tolist()
    [0.0, 0.0]
    """
    arr = _non_negative_array("counts", counts)
    if arr.ndim == 0 or arr.shape[axis] == 0:
        raise ValueError(f"counts must have at least one class along axis {axis} (got shape {arr.shape}).")
    total = arr.sum(axis=axis, keepdims=True)
    p = np.divide(arr, total, out=np.zeros_like(arr), where=total > 0)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    h = np.maximum(-(p * logs).sum(axis=axis), 0.0)  # clamp -0.0 / rounding below zero
    return float(h) if h.ndim == 0 else h


def _non_negative_array(name: str, values) -> np.ndarray:
    arr = np.asarray(values)
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"{name} must hold numbers (got dtype {arr.dtype}).")
    arr = arr.astype(float)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (found NaN or inf).")
    if np.any(arr < 0):
        raise ValueError(f"{name} must be non-negative (got minimum {arr.min()}); label counts cannot be negative.")
    return arr


def _picked_indices(picked, num_clients: int) -> np.ndarray:
    idx = np.asarray(picked)
    if idx.ndim != 1:
        raise ValueError(f"picked must be a 1-D sequence of client indices (got shape {idx.shape}).")
    if idx.size == 0:
        return idx.astype(np.int64)
    if not np.issubdtype(idx.dtype, np.integer):
        raise TypeError(f"picked must hold integer client indices (got dtype {idx.dtype}).")
    if idx.min() < 0 or idx.max() >= num_clients:
        raise ValueError(f"picked must hold client indices in [0, {num_clients - 1}] (got {idx.min()}..{idx.max()}).")
    return idx.astype(np.int64)


def _pooled(counts, picked) -> np.ndarray:
    arr = check_count_matrix("counts", counts)
    idx = _picked_indices(picked, arr.shape[0])
    return arr[idx].sum(axis=0)


def pooled_entropy(counts, picked) -> float:
    """Entropy in bits of the summed label counts ``L = sum_{k in picked} l^(k)`` (the quantity of eq. 5).

    Parameters
    ----------
    counts : array_like, shape (K, C)
        Non-negative label-count matrix.
    picked : sequence of int
        Client indices; an empty selection has entropy 0.

    Examples
    --------
    >>> pooled_entropy([[4, 0], [0, 4], [1, 0]], [0, 1])
    1.0
    """
    return float(entropy_bits(_pooled(counts, picked)))


def covers_all_classes(counts, picked) -> bool:
    """True when the picked clients together hold at least one sample (pooled count > 0) of every class.

    Examples
    --------
    >>> covers_all_classes([[4, 0], [0, 1], [2, 0]], [0, 1])
    True
    >>> covers_all_classes([[4, 0], [0, 1], [2, 0]], [0, 2])
    False
    """
    return bool(np.all(_pooled(counts, picked) > 0))


def selection_entropy_norm(picked_history: Iterable, num_clients: int) -> float:
    """Normalised selection entropy ``H_norm`` of §V-E (v2): diversity of client participation, in [0, 1].

    ``c_k`` counts how often client ``k`` was picked over all rounds, ``p_k = c_k / sum_j c_j`` and
    ``H_norm = H(p) / log2 K``. 1 means every client was picked equally often. Entries equal to -1
    are padding (rounds where fewer clients were picked, e.g. DC stopping early) and are ignored.

    Parameters
    ----------
    picked_history : iterable of sequences of int
        One sequence of client indices per round (an (R, M) array works too).
    num_clients : int
        ``K >= 2`` (``log2 1 = 0`` leaves H_norm undefined for one client).

    Examples
    --------
    >>> selection_entropy_norm([[0, 1], [2, 3]], num_clients=4)
    1.0
    >>> selection_entropy_norm([[0, 1], [0, 1]], num_clients=4)
    0.5
    """
    num_clients = check_int("num_clients", num_clients, low=2)
    rounds = [np.asarray(r).ravel() for r in picked_history]
    flat = np.concatenate(rounds) if rounds else np.zeros(0, dtype=np.int64)
    flat = flat[flat != -1]
    if flat.size == 0:
        raise ValueError("picked_history must hold at least one picked client (got none).")
    idx = _picked_indices(flat, num_clients)
    times = np.bincount(idx, minlength=num_clients)
    return float(entropy_bits(times) / np.log2(num_clients))
