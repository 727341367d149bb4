"""Client selectors: FedEntOpt (Algorithm 1 of v2, :func:`fedentopt_round`), random, KL, DC (Düsing & Cimiano)."""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from fedlib._validate import (
    ParameterError,
    check_choice,
    check_count_matrix,
    check_float,
    check_int,
    check_parameter_names,
    check_rng,
    parameter_checks,
)
from fedlib.selection import defence
from fedlib.selection.metrics import _entropy
from fedlib.selection.scoring import ENTROPY_TIE_TOL, fast_scorer, first_best

__all__ = [
    "ENTROPY_TIE_TOL",
    "Selector",
    "RandomSelector",
    "FedEntOptSelector",
    "fedentopt_round",
    "KLSelector",
    "DCSelector",
    "SELECTORS",
    "LABEL_BASED_SELECTORS",
    "register_selector",
    "make_selector",
    "buffer_size_from_fraction",
]


def _cosine_distances(vectors: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``1 - cos(max(v, 0), target)`` for every row v (eq. 2 of Düsing & Cimiano); an all-zero row scores 1."""
    v = np.maximum(vectors, 0.0)
    norms = np.sqrt(np.einsum("ij,ij->i", v, v)) * np.linalg.norm(target)
    sims = np.divide(v @ target, norms, out=np.zeros(v.shape[0]), where=norms > 0)
    return 1.0 - sims


def _lowest_index(scores: np.ndarray) -> int:
    """Position of the lowest score; scores within ENTROPY_TIE_TOL of it tie and go to the lowest position."""
    return int(np.argmax(scores <= scores.min() + ENTROPY_TIE_TOL))


def buffer_size_from_fraction(fraction: float, num_clients: int) -> int:
    """Buffer size ``Q = round(fraction * K)`` (halves round up), as Table VI states Q in % of the clients.

    >>> buffer_size_from_fraction(0.5, 100)
    50
    >>> buffer_size_from_fraction(0.25, 10)
    3
    """
    fraction = check_float("buffer_fraction", fraction, low=0.0, high=1.0)
    num_clients = check_int("num_clients", num_clients, low=1)
    return int(math.floor(fraction * num_clients + 0.5))


# --------------------------------------------------------------------------- interface


class Selector(ABC):
    """A server-side client-selection rule: one call per round picks ``M`` of the ``K`` clients.

    Subclasses implement :meth:`_select`, which :meth:`select` calls with validated arguments. The state is a tuple,
    never mutated (a new one is returned); the parameters are the fields of the subclass's frozen dataclass.
    """

    name: ClassVar[str] = ""
    #: Whether the rule reads every client's label counts (the server then needs them: a one-time upload).
    uses_label_counts: ClassVar[bool] = False

    def _parameter_checks(self):
        """Context of ``__post_init__``'s checks: a failed check is a ``ParameterError`` of this selector."""
        return parameter_checks(f"selector {self.name!r}")

    def initial_state(self, num_clients: int) -> tuple:
        """State before round 1 (``()`` for every built-in selector)."""
        check_int("num_clients", num_clients, low=1)
        return ()

    def select(self, counts, clients_per_round: int, state, rng) -> tuple[np.ndarray, tuple]:
        """``(picked, new_state)`` for one round: M = ``clients_per_round`` client indices (int64) in pick order (DC may
        return fewer), from the (K, C) ``counts`` the server sees (dense or scipy.sparse; negative entries, kept DP
        noise, count as 0 in a pooled vector), the previous call's ``state`` and the generator ``rng``.
        """
        arr = check_count_matrix("counts", counts, allow_negative=True, sparse=True)
        num_clients = arr.shape[0]
        clients_per_round = check_int("clients_per_round", clients_per_round, low=1)
        if clients_per_round > num_clients:
            allowed = f"an integer >= 1 and <= the number of clients K={num_clients}"
            raise ParameterError(None, "clients_per_round", clients_per_round, allowed)
        rng = check_rng("rng", rng)
        state = self._check_state(state, num_clients, clients_per_round)
        picked, new_state = self._select(arr, clients_per_round, state, rng)
        return np.asarray(picked, dtype=np.int64), new_state

    def _check_state(self, state, num_clients: int, clients_per_round: int) -> tuple:
        if state != ():
            raise ParameterError(None, "state", state, f"() (the {self.name!r} selector keeps no state)")
        return state

    @abstractmethod
    def _select(self, counts: np.ndarray, clients_per_round: int, state: tuple, rng: np.random.Generator):
        """Return ``(picked, new_state)`` for validated arguments."""


@dataclass(frozen=True)
class RandomSelector(Selector):
    """Uniform selection of M distinct clients (FedAvg's rule): ``rng.choice(K, M, replace=False)``.

    >>> picked, state = RandomSelector().select(np.ones((10, 3)), 4, (), np.random.default_rng(0))
    >>> len(set(picked.tolist())), state
    (4, ())
    """

    name: ClassVar[str] = "random"

    def _select(self, counts, clients_per_round, state, rng):
        return rng.choice(counts.shape[0], size=clients_per_round, replace=False), ()


def _entropies(pooled: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``H(max(L + l^(m), 0))`` in bits for every row ``l^(m)`` (eq. 5; negative counts are kept DP noise)."""
    return _entropy(np.maximum(pooled + rows, 0.0), axis=1)


def fedentopt_round(counts, clients_per_round: int, buffer: tuple, buffer_size: int, rng, *, over=None, path=None):
    """Algorithm 1 of v2 for one round (its line numbers in the comments): the picks in order and the new buffer.

    Line 7 draws ``U[rng.integers(|U|)]`` from U sorted ascending. Line 9 is scored plainly or by
    :func:`~fedlib.selection.scoring.fast_scorer` (``path``), which picks the same clients; ties within
    ENTROPY_TIE_TOL go to the lowest index. ``over`` (share-cap defence): clients left out of U unless none else is.
    """
    num_clients = counts.shape[0]
    stays = np.zeros(num_clients, dtype=bool)  # buffered all round (a pick evicts at most one): never scored
    stays[list(buffer)[max(0, len(buffer) + clients_per_round - buffer_size) :]] = True
    scorer = fast_scorer(counts, path, active=~stays)  # None: the plain line 9
    if scorer is None and sp.issparse(counts):
        counts = counts.toarray()
    pooled = np.zeros(counts.shape[1])  # L (line 1)
    picked, available = [], np.ones(num_clients, dtype=bool)  # S, A (lines 2-3)
    buffer, in_buffer = deque(buffer), np.zeros(num_clients, dtype=bool)  # B
    in_buffer[list(buffer)] = True
    for i in range(clients_per_round):  # line 4
        free = available & ~in_buffer  # U = A \ B (line 5)
        if over is not None and np.any(free & ~over):
            free &= ~over
        if i == 0:  # lines 6-7: a uniform sample from U
            candidates = np.flatnonzero(free)
            m = int(candidates[rng.integers(candidates.size)])
        elif scorer is None:  # line 9: the m in U maximising H((L + l^(m)) / ||L + l^(m)||_1)
            candidates = np.flatnonzero(free)
            m = int(candidates[first_best(_entropies(pooled, counts[candidates]))])
        else:
            m = scorer.pick(~free)
        buffer.append(m)  # line 10
        in_buffer[m] = True
        while len(buffer) > buffer_size:  # lines 11-12
            in_buffer[buffer.popleft()] = False
        if scorer is None:
            pooled += counts[m]  # line 13
        else:
            scorer.add(m)
        picked.append(m)  # line 14
        available[m] = False  # line 15
    return picked, tuple(buffer)


@dataclass(frozen=True)
class FedEntOptSelector(Selector):
    """FedEntOpt, Algorithm 1 of Lutz et al. (v2): a random first client, then greedy entropy maximisation (eq. 5).

    One round is :func:`fedentopt_round`; the state is the FIFO buffer, oldest first (a client it evicts mid-round
    is selectable again in that round, lines 5, 11-12). Give exactly one of ``buffer_size`` (Q with
    ``0 <= Q <= K - M``, checked at :meth:`select`; Table VI's Q = 0 excludes nothing) and ``buffer_fraction``
    (:func:`buffer_size_from_fraction`). The defences of :mod:`fedlib.selection.defence` (not in the paper) are off
    by default: ``total_cap_quantile`` with ``total_cap_factor`` (:func:`~.defence.cap_totals`), and ``share_cap``
    >= 1, with which the state is ``(buffer, rounds_done, picks per client)``.

    >>> counts = np.array([[4, 0, 0], [0, 4, 0], [2, 2, 0], [0, 0, 2]])
    >>> sel = FedEntOptSelector(buffer_size=0)
    >>> picked, state = sel.select(counts, 2, (), np.random.default_rng(4))
    >>> picked.tolist(), state
    ([2, 3], ())
    """

    buffer_size: int | None = None
    buffer_fraction: float | None = None
    total_cap_quantile: float | None = None
    total_cap_factor: float = 1.0
    share_cap: float | None = None
    name: ClassVar[str] = "fedentopt"
    uses_label_counts: ClassVar[bool] = True

    def __post_init__(self):
        if (self.buffer_size is None) == (self.buffer_fraction is None):
            given = self.buffer_fraction is not None
            allowed = (
                f"None, as buffer_fraction={self.buffer_fraction!r} is given"
                if given
                else "an integer Q >= 0, as buffer_fraction is None"
            )
            raise ParameterError(
                f"selector {self.name!r}",
                "buffer_size",
                self.buffer_size,
                f"{allowed} (give exactly one of buffer_size, buffer_fraction)",
            )
        with self._parameter_checks():
            if self.buffer_size is not None:
                check_int("buffer_size", self.buffer_size, low=0)
            else:
                check_float("buffer_fraction", self.buffer_fraction, low=0.0, high=1.0)
            if self.total_cap_quantile is not None:
                check_float("total_cap_quantile", self.total_cap_quantile, low=0.0, high=1.0, low_open=True)
            check_float("total_cap_factor", self.total_cap_factor, low=0.0, low_open=True)
            if self.share_cap is not None:
                check_float("share_cap", self.share_cap, low=1.0)

    def __repr__(self):  # the defence fields only when set, so that the paper's selector reads as before
        extra = [f for f in ("total_cap_quantile", "share_cap") if getattr(self, f) is not None]
        extra += ["total_cap_factor"] if self.total_cap_factor != 1.0 else []
        args = ["buffer_size", "buffer_fraction", *extra]
        return f"FedEntOptSelector({', '.join(f'{a}={getattr(self, a)!r}' for a in args)})"

    def initial_state(self, num_clients: int) -> tuple:
        """``()``; with ``share_cap`` ``((), 0, (0,) * K)`` (empty buffer, no rounds, no picks)."""
        num_clients = check_int("num_clients", num_clients, low=1)
        return () if self.share_cap is None else ((), 0, (0,) * num_clients)

    def resolve_buffer_size(self, num_clients: int, clients_per_round: int) -> int:
        """Q for K clients and M picks per round; raises unless ``0 <= Q <= K - M``."""
        q = self.buffer_size
        if q is None:
            q = buffer_size_from_fraction(self.buffer_fraction, num_clients)
        if q > num_clients - clients_per_round:
            raise ParameterError(
                f"selector {self.name!r}",
                "buffer_size",
                q,
                f"0 <= Q <= K - M = {num_clients} - {clients_per_round} = {num_clients - clients_per_round} "
                "so that M clients stay selectable",
                got=f"Q={q}"
                if self.buffer_size is not None
                else f"Q={q} (from buffer_fraction={self.buffer_fraction})",
            )
        return q

    def _check_state(self, state, num_clients, clients_per_round):
        if self.share_cap is not None:
            return _check_share_state(self, state, num_clients, clients_per_round)
        q = self.resolve_buffer_size(num_clients, clients_per_round)
        allowed = f"a tuple of at most buffer_size Q={q} distinct buffered client indices in [0, {num_clients - 1}]"
        if not isinstance(state, tuple):
            raise ParameterError(None, "state", state, allowed, got=f"type {type(state).__name__}")
        if len(state) > q:
            raise ParameterError(None, "state", state, allowed, got=f"{len(state)} buffered clients")
        if len(set(state)) != len(state) or any(
            isinstance(b, bool) or not isinstance(b, (int, np.integer)) or not 0 <= b < num_clients for b in state
        ):
            raise ParameterError(None, "state", state, allowed)
        return tuple(int(b) for b in state)

    def _select(self, counts, clients_per_round, state, rng):
        q = self.resolve_buffer_size(counts.shape[0], clients_per_round)
        if self.total_cap_quantile is not None:  # defence: cap inflated totals
            counts = defence.cap_totals(counts, self.total_cap_quantile, self.total_cap_factor)
        if self.share_cap is None:
            return fedentopt_round(counts, clients_per_round, state, q, rng)
        buffer, rounds_done, picks = state  # defence: cap participation; the state carries the picks
        over = defence.over_allowance(picks, self.share_cap, clients_per_round, rounds_done + 1)
        picked, buffer = fedentopt_round(counts, clients_per_round, buffer, q, rng, over=over)
        picks = np.asarray(picks, dtype=np.int64)
        picks[picked] += 1
        return picked, (buffer, rounds_done + 1, tuple(int(n) for n in picks))


def _check_share_state(selector: FedEntOptSelector, state, num_clients: int, clients_per_round: int) -> tuple:
    """The state ``(buffer, rounds_done, picks)`` of a FedEntOpt selector with ``share_cap`` (``()``: round 1)."""
    if state == ():
        state = selector.initial_state(num_clients)
    if not (isinstance(state, tuple) and len(state) == 3):
        raise ParameterError(None, "state", state, "() or (buffer, rounds_done, picks) (a selector with share_cap)")
    buffer, rounds_done, picks = state
    buffer = FedEntOptSelector._check_state(
        dataclasses.replace(selector, share_cap=None),
        tuple(buffer) if isinstance(buffer, (tuple, list)) else buffer,
        num_clients,
        clients_per_round,
    )
    rounds_done = check_int("rounds_done (state[1])", rounds_done, low=0)
    if (
        not isinstance(picks, (tuple, list))
        or len(picks) != num_clients
        or any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0 for n in picks)
    ):
        raise ParameterError(None, "picks (state[2])", picks, f"one non-negative int per client, {num_clients} in all")
    return buffer, rounds_done, tuple(int(n) for n in picks)


@dataclass(frozen=True)
class KLSelector(Selector):
    """The paper's "KL" baseline (ref. [20]/[33] of v2): greedy minimisation of KL(pooled ‖ uniform).

    Our reading of "relies on KL-divergence" and "consistently produces the same subset": from ``L = 0`` each step
    adds the client minimising ``KL(p_L ‖ u) = log2 C - H(p_L)``, with no random first pick and no buffer, so the
    same subset every round (the rng is not drawn from). Ties (within :data:`ENTROPY_TIE_TOL`): the lowest index.

    >>> counts = np.array([[3, 1, 0], [1, 1, 1], [0, 0, 5]])
    >>> KLSelector().select(counts, 2, (), np.random.default_rng(0))[0].tolist()
    [1, 0]
    """

    name: ClassVar[str] = "kl"
    uses_label_counts: ClassVar[bool] = True

    def _select(self, counts, clients_per_round, state, rng):
        scorer = fast_scorer(counts)  # None: score plainly
        if scorer is None and sp.issparse(counts):
            counts = counts.toarray()
        pooled, taken, picked = np.zeros(counts.shape[1]), np.zeros(counts.shape[0], dtype=bool), []
        for _ in range(clients_per_round):
            if scorer is None:
                candidates = np.flatnonzero(~taken)
                m = int(candidates[first_best(_entropies(pooled, counts[candidates]))])
                pooled += counts[m]
            else:
                m = scorer.pick(taken)
                scorer.add(m)
            picked.append(m)
            taken[m] = True
        return picked, ()


_DC_TARGETS = ("balanced", "real")


@dataclass(frozen=True)
class DCSelector(Selector):
    """Distribution-controlled selection of Düsing & Cimiano (their Algorithm 1, Step 2 and Equation 2).

    Each round: ``num_random`` (their m) random clients, then up to ``num_dc`` (their m_DC; None: M - m) more, each
    the client minimising ``1 - cos(V_active + V_c, V_target)`` (Equation 2), stopping early when none improves the
    distance by more than :data:`ENTROPY_TIE_TOL`. Ties go to the lowest index. ``target``: ``"balanced"`` (all
    ones) or ``"real"`` (the column sums of all clients' counts, their eq. 1).

    >>> counts = np.array([[4, 0], [0, 2], [2, 1], [1, 1]])
    >>> DCSelector(0, 1, target="balanced").select(counts, 1, (), np.random.default_rng(0))[0].tolist()
    [3]
    >>> DCSelector(0, 1, target="real").select(counts, 1, (), np.random.default_rng(0))[0].tolist()
    [2]
    """

    num_random: int
    num_dc: int | None = None
    target: str = "balanced"
    name: ClassVar[str] = "dc"
    uses_label_counts: ClassVar[bool] = True

    def __post_init__(self):
        with self._parameter_checks():
            check_int("num_random", self.num_random, low=0)
            if self.num_dc is not None:
                check_int("num_dc", self.num_dc, low=0)
            check_choice("target", self.target, _DC_TARGETS)

    def resolve_num_dc(self, num_clients: int, clients_per_round: int) -> int:
        """m_DC for a round of at most M clients; raises if M does not fit ``num_random``/``num_dc``."""
        if self.num_random > clients_per_round:
            raise ParameterError(
                f"selector {self.name!r}",
                "clients_per_round",
                clients_per_round,
                f"the maximum m + m_DC, >= num_random={self.num_random}",
            )
        if self.num_dc is not None and self.num_random + self.num_dc != clients_per_round:
            raise ParameterError(
                f"selector {self.name!r}",
                "clients_per_round",
                clients_per_round,
                f"num_random + num_dc = {self.num_random} + {self.num_dc} = {self.num_random + self.num_dc}; "
                "or pass num_dc=None",
            )
        return clients_per_round - self.num_random

    def target_vector(self, counts: np.ndarray) -> np.ndarray:
        """V_target: all ones (balanced) or the clipped class totals of all clients (real)."""
        if self.target == "balanced":
            return np.ones(counts.shape[1])
        real = np.maximum(counts.sum(axis=0), 0.0)
        if not np.any(real > 0):
            allowed = "counts with a positive class total (the 'real' DC target is the clipped class totals)"
            raise ParameterError(None, "counts", counts, allowed, got="no positive class total")
        return real

    def _check_state(self, state, num_clients, clients_per_round):
        self.resolve_num_dc(num_clients, clients_per_round)
        return super()._check_state(state, num_clients, clients_per_round)

    def _select(self, counts, clients_per_round, state, rng):
        if not isinstance(counts, np.ndarray):  # a scipy.sparse matrix: DC scores dense rows
            counts = counts.toarray()
        num_clients = counts.shape[0]
        target = self.target_vector(counts)
        picked = [int(k) for k in rng.choice(num_clients, size=self.num_random, replace=False)]
        active = np.zeros(num_clients, dtype=bool)
        active[picked] = True
        pooled = counts[picked].sum(axis=0)
        current = _cosine_distances(pooled[None, :], target)[0]
        for _ in range(self.resolve_num_dc(num_clients, clients_per_round)):
            free = np.flatnonzero(~active)
            dists = _cosine_distances(pooled + counts[free], target)
            j = _lowest_index(dists)
            if not dists[j] < current - ENTROPY_TIE_TOL:
                break  # no candidate improves the alignment: stop early
            m = int(free[j])
            picked.append(m)
            active[m] = True
            pooled = pooled + counts[m]
            current = dists[j]
        return picked, ()


# --------------------------------------------------------------------------- registry

#: The selectors by name, as :func:`make_selector` and ``ExperimentConfig(selector=...)`` know them.
SELECTORS: dict[str, type[Selector]] = {}
_LABEL_BASED: dict[str, type[Selector]] = {}
#: Names of the registered selectors with ``uses_label_counts`` (a live view: it follows :func:`register_selector`).
LABEL_BASED_SELECTORS = _LABEL_BASED.keys()


def register_selector(cls: type[Selector]) -> type[Selector]:
    """Add ``cls`` to :data:`SELECTORS` under ``cls.name`` (a selector defined outside fedlib); returns ``cls``, so
    it can decorate the class. Every process that builds the selector by name must have imported the module that
    registers it. :class:`~fedlib._validate.ParameterError` for a class that is not a named :class:`Selector` or
    whose name another class holds.

    >>> try:
    ...     register_selector(dict)
    ... except ParameterError as error:
    ...     print(error)
    register_selector parameter 'cls': got <class 'dict'>; allowed: a Selector subclass with a name.
    """
    if not (isinstance(cls, type) and issubclass(cls, Selector) and isinstance(cls.name, str) and cls.name):
        raise ParameterError("register_selector", "cls", cls, "a Selector subclass with a name")
    if SELECTORS.setdefault(cls.name, cls) is not cls:
        taken = ", ".join(repr(n) for n in SELECTORS)
        allowed = f"a Selector subclass whose name is none of {taken}"
        raise ParameterError("register_selector", "cls", cls, allowed, got=f"{cls.__name__} named {cls.name!r}")
    if cls.uses_label_counts:
        _LABEL_BASED[cls.name] = cls
    return cls


for _cls in (RandomSelector, FedEntOptSelector, KLSelector, DCSelector):
    register_selector(_cls)


def make_selector(name: str, **params) -> Selector:
    """The selector ``name`` of :data:`SELECTORS` with ``params``; :class:`~fedlib._validate.ParameterError` for an
    unknown name, a parameter the selector does not take or a bad value.

    >>> make_selector("fedentopt", buffer_fraction=0.5)
    FedEntOptSelector(buffer_size=None, buffer_fraction=0.5)
    >>> make_selector("dc", num_random=10, num_dc=5, target="real")
    DCSelector(num_random=10, num_dc=5, target='real')
    """
    if name not in SELECTORS:
        raise ParameterError("selector", "name", name, ", ".join(repr(n) for n in SELECTORS))
    cls = SELECTORS[name]
    check_parameter_names(f"selector {name!r}", params, [f.name for f in dataclasses.fields(cls)])
    return cls(**params)
