"""Argument checks shared by fedlib: each error names the parameter, the value given and what is allowed."""
from __future__ import annotations

import numbers
from collections.abc import Iterable

import numpy as np

__all__ = [
    "check_int",
    "check_float",
    "check_choice",
    "check_rng",
    "check_count_matrix",
    "check_label_vector",
]


def check_int(name: str, value, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as int if it is an integer in ``[low, high]``, else raise ValueError/TypeError.

    >>> check_int("num_clients", 5, low=1)
    5
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer (got {value!r} of type {type(value).__name__}).")
    value = int(value)
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low} (got {value}).")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high} (got {value}).")
    return value


def check_float(
    name: str,
    value,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Return ``value`` as float if it is a finite real number in the given interval.

    ``low_open``/``high_open`` make the bound strict (``value > low`` / ``value < high``).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number (got {value!r} of type {type(value).__name__}).")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite (got {value}).")
    if low is not None and (value <= low if low_open else value < low):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low} (got {value}).")
    if high is not None and (value >= high if high_open else value > high):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high} (got {value}).")
    return value


def check_choice(name: str, value, choices: Iterable[str]):
    """Return ``value`` if it is one of ``choices``; the error lists the allowed values."""
    choices = list(choices)
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {allowed} (got {value!r}).")
    return value


def check_rng(name: str, rng) -> np.random.Generator:
    """Require an explicit ``np.random.Generator`` (fedlib never falls back to global randomness)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"{name} must be a numpy.random.Generator, e.g. np.random.default_rng(seed) "
            f"(got {type(rng).__name__})."
        )
    return rng


def check_count_matrix(name: str, counts, *, allow_negative: bool = False, sparse: bool = False):
    """Return ``counts`` as a float matrix of shape (clients, classes); reject NaN, inf and, unless allowed, negatives.

    A ``scipy.sparse`` matrix is returned as a canonical ``scipy.sparse.csr_array`` of float64 when ``sparse``
    is true (no dense K x C array is built), else as a dense array. Every other input becomes a 2-D float
    ``numpy.ndarray``. Errors name the first offending client (row) and class (column) and the value.

    >>> check_count_matrix("counts", [[1, 0], [2, 3]]).tolist()
    [[1.0, 0.0], [2.0, 3.0]]
    """
    if _is_sparse(counts):
        return _check_sparse_counts(name, counts, allow_negative=allow_negative, sparse=sparse)
    try:
        arr = np.asarray(counts)
    except ValueError:  # a ragged nested sequence
        raise ValueError(f"{name} must be a 2-D array of shape (num_clients, num_classes); {_ragged(counts)}.") from None
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(
            f"{name} must be a 2-D array of shape (num_clients, num_classes) (got shape {arr.shape})."
        )
    if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(f"{name} must hold numbers (got dtype {arr.dtype}).")
    arr = arr.astype(float)
    finite = np.isfinite(arr)
    if not finite.all():
        i, j = np.argwhere(~finite)[0]
        raise ValueError(f"{name} must be finite (got {arr[i, j]} for client {i}, class {j}).")
    if not allow_negative and np.any(arr < 0):
        i, j = np.argwhere(arr < 0)[0]
        raise ValueError(f"{name} must be non-negative (got {arr[i, j]} for client {i}, class {j}).")
    return arr


def _is_sparse(value) -> bool:
    try:
        import scipy.sparse as sp
    except ImportError:  # pragma: no cover - scipy is a dependency
        return False
    return sp.issparse(value)


def _ragged(counts) -> str:
    """Describe why a nested sequence is not a matrix (first client whose row length differs from client 0's)."""
    try:
        lengths = [len(row) for row in counts]
    except TypeError:
        return "got a nested sequence whose rows are not all sequences"
    k = next(i for i, n in enumerate(lengths) if n != lengths[0])
    return f"got rows of different lengths (client 0 has {lengths[0]} entries, client {k} has {lengths[k]})"


def _check_sparse_counts(name: str, counts, *, allow_negative: bool, sparse: bool):
    import scipy.sparse as sp

    if counts.ndim != 2 or counts.shape[0] < 1 or counts.shape[1] < 1:
        raise ValueError(
            f"{name} must be a 2-D array of shape (num_clients, num_classes) (got shape {counts.shape})."
        )
    if not np.issubdtype(counts.dtype, np.number) or np.issubdtype(counts.dtype, np.complexfloating):
        raise TypeError(f"{name} must hold numbers (got dtype {counts.dtype}).")
    csr = sp.csr_array(counts)
    csr = csr.astype(np.float64) if csr.dtype != np.float64 else csr.copy()  # one copy: sum_duplicates is in place
    csr.sum_duplicates()
    for bad, what in ((~np.isfinite(csr.data), "finite"), (None if allow_negative else csr.data < 0, "non-negative")):
        if bad is not None and bad.any():
            at = int(np.argmax(bad))
            i = int(np.searchsorted(csr.indptr, at, side="right") - 1)
            raise ValueError(f"{name} must be {what} (got {csr.data[at]} for client {i}, class {csr.indices[at]}).")
    return csr if sparse else csr.toarray()


def check_label_vector(name: str, labels, *, num_classes: int | None = None) -> np.ndarray:
    """Return ``labels`` as a 1-D int64 array of class ids in ``[0, num_classes)``."""
    arr = np.asarray(labels)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of class ids (got shape {arr.shape}).")
    if not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must hold integer class ids (got dtype {arr.dtype}).")
    if arr.min() < 0:
        raise ValueError(f"{name} must hold class ids >= 0 (got {arr.min()}).")
    if num_classes is not None and arr.max() >= num_classes:
        raise ValueError(f"{name} holds class id {arr.max()}, but num_classes is {num_classes}.")
    return arr.astype(np.int64)
