"""Label-only FedEntOpt selection runs: entropy per round (v2 Fig. 1), H_norm (v2 §V-E), coverage (v1 §V-B5)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from fedlib._validate import ParameterError, check_count_matrix, check_int
from fedlib.selection.metrics import entropy_bits, selection_entropy_norm
from fedlib.selection.selectors import Selector, make_selector

__all__ = ["SelectionTrace", "run_selection", "coverage_probability", "trace_frame"]


@dataclass(frozen=True)
class SelectionTrace:
    """What a selector did over R rounds, measured on the true label counts: ``picked`` (R, M) in pick order (-1
    pads rounds with fewer picks); per round the pooled ``entropy`` in bits and ``covers`` (the picks hold every
    class); the selector's ``final_state``."""

    picked: np.ndarray
    entropy: np.ndarray
    covers: np.ndarray
    num_clients: int
    final_state: tuple = ()

    @property
    def selection_counts(self) -> np.ndarray:
        """How often each client was picked over all rounds, shape (K,)."""
        flat = self.picked[self.picked >= 0]
        return np.bincount(flat, minlength=self.num_clients)

    @property
    def h_norm(self) -> float:
        """Normalised selection entropy H_norm of §V-E (v2)."""
        return selection_entropy_norm(self.picked, self.num_clients)


def _round_metrics(true_counts, picked: np.ndarray) -> tuple[float, bool]:
    pooled = np.asarray(true_counts[picked].sum(axis=0)).ravel()  # 1-D for a dense array and a sparse matrix
    return float(entropy_bits(pooled)), bool(np.all(pooled > 0))


def _freeze(*arrays: np.ndarray) -> None:
    for a in arrays:
        a.setflags(write=False)


def _generator(seed) -> np.random.Generator:
    """``seed`` if it is a Generator, else ``np.random.default_rng(seed)`` of an integer seed >= 0."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(check_int("seed", seed, low=0))


def run_selection(
    counts, selector, clients_per_round: int, num_rounds: int, *, seed, server_counts=None
) -> SelectionTrace:
    """Run ``selector`` (or the name of one without parameters) for ``num_rounds`` rounds of ``clients_per_round`` picks
    and record each round on the true ``counts`` (K, C; a sparse matrix stays sparse).

    ``seed``: the generator of every ``select`` call, or the int seed of one; with
    ``fedlib.seeds.stream_rng(seed, "selection")`` the picks are those of the training run of the same seed and
    federation. ``server_counts``: what the selector sees instead of ``counts`` (e.g. ``laplace_counts``).

    >>> counts = np.array([[5, 0], [0, 5], [3, 3], [1, 0]])
    >>> trace = run_selection(counts, "kl", 2, 3, seed=0)
    >>> trace.picked.tolist(), trace.covers.tolist()
    ([[2, 3], [2, 3], [2, 3]], [True, True, True])
    """
    true_counts = check_count_matrix("counts", counts, sparse=True)
    seen = true_counts
    if server_counts is not None:
        seen = check_count_matrix("server_counts", server_counts, allow_negative=True, sparse=True)
    if seen.shape != true_counts.shape:
        allowed = f"a matrix of the shape of counts {true_counts.shape}"
        raise ParameterError(None, "server_counts", server_counts, allowed, got=f"shape {seen.shape}")
    if isinstance(selector, str):
        selector = make_selector(selector)
    if not isinstance(selector, Selector):
        allowed = "a fedlib.selection.selectors.Selector or a selector name"
        raise ParameterError(None, "selector", selector, allowed, got=f"type {type(selector).__name__}")
    clients_per_round = check_int("clients_per_round", clients_per_round, low=1)
    num_rounds = check_int("num_rounds", num_rounds, low=1)
    rng = _generator(seed)
    state = selector.initial_state(true_counts.shape[0])
    picked = np.full((num_rounds, clients_per_round), -1, dtype=np.int64)
    entropy, covers = np.zeros(num_rounds), np.zeros(num_rounds, dtype=bool)
    for r in range(num_rounds):
        chosen, state = selector.select(seen, clients_per_round, state, rng)
        picked[r, : chosen.size] = chosen
        entropy[r], covers[r] = _round_metrics(true_counts, chosen)
    _freeze(picked, entropy, covers)
    return SelectionTrace(picked, entropy, covers, true_counts.shape[0], state)


def coverage_probability(counts, clients_per_round: int, num_rounds: int, *, seed) -> float:
    """Monte Carlo probability that M uniformly random clients together hold every class (v1, §V-B5), over
    ``num_rounds`` rounds; each draws the M smallest of K uniform keys from ``seed`` (a Generator or an int).

    >>> counts = np.array([[5, 0], [0, 5], [3, 3]])
    >>> coverage_probability(counts, 3, 10, seed=0)
    1.0
    """
    arr = check_count_matrix("counts", counts, sparse=True)
    num_clients, num_classes = arr.shape
    clients_per_round = check_int("clients_per_round", clients_per_round, low=1)
    if clients_per_round > num_clients:
        allowed = f"an integer >= 1 and <= the number of clients K={num_clients}"
        raise ParameterError(None, "clients_per_round", clients_per_round, allowed)
    num_rounds = check_int("num_rounds", num_rounds, low=1)
    rng = _generator(seed)
    holds = sp.csr_array(arr > 0) if sp.issparse(arr) else arr > 0
    # Chunks of rounds bound the (rounds, K) keys and the (rounds, M, C) class table to ~2^23 entries each;
    # the keys are one stream, so the chunk size does not change the draws.
    chunk = max(1, min(1024, (1 << 23) // num_clients, (1 << 23) // (clients_per_round * num_classes)))
    hits = 0
    for start in range(0, num_rounds, chunk):
        keys = rng.random((min(chunk, num_rounds - start), num_clients))
        subsets = np.argpartition(keys, clients_per_round - 1, axis=1)[:, :clients_per_round]
        hits += int(_covers_all(holds, subsets).sum())
    return hits / num_rounds


def _covers_all(holds, subsets: np.ndarray) -> np.ndarray:
    """Per row of ``subsets`` (client indices): do those clients together hold every class?"""
    if not sp.issparse(holds):
        return holds[subsets].any(axis=1).all(axis=1)
    rounds, num_classes = subsets.shape[0], holds.shape[1]
    picked = holds[subsets.ravel()].tocoo()  # row r * M + j: client subsets[r, j]
    covered = np.zeros((rounds, num_classes), dtype=bool)
    covered[picked.row // subsets.shape[1], picked.col] = True
    return covered.all(axis=1)


def trace_frame(trace: SelectionTrace, **labels):
    """One row per round as a pandas DataFrame: round, entropy, covers, num_picked, plus constant ``labels``.

    >>> trace = run_selection(np.eye(3) * 4, "random", 2, 2, seed=0)
    >>> list(trace_frame(trace, method="random").columns)
    ['round', 'entropy', 'covers', 'num_picked', 'method']
    """
    import pandas as pd

    frame = pd.DataFrame(
        {
            "round": np.arange(1, trace.entropy.size + 1),
            "entropy": trace.entropy,
            "covers": trace.covers,
            "num_picked": (trace.picked >= 0).sum(axis=1),
        }
    )
    for key, value in labels.items():
        frame[key] = value
    return frame
