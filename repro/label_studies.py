"""Label-only studies of the FedEntOpt paper (Fig. 1, Table VI's H_norm, large-pool coverage) as tidy tables.

Each study needs only which client holds which labels, so it runs at full paper scale from class counts:
the partition is drawn from a label profile (:mod:`fedlib.data.profiles`), the selectors run on the count matrix
(:mod:`fedlib.label_only.simulate`), and the results come back as pandas DataFrames for the notebooks to plot.

Randomness comes from the seed streams of the trainer (:mod:`fedlib.seeds`): the federation of ``seed`` is
drawn from its ``partition`` stream, the selectors from its ``selection`` stream, DP noise from its ``label_dp``
stream.  So a label-only page and a training page with the same seed, data set, K and partition hold the same
federation, and the selectors pick the same clients there.  Partitions are named in the notation of
:func:`fedlib.data.partition.parse_partition`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from fedlib._validate import check_float
from fedlib.data.partition import client_label_counts
from fedlib.label_only.simulate import coverage_probability, run_selection
from fedlib.seeds import stream_rng
from fedlib.selection.privacy import laplace_counts
from fedlib.selection.selectors import make_selector

__all__ = [
    "federation_counts",
    "selector_traces",
    "buffer_study",
    "coverage_study",
    "algorithm1_round_sizes",
    "empty_client_draws",
]


def federation_counts(
    profile: str, scheme: str, num_clients: int, seed: int, *, beta=None, classes_per_client=None, max_redraws=1_000_000
):
    """The (K, C) label-count matrix of one federation (the ``partition`` stream of ``seed``, as in training).

    ``max_redraws`` caps the Dirichlet redraws that enforce the minimum client size (10), as in
    :func:`fedlib.data.partition.dirichlet_partition` (NIID-Bench's loop has no cap; CIFAR-10 with K = 200 accepts about
    one draw in 400). The accepted draw is the first that meets the minimum, whatever the cap.
    """
    return client_label_counts(
        profile,
        scheme,
        num_clients,
        seed=stream_rng(seed, "partition"),
        beta=beta,
        classes_per_client=classes_per_client,
        max_redraws=max_redraws,
    )


def _server_counts(counts, epsilon, seed):
    if epsilon is None:
        return None
    epsilon = check_float("epsilon", epsilon, low=0.0, low_open=True)
    return laplace_counts(counts, epsilon, rng=stream_rng(seed, "label_dp"))


def selector_traces(
    profile: str,
    scheme: str,
    *,
    methods: Mapping[str, tuple[str, dict]],
    num_clients: int,
    clients_per_round: int,
    num_rounds: int,
    seeds: Sequence[int],
    beta=None,
    classes_per_client=None,
    epsilon=None,
):
    """Per-round entropy and coverage of each method's picks (Fig. 1), one row per (method, seed, round).

    ``methods`` maps a display name to ``(selector name, selector params)`` for :func:`make_selector`.
    ``epsilon`` (optional) noises the counts the selectors see with the Laplace mechanism; entropy and
    coverage are always measured on the true counts.
    """
    import pandas as pd

    frames = []
    for seed in seeds:
        counts = federation_counts(profile, scheme, num_clients, seed, beta=beta, classes_per_client=classes_per_client)
        seen = _server_counts(counts, epsilon, seed)
        for name, (selector, params) in methods.items():
            trace = run_selection(
                counts,
                make_selector(selector, **params),
                clients_per_round,
                num_rounds,
                seed=stream_rng(seed, "selection"),
                server_counts=seen,
            )
            frames.append(
                pd.DataFrame(
                    {
                        "method": name,
                        "seed": seed,
                        "round": np.arange(1, num_rounds + 1),
                        "entropy": trace.entropy,
                        "covers": trace.covers,
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)


def buffer_study(
    profile: str,
    scheme: str,
    *,
    buffer_fractions: Sequence[float],
    num_clients: int,
    clients_per_round: int,
    num_rounds: int,
    seeds: Sequence[int],
    beta=None,
    classes_per_client=None,
):
    """H_norm of FedEntOpt's client picks for each buffer size Q (Table VI), plus how often each client was picked.

    Returns ``(summary, counts)``: ``summary`` has one row per (buffer fraction, seed) with ``h_norm``,
    ``mean_entropy``, ``coverage`` and ``never_picked``; ``counts`` one row per (buffer fraction, seed, client)
    with ``times_picked``.
    """
    import pandas as pd

    rows, count_frames = [], []
    for seed in seeds:
        counts = federation_counts(profile, scheme, num_clients, seed, beta=beta, classes_per_client=classes_per_client)
        for fraction in buffer_fractions:
            selector = make_selector("fedentopt", buffer_fraction=fraction)
            trace = run_selection(counts, selector, clients_per_round, num_rounds, seed=stream_rng(seed, "selection"))
            times = trace.selection_counts
            rows.append(
                {
                    "buffer_pct": round(100 * fraction),
                    "seed": seed,
                    "buffer_size": selector.resolve_buffer_size(num_clients, clients_per_round),
                    "h_norm": trace.h_norm,
                    "mean_entropy": float(trace.entropy.mean()),
                    "coverage": float(trace.covers.mean()),
                    "never_picked": int((times == 0).sum()),
                }
            )
            count_frames.append(
                pd.DataFrame(
                    {
                        "buffer_pct": round(100 * fraction),
                        "seed": seed,
                        "client": np.arange(num_clients),
                        "times_picked": times,
                    }
                )
            )
    return pd.DataFrame(rows), pd.concat(count_frames, ignore_index=True)


def coverage_study(
    profile: str,
    *,
    pool_sizes: Sequence[int],
    subset_sizes: Sequence[int],
    num_rounds: int,
    seeds: Sequence[int],
    beta: float,
    buffer_fraction: float,
    max_redraws: int = 1000,
):
    """Probability that the picked clients hold every class: uniform random subsets vs FedEntOpt (v1 §V-B5).

    One row per (pool size K, subset size M, seed) under Dir(``beta``), with ``random_coverage`` (Monte Carlo
    over ``num_rounds`` random subsets) and ``fedentopt_coverage`` (fraction of FedEntOpt's rounds that cover).
    """
    import pandas as pd

    rows = []
    for seed in seeds:
        for num_clients in pool_sizes:
            counts = federation_counts(profile, "dirichlet", num_clients, seed, beta=beta, max_redraws=max_redraws)
            for m in subset_sizes:
                selector = make_selector("fedentopt", buffer_fraction=buffer_fraction)
                trace = run_selection(counts, selector, m, num_rounds, seed=stream_rng(seed, "selection"))
                rows.append(
                    {
                        "num_clients": num_clients,
                        "clients_per_round": m,
                        "seed": seed,
                        "random_coverage": coverage_probability(
                            counts, m, num_rounds, seed=stream_rng(seed, "coverage")
                        ),
                        "fedentopt_coverage": float(trace.covers.mean()),
                        "fedentopt_mean_entropy": float(trace.entropy.mean()),
                    }
                )
    return pd.DataFrame(rows)


def algorithm1_round_sizes(counts, clients_per_round: int, buffer_size: int, num_rounds: int, *, rng) -> np.ndarray:
    """Clients picked in each of ``num_rounds`` rounds of Algorithm 1 of v2 as printed, for any buffer size Q.

    Line by line: U = A minus B; the first pick uniform from U, the others the argmax of eq. (5) over U (lowest
    index on ties); each pick appended to the FIFO buffer B, the oldest removed while |B| > Q; a round stops short
    where U is empty.  Unlike :class:`fedlib.selection.selectors.FedEntOptSelector` it takes Q beyond the paper's
    ``0 < Q <= K - M`` (Q from 0 to K), so that what a larger Q does can be read off.  ``rng``: a Generator.

    Examples
    --------
    >>> algorithm1_round_sizes(np.eye(4), 2, 4, 3, rng=np.random.default_rng(0)).tolist()  # Q = K: B fills up
    [2, 2, 0]
    """
    from fedlib.selection.metrics import entropy_bits

    arr = np.asarray(counts, dtype=float)
    num_clients = arr.shape[0]
    buffer, sizes = [], np.zeros(int(num_rounds), dtype=np.int64)
    for r in range(int(num_rounds)):
        pooled, available = np.zeros(arr.shape[1]), np.ones(num_clients, dtype=bool)
        for i in range(int(clients_per_round)):
            free = available.copy()
            free[buffer] = False
            candidates = np.flatnonzero(free)
            if candidates.size == 0:
                break
            if i == 0:
                pick = int(rng.choice(candidates))
            else:
                pick = int(candidates[np.argmax(entropy_bits(pooled + arr[candidates], axis=1))])
            buffer.append(pick)
            while len(buffer) > buffer_size:
                buffer.pop(0)
            pooled += arr[pick]
            available[pick] = False
            sizes[r] += 1
    return sizes


def empty_client_draws(profile: str, num_clients: int, seed: int, *, beta: float, draws: int) -> float:
    """Share of ``draws`` single Dir(``beta``) draws of a K-client federation (no redraw: minimum client size 0,
    :func:`fedlib.data.partition.client_label_counts`) that leave some client without a sample.  The draws come one
    after another from the ``partition`` stream of ``seed``, so the first is the federation a run would start
    from before any redraw."""
    rng = stream_rng(seed, "partition")
    empty = 0
    for _ in range(int(draws)):
        counts = client_label_counts(
            profile, "dirichlet", num_clients, seed=rng, beta=beta, min_partition_size=0, max_redraws=0
        )
        empty += bool((counts.sum(axis=1) == 0).any())
    return empty / int(draws)
