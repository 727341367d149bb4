"""Label metrics of the FedEntOpt paper (v2): Shannon entropy (eq. 5), coverage and H_norm (§V-E)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from fedlib._validate import ParameterError, check_count_matrix, check_int

__all__ = ["entropy_bits", "pooled_entropy", "covers_all_classes", "selection_entropy_norm"]


def entropy_bits(counts, axis: int = -1) -> np.ndarray | float:
    """Shannon entropy in bits of non-negative count vectors along ``axis``, each normalised (eq. 5 of v2); 0 for an
    all-zero vector. A float for 1-D input, else an array without ``axis``.

    >>> entropy_bits([5, 5, 5, 5])
    2.0
    """
    arr = _non_negative_array("counts", counts)
    if arr.ndim == 0 or arr.shape[axis] == 0:
        allowed = f"finite, non-negative counts with at least one class along axis {axis}"
        raise ParameterError(None, "counts", counts, allowed, got=f"shape {arr.shape}")
    return _entropy(arr, axis)


def _entropy(arr: np.ndarray, axis: int = -1) -> np.ndarray | float:
    """:func:`entropy_bits` of a float array its caller vouches for (finite, non-negative, a class along ``axis``):
    the selectors' inner loop scores candidates with it, unchecked."""
    total = arr.sum(axis=axis, keepdims=True)
    p = np.divide(arr, total, out=np.zeros_like(arr), where=total > 0)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    h = np.maximum(-(p * logs).sum(axis=axis), 0.0)  # clamp -0.0 / rounding below zero
    return float(h) if h.ndim == 0 else h


def _non_negative_array(name: str, values) -> np.ndarray:
    arr = np.asarray(values)
    allowed = "finite, non-negative label counts"
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ParameterError(None, name, values, allowed, got=f"dtype {arr.dtype}")
    arr = arr.astype(float)
    bad = ~(np.isfinite(arr) & (arr >= 0))
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        index = f" at index {at[0] if len(at) == 1 else at}" if at else ""
        raise ParameterError(None, name, values, allowed, got=f"{arr[at]}{index}")
    return arr


def _picked_indices(picked, num_clients: int, name: str = "picked") -> np.ndarray:
    idx = np.asarray(picked)
    allowed = f"a 1-D sequence of integer client indices in [0, {num_clients - 1}]"
    if idx.ndim != 1:
        raise ParameterError(None, name, picked, allowed, got=f"shape {idx.shape}")
    if idx.size == 0:
        return idx.astype(np.int64)
    if not np.issubdtype(idx.dtype, np.integer):
        raise ParameterError(None, name, picked, allowed, got=f"dtype {idx.dtype}")
    if idx.min() < 0 or idx.max() >= num_clients:
        raise ParameterError(None, name, picked, allowed, got=f"indices from {idx.min()} to {idx.max()}")
    return idx.astype(np.int64)


def _pooled(counts, picked) -> np.ndarray:
    arr = check_count_matrix("counts", counts)
    idx = _picked_indices(picked, arr.shape[0])
    return arr[idx].sum(axis=0)


def pooled_entropy(counts, picked) -> float:
    """Entropy in bits of the pooled counts ``L = sum_{k in picked} l^(k)`` of a (K, C) matrix (eq. 5); 0 for none.

    >>> pooled_entropy([[4, 0], [0, 4], [1, 0]], [0, 1])
    1.0
    """
    return float(entropy_bits(_pooled(counts, picked)))


def covers_all_classes(counts, picked) -> bool:
    """True when the picked clients together hold at least one sample of every class.

    >>> covers_all_classes([[4, 0], [0, 1], [2, 0]], [0, 2])
    False
    """
    return bool(np.all(_pooled(counts, picked) > 0))


def selection_entropy_norm(picked_history: Iterable, num_clients: int) -> float:
    """Normalised selection entropy ``H_norm = H(p) / log2 K`` of §V-E (v2): ``p_k`` is client k's share of all picks
    in ``picked_history`` (one sequence of client indices per round; -1 is padding), K = ``num_clients`` >= 2.

    >>> selection_entropy_norm([[0, 1], [0, 1]], num_clients=4)
    0.5
    """
    num_clients = check_int("num_clients", num_clients, low=2)
    rounds = [np.asarray(r).ravel() for r in picked_history]
    flat = np.concatenate(rounds) if rounds else np.zeros(0, dtype=np.int64)
    flat = flat[flat != -1]
    if flat.size == 0:
        allowed = "rounds of client indices with at least one picked client (-1 is padding)"
        raise ParameterError(None, "picked_history", picked_history, allowed, got="no picked client")
    idx = _picked_indices(flat, num_clients, "picked_history")
    times = np.bincount(idx, minlength=num_clients)
    return float(entropy_bits(times) / np.log2(num_clients))
