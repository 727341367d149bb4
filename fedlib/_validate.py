"""Argument checks shared by fedlib: each error names the parameter, the value given and what is allowed.

The ``check_*`` functions raise ``TypeError``/``ValueError`` (``"mu must be >= 0.0 (got -1.0)."``);
:func:`parameter_checks` turns such a failure inside a part's constructor (a selector, an algorithm, a data set)
into that part's :class:`ParameterError`.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager

import numpy as np

__all__ = [
    "ParameterError",
    "parameter_checks",
    "check_parameter_names",
    "check_int",
    "check_float",
    "check_bool",
    "check_choice",
    "check_optional",
    "check_rng",
    "check_count_matrix",
    "check_label_vector",
]


class ParameterError(TypeError, ValueError):
    """An unknown or bad parameter of one of fedlib's parts (a selector, an algorithm, a data set); both a
    ``TypeError`` and a ``ValueError``. With ``unknown``, ``allowed`` lists the parameters the part takes.

    >>> str(ParameterError("algorithm 'fedprox'", "mu", -1.0, "a finite real number >= 0.0"))
    "algorithm 'fedprox' parameter 'mu': got -1.0; allowed: a finite real number >= 0.0."
    """

    def __init__(self, part: str, name: str, value, allowed: str, unknown: bool = False) -> None:
        self.part, self.name, self.value, self.allowed, self.unknown = part, name, value, allowed, unknown
        kind = "unknown parameter" if unknown else "parameter"
        super().__init__(f"{part} {kind} {name!r}: got {value!r}; allowed: {allowed}.")

    def __reduce__(self):  # picklable (e.g. across a Ray worker) although __init__ takes more than the message
        return type(self), (self.part, self.name, self.value, self.allowed, self.unknown)


def check_parameter_names(part: str, params: Mapping[str, object], names: Iterable[str]) -> None:
    """Raise :class:`ParameterError` for the first key of ``params`` not in ``names`` (the part's parameters).

    >>> try:
    ...     check_parameter_names("selector 'kl'", {"q": 1}, [])
    ... except ParameterError as exc:
    ...     print(exc)
    selector 'kl' unknown parameter 'q': got 1; allowed: no parameters.
    """
    names = list(names)
    for key, value in params.items():
        if key not in names:
            allowed = f"the parameters {', '.join(names)}" if names else "no parameters"
            raise ParameterError(part, key, value, allowed, unknown=True)


@contextmanager
def parameter_checks(part: str, names: Iterable[str] | None = None) -> Iterator[None]:
    """Turn the failure of a ``check_*`` call in the block (of a parameter in ``names``, if given) into a
    :class:`ParameterError` of ``part``; other errors pass unchanged."""
    names = None if names is None else set(names)
    try:
        yield
    except ParameterError:
        raise
    except (TypeError, ValueError) as exc:
        failed = getattr(exc, "failed_check", None)
        if failed is None or (names is not None and failed[0] not in names):
            raise
        raise ParameterError(part, *failed) from None


def _failure(exc_type: type, message: str, name: str, value, allowed: str) -> Exception:
    """``exc_type(message)`` that records ``(name, value, allowed)`` for :func:`parameter_checks`."""
    exc = exc_type(message)
    exc.failed_check = (name, value, allowed)
    return exc


def _bounds(low, high, low_open: bool = False, high_open: bool = False) -> str:
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {high}")
    return (" " + " and ".join(parts)) if parts else ""


def check_int(name: str, value, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as int if it is an integer in ``[low, high]``, else raise ValueError/TypeError.

    >>> check_int("num_clients", 5, low=1)
    5
    """
    allowed = "an integer" + _bounds(low, high)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _failure(
            TypeError,
            f"{name} must be an integer (got {value!r} of type {type(value).__name__}).",
            name,
            value,
            allowed,
        )
    value = int(value)
    if low is not None and value < low:
        raise _failure(ValueError, f"{name} must be >= {low} (got {value}).", name, value, allowed)
    if high is not None and value > high:
        raise _failure(ValueError, f"{name} must be <= {high} (got {value}).", name, value, allowed)
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
    """Return ``value`` as float if it is a finite real number in the interval (``*_open``: strict bound)."""
    allowed = "a finite real number" + _bounds(low, high, low_open, high_open)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _failure(
            TypeError,
            f"{name} must be a real number (got {value!r} of type {type(value).__name__}).",
            name,
            value,
            allowed,
        )
    got = value
    value = float(value)
    if not np.isfinite(value):
        raise _failure(ValueError, f"{name} must be finite (got {value}).", name, got, allowed)
    if low is not None and (value <= low if low_open else value < low):
        raise _failure(
            ValueError, f"{name} must be {'>' if low_open else '>='} {low} (got {value}).", name, got, allowed
        )
    if high is not None and (value >= high if high_open else value > high):
        raise _failure(
            ValueError, f"{name} must be {'<' if high_open else '<='} {high} (got {value}).", name, got, allowed
        )
    return value


def check_bool(name: str, value) -> bool:
    """Return ``value`` if it is ``True`` or ``False`` (not merely truthy)."""
    if not isinstance(value, bool):
        raise _failure(TypeError, f"{name} must be True or False (got {value!r}).", name, value, "True, False")
    return value


def check_choice(name: str, value, choices: Iterable[str]):
    """Return ``value`` if it is one of ``choices``; the error lists the allowed values."""
    choices = list(choices)
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise _failure(ValueError, f"{name} must be one of {allowed} (got {value!r}).", name, value, allowed)
    return value


def check_optional(check: Callable, name: str, value, **options):
    """``None`` if ``value`` is None, else ``check(name, value, **options)`` (whose failure then allows None too).

    >>> check_optional(check_int, "encoder_rounds", None, low=0) is None
    True
    """
    if value is None:
        return None
    try:
        return check(name, value, **options)
    except (TypeError, ValueError) as exc:
        failed = getattr(exc, "failed_check", None)
        if failed is not None:
            exc.failed_check = (*failed[:2], "None or " + failed[2])
        raise


def check_rng(name: str, rng) -> np.random.Generator:
    """Require an explicit ``np.random.Generator`` (fedlib never falls back to global randomness)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"{name} must be a numpy.random.Generator, e.g. np.random.default_rng(seed) (got {type(rng).__name__})."
        )
    return rng


def check_count_matrix(name: str, counts, *, allow_negative: bool = False, sparse: bool = False):
    """Return ``counts`` as a float (clients, classes) matrix; reject NaN, inf and, unless allowed, negatives (the
    error names the first offending client and class). With ``sparse``, a scipy.sparse input stays a canonical
    float64 ``csr_array``; every other input becomes a dense ``numpy.ndarray``.

    >>> check_count_matrix("counts", [[1, 0], [2, 3]]).tolist()
    [[1.0, 0.0], [2.0, 3.0]]
    """
    if _is_sparse(counts):
        return _check_sparse_counts(name, counts, allow_negative=allow_negative, sparse=sparse)
    try:
        arr = np.asarray(counts)
    except ValueError:  # a ragged nested sequence
        raise ValueError(
            f"{name} must be a 2-D array of shape (num_clients, num_classes); {_ragged(counts)}."
        ) from None
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"{name} must be a 2-D array of shape (num_clients, num_classes) (got shape {arr.shape}).")
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
        raise ValueError(f"{name} must be a 2-D array of shape (num_clients, num_classes) (got shape {counts.shape}).")
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
