"""Clients that lie about their label counts: threat models, the buffer's bound, label-only study.

FedEntOpt picks clients from the label counts they upload (Algorithm 1 of the v2 paper); §VI names the risk that
"adversarial clients could still misguide the client selection".  A *liar* uploads fabricated counts
(:data:`REPORTS`, :func:`liar_counts`):

``"uniform"`` (threat a)
    ``inflation * n_k`` samples spread evenly over all C classes (:func:`uniform_report`), ``n_k`` being the
    number of samples the liar really holds.  A flat vector of large mass is what eq. (5) rewards most.
``"rarest"`` (threat b)
    the same inflated total poured into the classes that are rarest in the pool of the honest reports
    (:func:`rarest_report`: water-filling against the pool's class proportions), i.e. the liar claims exactly
    what the federation lacks.  This assumes the liar knows the honest clients' class totals (a strong adversary).
``"scaled"`` (threat c)
    its true counts times ``inflation`` (:func:`scaled_report`, rounded to integers).

Its real data (:data:`DATA_KINDS`, :func:`liar_data_counts`, :func:`liar_labels`) may be ``"honest"`` (kept),
``"single"`` (every sample relabelled to the liar's most frequent class) or ``"flipped"`` (label ``y`` becomes
``C - 1 - y``, a fixed permutation without fixed points for even C).  The liar's "true counts" are those of the
data it really holds after this change; entropies are measured on them.

The buffer's bound (:func:`participation_bound`)
-------------------------------------------------
Number the picks of a run globally, ``p = r * M + j`` for step ``j`` of round ``r`` (both from 0).
:class:`fedlib.selection.selectors.FedEntOptSelector` appends every *pick* to the FIFO buffer and evicts the oldest
while ``|B| > Q``, so after pick ``p`` the buffer holds picks ``p - Q + 1 ... p``: a client picked at ``p`` is
excluded from picks ``p + 1 ... p + Q``, and from the rest of its round.  Two picks ``p < p'`` of one client
therefore satisfy ``p' >= p + Q + 1`` and lie in different rounds.  ``n`` picks within ``R`` rounds (indices
``0 ... R M - 1``) thus need ``(n - 1)(Q + 1) <= R M - 1`` and ``n <= R``:

    N_max(R) = min(R, ceil(R M / (Q + 1))).

The bound holds for any window of ``R`` consecutive rounds, whatever the counts, and it is attained: picks at
``0, Q + 1, 2(Q + 1), ...`` (when ``Q + 1 >= M``) or at step 0 of every round (when ``Q + 1 <= M``) respect both
rules.  A client that is always the best candidate once free (a uniform report of huge mass) is picked at the
first *greedy* step at which it is free; only the random first pick (step 0) can take it earlier.  Its count
without help from the random first pick is :func:`greedy_liar_rounds`; it equals ``N_max`` when ``Q < M``, and
when ``M`` divides ``Q + 1`` and ``(Q + 1) / M`` divides ``R``; otherwise it lies at most a few picks below.  For
the paper's K = 100, M = 10, R = 500: Q = 0 gives 500 rounds (every round), Q = K/10 = 10 gives 455 and
Q = K/2 = 50 gives 99, against the fair share R M / K = 50 of a client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from fedlib._validate import ParameterError, check_choice, check_count_matrix, check_float, check_int
from fedlib.seeds import stream_rng

__all__ = [
    "REPORTS",
    "DATA_KINDS",
    "LiarSpec",
    "uniform_report",
    "rarest_report",
    "scaled_report",
    "flip_labels",
    "liar_labels",
    "liar_data_counts",
    "liar_counts",
    "choose_liars",
    "participation_bound",
    "greedy_liar_rounds",
    "liar_shares",
    "share_table",
    "share_summary",
]

#: What a liar uploads (threats a, b and c).
REPORTS = ("uniform", "rarest", "scaled")
#: What a liar really holds.
DATA_KINDS = ("honest", "single", "flipped")

# ----------------------------------------------------------------------------------------------------
# threat models


def uniform_report(total: int, num_classes: int) -> np.ndarray:
    """``total`` samples as evenly as possible over ``num_classes`` classes (the remainder goes to the lowest
    classes), as int64.

    Examples
    --------
    >>> uniform_report(23, 5).tolist()
    [5, 5, 5, 4, 4]
    """
    total = check_int("total", total, low=0)
    num_classes = check_int("num_classes", num_classes, low=1)
    out = np.full(num_classes, total // num_classes, dtype=np.int64)
    out[: total % num_classes] += 1
    return out


def rarest_report(pool_totals, total: int) -> np.ndarray:
    """``total`` samples poured into the classes rarest in the pool (water-filling), as int64.

    With ``base = total * T / sum(T)`` (the pool's class totals ``T`` rescaled to the liar's total), the report
    is ``l_c = max(0, h - base_c)`` with the level ``h`` such that ``sum(l) = total``: ``base + l`` is flat on
    every class it reaches.  Integers: each ``l_c`` is rounded down and the missing samples go one each to the
    classes with the largest remainders (ties: lowest class).  An all-zero pool gives :func:`uniform_report`.

    Examples
    --------
    Pool (6, 2, 0, 0), total 8: base (6, 2, 0, 0), level h = 10/3, l = (0, 4/3, 10/3, 10/3) -> (0, 2, 3, 3)
    (remainders 1/3 each: the lowest class with a remainder, class 1, gets the one missing sample).

    >>> rarest_report([6, 2, 0, 0], 8).tolist()
    [0, 2, 3, 3]
    >>> rarest_report([1, 1, 1], 7).tolist()  # a balanced pool: the uniform report
    [3, 2, 2]
    """
    t = np.asarray(pool_totals, dtype=float)
    if t.ndim != 1 or t.size < 1 or not np.all(np.isfinite(t)) or np.any(t < 0):
        raise ParameterError(None, "pool_totals", pool_totals, "a 1-D vector of finite non-negative class totals")
    total = check_int("total", total, low=0)
    if t.sum() == 0:
        return uniform_report(total, t.size)
    base = total * t / t.sum()
    order = np.sort(base)
    # the level h fills the j lowest classes: h = (total + sum of their bases) / j, valid while h <= next base
    csum = np.cumsum(order)
    j = np.arange(1, t.size + 1)
    levels = (total + csum) / j
    nxt = np.append(order[1:], np.inf)
    h = levels[np.argmax(levels <= nxt)]
    fill = np.maximum(h - base, 0.0)
    out = np.floor(fill + 1e-9).astype(np.int64)
    missing = total - int(out.sum())
    frac = fill - out
    for c in np.lexsort((np.arange(t.size), -frac))[:missing]:  # largest remainder first, then lowest class
        out[c] += 1
    return out


def scaled_report(true_counts, factor: float) -> np.ndarray:
    """``rint(factor * true_counts)`` as int64.

    >>> scaled_report([3, 0, 1], 2.5).tolist()
    [8, 0, 2]
    """
    factor = check_float("inflation", factor, low=1.0)
    return np.rint(factor * np.asarray(true_counts, dtype=float)).astype(np.int64)


def flip_labels(labels, num_classes: int) -> np.ndarray:
    """Label flipping ``y -> C - 1 - y``.

    >>> flip_labels([0, 1, 9], 10).tolist()
    [9, 8, 0]
    """
    num_classes = check_int("num_classes", num_classes, low=1)
    y = np.asarray(labels, dtype=np.int64)
    return num_classes - 1 - y


def liar_labels(labels, data: str, num_classes: int) -> np.ndarray:
    """The labels a liar really holds: ``labels`` (honest), all its most frequent label (single; ties: lowest),
    or :func:`flip_labels` (flipped).

    >>> liar_labels([2, 1, 1, 2], "single", 3).tolist()
    [1, 1, 1, 1]
    """
    check_choice("data", data, DATA_KINDS)
    y = np.asarray(labels, dtype=np.int64)
    if data == "flipped":
        return flip_labels(y, num_classes)
    if data == "single" and y.size:
        return np.full_like(y, int(np.argmax(np.bincount(y, minlength=num_classes))))
    return y.copy()


def liar_data_counts(counts, data: str) -> np.ndarray:
    """A liar's count vector after :func:`liar_labels` (label-only: no samples needed).

    >>> liar_data_counts([1, 4, 0, 2], "flipped").tolist(), liar_data_counts([1, 4, 0, 2], "single").tolist()
    ([2, 0, 4, 1], [0, 7, 0, 0])
    """
    check_choice("data", data, DATA_KINDS)
    v = np.asarray(counts)
    if data == "flipped":
        return v[::-1].copy()
    if data == "single":
        out = np.zeros_like(v)
        out[int(np.argmax(v))] = v.sum()
        return out
    return v.copy()


@dataclass(frozen=True)
class LiarSpec:
    """Who lies and how.

    Parameters
    ----------
    num_liars : int
        How many clients lie (0 <= num_liars <= K; chosen uniformly by :func:`choose_liars`).
    report : {"uniform", "rarest", "scaled"}
        What they upload (see the module docstring).
    inflation : float
        >= 1: the reported total is ``round(inflation * n_k)`` (uniform, rarest) or the true counts times it
        (scaled).
    data : {"honest", "single", "flipped"}
        What they really hold.

    Examples
    --------
    >>> LiarSpec(2, "uniform", 10, "flipped").label()
    '2 liars: uniform x10, flipped data'
    """

    num_liars: int = 1
    report: str = "uniform"
    inflation: float = 10.0
    data: str = "honest"

    def __post_init__(self):
        check_int("num_liars", self.num_liars, low=0)
        check_choice("report", self.report, REPORTS)
        check_float("inflation", self.inflation, low=1.0)
        check_choice("data", self.data, DATA_KINDS)

    def to_dict(self) -> dict:
        return {k: (float(v) if k == "inflation" else v) for k, v in asdict(self).items()}

    def label(self) -> str:
        who = f"{self.num_liars} liar{'s' if self.num_liars != 1 else ''}"
        return f"{who}: {self.report} x{self.inflation:g}, {self.data} data"


def choose_liars(num_clients: int, num_liars: int, seed: int) -> np.ndarray:
    """The liars of run ``seed``: ``num_liars`` distinct clients, sorted, from the seed's ``liars`` stream
    (:data:`fedlib.seeds.STREAMS`).

    >>> choose_liars(10, 3, 0).tolist() == choose_liars(10, 3, 0).tolist()
    True
    """
    num_clients = check_int("num_clients", num_clients, low=1)
    num_liars = check_int("num_liars", num_liars, low=0, high=num_clients)
    rng = stream_rng(seed, "liars")
    return np.sort(rng.choice(num_clients, size=num_liars, replace=False)).astype(np.int64)


def liar_counts(true_counts, spec: LiarSpec, liars) -> tuple[np.ndarray, np.ndarray]:
    """``(data_counts, reported_counts)``, both (K, C) int64: what every client holds and what it uploads.

    Honest clients hold and report their ``true_counts``.  Liars hold :func:`liar_data_counts` and report the
    spec's fabrication of it (the pool of :func:`rarest_report` is the honest clients' class totals).

    Examples
    --------
    >>> data, rep = liar_counts([[4, 0], [0, 2], [1, 1]], LiarSpec(1, "uniform", 3, "flipped"), [0])
    >>> data.tolist(), rep.tolist()
    ([[0, 4], [0, 2], [1, 1]], [[6, 6], [0, 2], [1, 1]])
    """
    counts = check_count_matrix("true_counts", true_counts)
    if not np.array_equal(counts, np.rint(counts)):
        i, j = np.argwhere(counts != np.rint(counts))[0]
        allowed = "a count matrix of whole numbers of samples"
        raise ParameterError(None, "true_counts", true_counts, allowed, got=f"{counts[i, j]} for client {i}, class {j}")
    counts = counts.astype(np.int64)
    liars = np.unique(np.asarray(liars, dtype=np.int64))
    if liars.size and (liars[0] < 0 or liars[-1] >= counts.shape[0]):
        raise ParameterError(None, "liars", liars.tolist(), f"client indices in [0, {counts.shape[0] - 1}]")
    data = counts.copy()
    for k in liars:
        data[k] = liar_data_counts(counts[k], spec.data)
    reported = data.copy()
    honest = np.ones(counts.shape[0], dtype=bool)
    honest[liars] = False
    pool = data[honest].sum(axis=0)
    for k in liars:
        total = int(round(spec.inflation * int(data[k].sum())))
        if spec.report == "uniform":
            reported[k] = uniform_report(total, counts.shape[1])
        elif spec.report == "rarest":
            reported[k] = rarest_report(pool, total)
        else:
            reported[k] = scaled_report(data[k], spec.inflation)
    return data, reported


# ----------------------------------------------------------------------------------------------------
# the buffer's bound


def participation_bound(num_rounds: int, clients_per_round: int, buffer_size: int) -> int:
    """``min(R, ceil(R M / (Q + 1)))``: the most rounds, among any R consecutive ones, that FedEntOpt with buffer
    size Q and M picks per round can give one client (see the module docstring).

    Examples
    --------
    >>> [participation_bound(500, 10, q) for q in (0, 10, 50)]
    [500, 455, 99]
    >>> participation_bound(7, 3, 3)  # picks 0, 4, 8, 12, 16, 20 of 21: 6 of 7 rounds
    6
    """
    r = check_int("num_rounds", num_rounds, low=0)
    m = check_int("clients_per_round", clients_per_round, low=1)
    q = check_int("buffer_size", buffer_size, low=0)
    return min(r, -(-r * m // (q + 1)))


def greedy_liar_rounds(num_rounds: int, clients_per_round: int, buffer_size: int) -> int:
    """Rounds of R in which a client that is the best candidate whenever it is free, but never the random first
    pick, is picked: at the first greedy step (j >= 1) after it leaves the buffer, from step 1 of round 1 on.

    Examples
    --------
    >>> greedy_liar_rounds(500, 10, 10), greedy_liar_rounds(500, 10, 50)
    (450, 98)
    >>> greedy_liar_rounds(500, 10, 9) == participation_bound(500, 10, 9)  # M divides Q + 1
    True
    """
    r = check_int("num_rounds", num_rounds, low=0)
    m = check_int("clients_per_round", clients_per_round, low=2)
    q = check_int("buffer_size", buffer_size, low=0)
    n, p = 0, 1
    while p < r * m:
        n += 1
        e = max(p + q + 1, (p // m + 1) * m)  # first pick index at which it is free again
        p = e + 1 if e % m == 0 else e
    return n


# ----------------------------------------------------------------------------------------------------
# label-only study


def liar_shares(
    true_counts,
    spec: LiarSpec,
    *,
    clients_per_round: int,
    num_rounds: int,
    buffer_size: int,
    seed: int,
    selector_params: Mapping | None = None,
):
    """One label-only run with liars: per client its rounds, share and whether it lied, plus the run's mean
    pooled entropy of the picks (measured on what the clients really hold).

    The liars are :func:`choose_liars` of ``seed``; the selector is FedEntOpt with ``buffer_size`` and
    ``selector_params`` (e.g. the defences of :mod:`fedlib.selection.defence`); its generator is the seed's
    ``selection``
    stream (:mod:`fedlib.seeds`), as in training.  Returns a DataFrame with one row per client: ``client``,
    ``liar``, ``rounds``, ``share`` (rounds / R), ``bound`` (:func:`participation_bound`), ``mean_entropy``,
    ``coverage`` (share of rounds whose picks hold every class).
    """
    import pandas as pd

    from fedlib.label_only.simulate import run_selection
    from fedlib.selection.selectors import FedEntOptSelector

    counts = check_count_matrix("true_counts", true_counts)
    liars = choose_liars(counts.shape[0], spec.num_liars, seed)
    data, reported = liar_counts(counts, spec, liars)
    selector = FedEntOptSelector(buffer_size=buffer_size, **dict(selector_params or {}))
    trace = run_selection(
        data, selector, clients_per_round, num_rounds, seed=stream_rng(seed, "selection"), server_counts=reported
    )
    rounds = trace.selection_counts
    is_liar = np.zeros(counts.shape[0], dtype=bool)
    is_liar[liars] = True
    return pd.DataFrame(
        {
            "client": np.arange(counts.shape[0]),
            "liar": is_liar,
            "rounds": rounds,
            "share": rounds / num_rounds,
            "bound": participation_bound(num_rounds, clients_per_round, buffer_size),
            "mean_entropy": float(trace.entropy.mean()),
            "coverage": float(trace.covers.mean()),
        }
    )


def share_table(
    profile: str,
    partitions: Sequence[str],
    *,
    threats: Mapping[str, LiarSpec],
    defences: Mapping[str, dict],
    num_clients: int,
    clients_per_round: int,
    num_rounds: int,
    buffer_sizes: Sequence[int],
    seeds: Sequence[int],
):
    """:func:`liar_shares` over partitions x buffer sizes x threats x defences x seeds, one row per run.

    ``partitions``: the paper's names (``"Dir(0.1)"``, ``"C=2"``; :func:`fedlib.data.partition.parse_partition`);
    the federation of each seed is :func:`repro.label_studies.federation_counts` of ``profile``.
    ``threats``
    maps a name to a :class:`LiarSpec` (``num_liars=0``: an honest federation), ``defences`` a name to FedEntOpt
    parameters (``{}``: none).  Columns: partition, Q, threat, defence, seed, ``liar_max``/``liar_mean`` (rounds
    of the most and the mean picked liar), ``honest_mean``/``honest_max`` (rounds of the honest clients),
    ``bound``, ``greedy_liar`` (:func:`greedy_liar_rounds`), ``max_any`` (the most picked client), ``fair``
    (R M / K), ``num_rounds``, ``mean_entropy``, ``coverage``.
    """
    import pandas as pd

    from fedlib.data.partition import parse_partition
    from repro.label_studies import federation_counts

    rows = []
    for part in partitions:
        p = parse_partition(part)
        for seed in seeds:
            counts = federation_counts(
                profile, p["scheme"], num_clients, seed, beta=p["beta"], classes_per_client=p["classes_per_client"]
            )
            for q in buffer_sizes:
                for tname, spec in threats.items():
                    for dname, params in defences.items():
                        f = liar_shares(
                            counts,
                            spec,
                            clients_per_round=clients_per_round,
                            num_rounds=num_rounds,
                            buffer_size=q,
                            seed=seed,
                            selector_params=params,
                        )
                        lr, hr = f.loc[f["liar"], "rounds"], f.loc[~f["liar"], "rounds"]
                        rows.append(
                            {
                                "partition": part,
                                "Q": q,
                                "threat": tname,
                                "defence": dname,
                                "seed": seed,
                                "num_liars": spec.num_liars,
                                "num_rounds": num_rounds,
                                "liar_max": int(lr.max()) if len(lr) else np.nan,
                                "liar_mean": float(lr.mean()) if len(lr) else np.nan,
                                "honest_mean": float(hr.mean()),
                                "honest_max": int(hr.max()),
                                "max_any": int(f["rounds"].max()),
                                "bound": participation_bound(num_rounds, clients_per_round, q),
                                "greedy_liar": greedy_liar_rounds(num_rounds, clients_per_round, q)
                                if clients_per_round > 1
                                else np.nan,
                                "fair": num_rounds * clients_per_round / num_clients,
                                "mean_entropy": float(f["mean_entropy"].iloc[0]),
                                "coverage": float(f["coverage"].iloc[0]),
                            }
                        )
    return pd.DataFrame(rows)


def share_summary(table):
    """:func:`share_table` averaged over seeds, shares as fractions of R: ``liar_share`` (the most picked liar's
    rounds / R, mean over seeds), ``liar_share_max`` (its maximum over seeds), ``honest_share`` (an honest
    client's mean), ``honest_share_max`` (the most picked honest client, maximum over seeds), ``bound_share``,
    ``greedy_share``, ``fair_share`` (M / K), ``mean_entropy`` and ``coverage`` (means over seeds)."""
    keys = ["partition", "Q", "threat", "defence", "num_liars"]
    r = table["num_rounds"]
    g = table.assign(
        liar_share=table["liar_max"] / r,
        honest_share=table["honest_mean"] / r,
        honest_share_max=table["honest_max"] / r,
        bound_share=table["bound"] / r,
        greedy_share=table["greedy_liar"] / r,
        fair_share=table["fair"] / r,
    ).groupby(keys, sort=False)
    return g.agg(
        liar_share=("liar_share", "mean"),
        liar_share_max=("liar_share", "max"),
        honest_share=("honest_share", "mean"),
        honest_share_max=("honest_share_max", "max"),
        bound_share=("bound_share", "first"),
        greedy_share=("greedy_share", "first"),
        fair_share=("fair_share", "first"),
        mean_entropy=("mean_entropy", "mean"),
        coverage=("coverage", "mean"),
        seeds=("seed", "size"),
    ).reset_index()
