"""Cross-device federations: label counts of up to 10^6 clients, and FedEntOpt against random selection on them.

The paper's federations hold at most 200 clients. Here the counts come straight from the Dir(beta) partitioner's
count step (:mod:`fedlib.data.partition`), without dealing out sample indices, and can be returned as a
``scipy.sparse`` matrix, so that K = 10^6 needs no dense K x C array. Selection runs through
:func:`fedlib.label_only.simulate.run_selection` (FedEntOpt's incremental scorer, :mod:`fedlib.selection.scoring`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from fedlib._validate import ParameterError, check_float, check_int
from fedlib.data.partition import _dirichlet_proportions
from fedlib.label_only.simulate import run_selection
from fedlib.selection.selectors import make_selector

__all__ = ["dirichlet_counts", "participation_gini", "cross_device_study"]


def dirichlet_counts(
    num_clients: int,
    num_classes: int,
    *,
    seed: int,
    samples_per_client: int = 500,
    beta: float = 0.1,
    min_partition_size: int = 0,
    max_redraws: int = 100,
    sparse: bool = False,
):
    """(K, C) label counts of a Dir(beta) partition of a balanced data set of ``samples_per_client * K`` samples.

    Each of the C classes holds ``samples_per_client * K // C`` samples and is dealt to the clients exactly as
    :func:`fedlib.data.partition.dirichlet_partition` deals it (shares ~ Dir_K(beta), NIID-Bench's balance step,
    redraws while a client holds fewer than ``min_partition_size`` samples), so the result equals
    ``client_label_counts(labels_from_counts([N // C] * C), "dirichlet", K, seed=seed, beta=beta, ...)``;
    only the sample indices are never drawn. At K >= 1,000 and beta = 0.1 a few clients draw nothing, so the
    default ``min_partition_size`` is 0.

    Returns an int64 ``numpy.ndarray``, or with ``sparse=True`` a ``scipy.sparse.csr_array`` (int64 values,
    built class by class: memory in proportion to the non-zeros).

    Examples
    --------
    >>> m = dirichlet_counts(1000, 10, seed=0, sparse=True)
    >>> m.shape, int(m.sum()), bool(m.nnz < 1000 * 10)
    ((1000, 10), 500000, True)
    """
    num_clients = check_int("num_clients", num_clients, low=1)
    num_classes = check_int("num_classes", num_classes, low=1)
    samples_per_client = check_int("samples_per_client", samples_per_client, low=1)
    beta = check_float("beta", beta, low=0.0, low_open=True)
    min_size = check_int("min_partition_size", min_partition_size, low=0)
    max_redraws = check_int("max_redraws", max_redraws, low=0)
    class_size = samples_per_client * num_clients // num_classes
    if class_size * num_classes < num_clients * min_size:
        total = class_size * num_classes
        raise ParameterError(
            "dirichlet_counts",
            "min_partition_size",
            min_size,
            f"at most {total // num_clients} ({total} samples over num_clients={num_clients})",
            hint=f"It needs at least {num_clients * min_size} samples; lower it or raise samples_per_client.",
        )
    rng = np.random.default_rng(check_int("seed", seed, low=0))
    for _ in range(max_redraws + 1):
        indptr, indices, data, sizes = _draw_columns(class_size, num_classes, num_clients, beta, rng)
        if int(sizes.min()) >= min_size:
            counts = sp.csc_array((data, indices, indptr), shape=(num_clients, num_classes)).tocsr()
            return counts if sparse else counts.toarray()
    raise ParameterError(
        "dirichlet_counts",
        "min_partition_size",
        min_size,
        f"a size the draws reach (the smallest client still held {int(sizes.min())} after {max_redraws} redraws)",
        hint=f"Lower min_partition_size or raise beta (got {beta}).",
    )


def _draw_columns(class_size: int, num_classes: int, num_clients: int, beta: float, rng):
    """One Dir(beta) draw, class by class as :func:`fedlib.data.partition._dirichlet_counts`, kept as CSC columns."""
    num_samples = class_size * num_classes
    sizes = np.zeros(num_clients, dtype=np.int64)
    indptr, indices, data = [0], [], []
    for _ in range(num_classes):
        if class_size == 0:
            indptr.append(indptr[-1])
            continue
        p = _dirichlet_proportions(sizes, num_samples, num_clients, beta, rng)
        cum = np.cumsum(p)
        cuts = np.minimum((cum[:-1] / cum[-1] * class_size).astype(np.int64), class_size)
        column = np.diff(cuts, prepend=0, append=class_size)
        sizes += column
        holders = np.flatnonzero(column)
        indices.append(holders.astype(np.int32))
        data.append(column[holders])
        indptr.append(indptr[-1] + holders.size)
    cat = lambda parts, dtype: np.concatenate(parts) if parts else np.zeros(0, dtype)  # noqa: E731
    return np.array(indptr, dtype=np.int64), cat(indices, np.int32), cat(data, np.int64), sizes


def participation_gini(times_picked) -> float:
    """Gini coefficient of how often each client was picked: 0 = all equally often, -> 1 = a few take all.

    ``G = sum_i (2 i - K - 1) x_(i) / (K sum_i x_i)`` over the sorted counts ``x_(1) <= ... <= x_(K)``.

    >>> participation_gini([3, 3, 3, 3]), participation_gini([0, 0, 0, 4])
    (0.0, 0.75)
    """
    x = np.sort(np.asarray(times_picked, dtype=float).ravel())
    if x.size == 0 or x.sum() <= 0:
        raise ParameterError(None, "times_picked", times_picked, "pick counts with at least one pick")
    i = np.arange(1, x.size + 1)
    return float(((2 * i - x.size - 1) * x).sum() / (x.size * x.sum()))


def cross_device_study(
    *,
    pool_sizes: Sequence[int],
    methods: Mapping[str, tuple[str, dict]],
    clients_per_round: int,
    num_rounds: int,
    seeds: Sequence[int],
    num_classes: int = 10,
    samples_per_client: int = 500,
    beta: float = 0.1,
):
    """FedEntOpt and other selectors on cross-device federations: entropy per round and spread of participation.

    For every pool size K and seed, one federation :func:`dirichlet_counts` (sparse; partition seed
    ``seed``) is drawn, and every method of ``methods`` (display name -> ``(selector name, params)``) runs
    ``num_rounds`` rounds of ``clients_per_round`` picks with selection seed ``seed + 1``.

    Returns ``(rounds, participation)``: ``rounds`` has one row per (K, method, seed, round) with the pooled
    entropy in bits and whether the picks cover every class; ``participation`` one row per (K, method, seed)
    with ``never_picked_share``, ``gini`` (:func:`participation_gini`), ``h_norm`` (v2 §V-E), ``max_times``
    (most picks of one client), ``times_hist`` (a dict: times picked -> number of clients),
    ``seconds_per_round`` (wall time of the selection and its measurements, this machine) and ``times_picked``
    (the array of picks per client).
    """
    import pandas as pd

    rounds, summary = [], []
    for num_clients in pool_sizes:
        for seed in seeds:
            counts = dirichlet_counts(
                num_clients, num_classes, seed=seed, samples_per_client=samples_per_client, beta=beta, sparse=True
            )
            for name, (selector, params) in methods.items():
                start = time.perf_counter()
                trace = run_selection(
                    counts, make_selector(selector, **params), clients_per_round, num_rounds, seed=seed + 1
                )
                seconds = time.perf_counter() - start
                rounds.append(
                    pd.DataFrame(
                        {
                            "num_clients": num_clients,
                            "method": name,
                            "seed": seed,
                            "round": np.arange(1, num_rounds + 1),
                            "entropy": trace.entropy,
                            "covers": trace.covers,
                        }
                    )
                )
                times = trace.selection_counts
                values, freq = np.unique(times, return_counts=True)
                summary.append(
                    {
                        "num_clients": num_clients,
                        "method": name,
                        "seed": seed,
                        "never_picked_share": float(np.mean(times == 0)),
                        "gini": participation_gini(times),
                        "h_norm": trace.h_norm,
                        "max_times": int(times.max()),
                        "times_hist": dict(zip(values.tolist(), freq.tolist())),
                        "seconds_per_round": seconds / num_rounds,
                        "times_picked": times,
                    }
                )
    return pd.concat(rounds, ignore_index=True), pd.DataFrame(summary)
