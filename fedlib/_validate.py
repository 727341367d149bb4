"""Argument checks shared by fedlib: every bad input is a :class:`ParameterError` naming the parameter, the value
given and what is allowed, raised before any work starts."""

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
    """Bad input to fedlib: ``"[part ]parameter 'name': got value; allowed: what is allowed.[ hint]"``.

    ``part``: what the parameter belongs to (``"config"``; None for a plain function's argument); ``got``: the value
    described where its ``repr`` would not do (a shape); ``unknown``: ``name`` is not a parameter of ``part``.
    """

    def __init__(self, part, name, value, allowed, *, unknown=False, got=None, hint=None) -> None:
        self.part, self.name, self.value, self.allowed = part, name, value, allowed
        self.unknown, self.got, self.hint = unknown, got, hint
        super().__init__(self._message())

    def _message(self) -> str:
        part = f"{self.part} " if self.part else ""
        kind = "unknown parameter" if self.unknown else "parameter"
        got = repr(self.value) if self.got is None else self.got
        hint = f" {self.hint}" if self.hint else ""
        return f"{part}{kind} {self.name!r}: got {got}; allowed: {self.allowed}.{hint}"

    def amend(self, **fields) -> ParameterError:
        """Set ``fields`` (e.g. the ``part`` of a failed check) and rewrite the message; returns ``self``."""
        vars(self).update(fields)
        self.args = (self._message(),)
        return self

    def __reduce__(self):  # picklable (e.g. across a Ray worker) although __init__ takes more than the message
        keywords = {"unknown": self.unknown, "got": self.got, "hint": self.hint}
        return _rebuild, (type(self), (self.part, self.name, self.value, self.allowed), keywords)


def _rebuild(cls, args, keywords):
    return cls(*args, **keywords)


def check_parameter_names(part: str, params: Mapping[str, object], names: Iterable[str]) -> None:
    """Raise :class:`ParameterError` for the first key of ``params`` not in ``names`` (the part's parameters)."""
    names = list(names)
    unknown = [key for key in params if key not in names]
    if unknown:
        allowed = f"the parameters {', '.join(names)}" if names else "no parameters"
        more = f"(also unknown: {', '.join(map(repr, unknown[1:]))})" if len(unknown) > 1 else None
        raise ParameterError(part, unknown[0], params[unknown[0]], allowed, unknown=True, hint=more)


@contextmanager
def parameter_checks(part: str, names: Iterable[str] | None = None) -> Iterator[None]:
    """Name ``part`` in a :class:`ParameterError` of the block that names no part (of a parameter in ``names``,
    if given)."""
    names = None if names is None else set(names)
    try:
        yield
    except ParameterError as exc:
        if exc.part is None and (names is None or exc.name in names):
            exc.amend(part=part)
        raise


def _bounds(low, high, low_open: bool = False, high_open: bool = False) -> str:
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {high}")
    return (" " + " and ".join(parts)) if parts else ""


def check_int(name: str, value, *, low: int | None = None, high: int | None = None) -> int:
    """``value`` as int if it is an integer in ``[low, high]``, else raise :class:`ParameterError`."""
    allowed = "an integer" + _bounds(low, high)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ParameterError(None, name, value, allowed)
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ParameterError(None, name, value, allowed)
    return value


def check_float(name: str, value, *, low=None, high=None, low_open: bool = False, high_open: bool = False) -> float:
    """``value`` as float if it is a finite real number in the interval (``*_open``: strict bound)."""
    allowed = "a finite real number" + _bounds(low, high, low_open, high_open)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(None, name, value, allowed)
    x = float(value)
    if (
        not np.isfinite(x)
        or (low is not None and (x <= low if low_open else x < low))
        or (high is not None and (x >= high if high_open else x > high))
    ):
        raise ParameterError(None, name, value, allowed)
    return x


def check_bool(name: str, value) -> bool:
    """``value`` if it is ``True`` or ``False`` (not merely truthy)."""
    if not isinstance(value, bool):
        raise ParameterError(None, name, value, "True, False")
    return value


def check_choice(name: str, value, choices: Iterable[str]):
    """``value`` if it is one of ``choices``; the error lists them."""
    choices = list(choices)
    if value not in choices:
        raise ParameterError(None, name, value, ", ".join(repr(c) for c in choices))
    return value


def check_optional(check: Callable, name: str, value, **options):
    """``None`` if ``value`` is None, else ``check(name, value, **options)`` (whose error then allows None too)."""
    if value is None:
        return None
    try:
        return check(name, value, **options)
    except ParameterError as exc:
        raise exc.amend(allowed="None or " + exc.allowed) from None


def check_rng(name: str, rng) -> np.random.Generator:
    """``rng`` if it is a ``np.random.Generator`` (fedlib never falls back to global randomness)."""
    if not isinstance(rng, np.random.Generator):
        allowed = "a numpy.random.Generator, e.g. np.random.default_rng(seed)"
        raise ParameterError(None, name, rng, allowed, got=f"type {type(rng).__name__}")
    return rng


def check_count_matrix(name: str, counts, *, allow_negative: bool = False, sparse: bool = False):
    """``counts`` as a float (clients, classes) matrix without NaN, inf and, unless allowed, negatives; with
    ``sparse``, a scipy.sparse input stays a float64 ``csr_array``, else every input becomes a dense array."""
    import scipy.sparse as sp

    allowed = f"a 2-D array (num_clients, num_classes) of finite{'' if allow_negative else ', non-negative'} numbers"
    is_sparse = sp.issparse(counts)
    if is_sparse:
        arr = counts
    else:
        try:
            arr = np.asarray(counts)
        except ValueError:  # a ragged nested sequence
            raise ParameterError(None, name, counts, allowed, got=_ragged(counts)) from None
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ParameterError(None, name, arr, allowed, got=f"shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise ParameterError(None, name, arr, allowed, got=f"dtype {arr.dtype}")
    if is_sparse:
        arr = sp.csr_array(counts)
        arr = arr.astype(np.float64) if arr.dtype != np.float64 else arr.copy()  # one copy: sum_duplicates is in place
        arr.sum_duplicates()
        values = arr.data
    else:
        values = arr = arr.astype(float)
    bad = ~np.isfinite(values) if allow_negative else ~(np.isfinite(values) & (values >= 0))
    if bad.any():
        if is_sparse:
            at = int(np.argmax(bad))
            i, j = int(np.searchsorted(arr.indptr, at, side="right") - 1), arr.indices[at]
            got = f"{arr.data[at]} for client {i}, class {j}"
        else:
            i, j = np.argwhere(bad)[0]
            got = f"{arr[i, j]} for client {i}, class {j}"
        raise ParameterError(None, name, counts, allowed, got=got)
    return arr.toarray() if is_sparse and not sparse else arr


def _ragged(counts) -> str:
    """Why a nested sequence is not a matrix (the first client whose row length differs from client 0's)."""
    try:
        lengths = [len(row) for row in counts]
    except TypeError:
        return "a nested sequence whose rows are not all sequences"
    k = next(i for i, n in enumerate(lengths) if n != lengths[0])
    return f"rows of different lengths (client 0 has {lengths[0]} entries, client {k} has {lengths[k]})"


def check_label_vector(name: str, labels, *, num_classes: int | None = None) -> np.ndarray:
    """``labels`` as a 1-D int64 array of class ids in ``[0, num_classes)``."""
    arr = np.asarray(labels)
    ids = ">= 0" if num_classes is None else f"in [0, {num_classes}) (num_classes is {num_classes})"
    allowed = f"a non-empty 1-D array of integer class ids {ids}"
    if arr.ndim != 1 or arr.size == 0:
        raise ParameterError(None, name, labels, allowed, got=f"shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise ParameterError(None, name, labels, allowed, got=f"dtype {arr.dtype}")
    if arr.min() < 0 or (num_classes is not None and arr.max() >= num_classes):
        bad = arr.min() if arr.min() < 0 else arr.max()
        raise ParameterError(None, name, labels, allowed, got=f"class id {bad}")
    return arr.astype(np.int64)
