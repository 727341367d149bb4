"""FedEntOpt with swap-improved picks, the selector ``"fedentopt-swap"`` of the greedy-gap study (not in the paper).

Importing this module registers it with :func:`fedlib.selection.selectors.register_selector`; ``repro/__init__.py``
imports it, so every process that imports anything of ``repro`` (pool workers and Ray tasks included) knows the name.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from fedlib._validate import ParameterError
from fedlib.selection.selectors import FedEntOptSelector, register_selector
from repro.best_subset import round_candidates, swap_search

__all__ = ["SwapImprovedSelector"]


def _fifo_push(buffer: deque, picks, buffer_size: int) -> None:
    """Algorithm 1's buffer update (lines 10-12) for ``picks`` in order; each must be unbuffered at its step."""
    for m in picks:
        if m in buffer:
            raise AssertionError(f"client {m} is still buffered at its step; the pick order is infeasible")
        buffer.append(m)
        while len(buffer) > buffer_size:
            buffer.popleft()


@register_selector
@dataclass(frozen=True)
class SwapImprovedSelector(FedEntOptSelector):
    """FedEntOpt with each round's greedy pick improved by :func:`~repro.best_subset.swap_search` among the round's
    candidates; the rng is drawn from as by FedEntOpt. The picks enter the buffer in an order Algorithm 1 can pick
    them in (unbuffered ascending, then buffered oldest first). No defence options.

    >>> counts = np.array([[4, 0, 0], [3, 1, 0], [0, 0, 4], [0, 4, 0]])
    >>> SwapImprovedSelector(buffer_size=0).select(counts, 2, (), np.random.default_rng(1))[0].tolist()
    [1, 2]
    """

    name: ClassVar[str] = "fedentopt-swap"

    def __post_init__(self):
        super().__post_init__()
        for name in ("total_cap_quantile", "share_cap"):
            if getattr(self, name) is not None:
                raise ParameterError(
                    f"selector {self.name!r}",
                    name,
                    getattr(self, name),
                    "None (the swap-improved selector takes no defence options)",
                )

    def __repr__(self):
        return super().__repr__().replace("FedEntOptSelector", "SwapImprovedSelector")

    def _select(self, counts, clients_per_round, state, rng):
        q = self.resolve_buffer_size(counts.shape[0], clients_per_round)
        candidates = round_candidates(state, counts.shape[0], clients_per_round, q)
        greedy, _ = super()._select(counts, clients_per_round, state, rng)
        subset = swap_search(counts, np.sort(greedy), candidates=candidates).subset
        position = {b: i for i, b in enumerate(state)}
        order = sorted(subset.tolist(), key=lambda k: (k in position, position.get(k, k)))
        buffer = deque(state)
        _fifo_push(buffer, order, q)
        return order, tuple(buffer)
