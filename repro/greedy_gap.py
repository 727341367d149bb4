"""How far FedEntOpt's greedy pick is from the round's best subset, as tidy tables (a study beyond the paper).

Every round of a FedEntOpt run (:class:`fedlib.selection.selectors.FedEntOptSelector`, its ``selection`` seed stream
as on the other label-only pages) is compared with better subsets of the same round's candidates
(:func:`repro.best_subset.round_candidates`, i.e. given the buffer the greedy run left):

- ``swap``: :func:`repro.best_subset.swap_search` from the greedy pick, a lower bound of the best subset;
- ``exact``: :func:`repro.best_subset.best_subset` within a node budget, on every ``exact_every``-th round; it says
  whether its subset is proven optimal.

:class:`repro.swap_selector.SwapImprovedSelector` is the swap-improved selection as a selector of its own (its
buffer follows its own picks); :func:`improved_run` runs it, for its participation spread H_norm (v2 §V-E) beside
FedEntOpt's."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedlib._validate import check_int
from fedlib.data.partition import parse_partition
from fedlib.label_only.simulate import run_selection
from fedlib.seeds import stream_rng
from fedlib.selection.metrics import entropy_bits
from fedlib.selection.selectors import FedEntOptSelector
from repro.best_subset import GAP_TOL, best_subset, round_candidates, swap_search
from repro.cross_device import dirichlet_counts
from repro.label_studies import federation_counts
from repro.swap_selector import SwapImprovedSelector

__all__ = [
    "STORED",
    "paper_counts",
    "round_gaps",
    "improved_run",
    "growth_gaps",
    "gap_summary",
    "table_path",
    "load_tables",
    "with_best_known",
    "participation_table",
]

#: Where ``scripts/greedy_gap.py`` writes its tables and :func:`load_tables` reads them.
STORED = Path(__file__).resolve().parents[1] / "results" / "greedy_gap"
TABLES = ("paper", "improved", "coverage_sizes", "growth", "training")


def paper_counts(profile: str, partition: str, num_clients: int, seed: int) -> np.ndarray:
    """The federation of ``seed`` (its ``partition`` stream) for a partition named as ``"C=2"`` or ``"Dir(0.1)"``."""
    spec = parse_partition(partition)
    return federation_counts(
        profile, spec["scheme"], num_clients, seed, beta=spec["beta"], classes_per_client=spec["classes_per_client"]
    )


def _covers(counts: np.ndarray, subset) -> bool:
    return bool(np.all(counts[np.asarray(subset)].sum(axis=0) > 0))


def _entropy(counts: np.ndarray, subset) -> float:
    return float(entropy_bits(counts[np.asarray(subset)].sum(axis=0)))


def round_gaps(
    counts, *, clients_per_round: int, num_rounds: int, buffer_size: int, seed: int, exact_every: int, node_limit: int
):
    """One row per round of a FedEntOpt run on ``counts``: the greedy pick, its swap improvement, and (every
    ``exact_every``-th round, from round 1) the branch and bound's best subset within ``node_limit`` nodes.

    Columns: ``round``, ``candidates``, ``greedy_entropy``, ``greedy_covers``, ``swap_entropy``, ``swap_covers``,
    ``swaps``, ``exact_entropy``, ``exact_covers``, ``exact_optimal``, ``exact_nodes`` (NaN / None where the exact
    search did not run).
    """
    import pandas as pd

    counts = np.asarray(counts, dtype=float)
    num_clients = counts.shape[0]
    exact_every = check_int("exact_every", exact_every, low=1)
    selector, state = FedEntOptSelector(buffer_size=buffer_size), ()
    rng = stream_rng(seed, "selection")
    rows = []
    for r in range(check_int("num_rounds", num_rounds, low=1)):
        candidates = round_candidates(state, num_clients, clients_per_round, buffer_size)
        picked, state = selector.select(counts, clients_per_round, state, rng)
        swap = swap_search(counts, np.sort(picked), candidates=candidates)
        row = {
            "round": r + 1,
            "candidates": candidates.size,
            "greedy_entropy": _entropy(counts, picked),
            "greedy_covers": _covers(counts, picked),
            "swap_entropy": swap.entropy,
            "swap_covers": _covers(counts, swap.subset),
            "swaps": swap.nodes,
            "exact_entropy": np.nan,
            "exact_covers": None,
            "exact_optimal": None,
            "exact_nodes": np.nan,
        }
        if r % exact_every == 0:
            exact = best_subset(counts, clients_per_round, candidates=candidates, node_limit=node_limit)
            row.update(
                exact_entropy=exact.entropy,
                exact_covers=_covers(counts, exact.subset),
                exact_optimal=exact.optimal,
                exact_nodes=exact.nodes,
            )
        rows.append(row)
    frame = pd.DataFrame(rows)
    return frame.astype({"exact_nodes": "Int64"})


def improved_run(counts, *, clients_per_round: int, num_rounds: int, buffer_size: int, seed: int):
    """:class:`SwapImprovedSelector` for ``num_rounds`` rounds (the ``selection`` stream of ``seed``).

    Returns ``(picked, entropy, covers)`` arrays over the rounds (``picked``: (R, M), each row ascending).
    """
    trace = run_selection(
        np.asarray(counts, dtype=float),
        SwapImprovedSelector(buffer_size=buffer_size),
        clients_per_round,
        num_rounds,
        seed=stream_rng(seed, "selection"),
    )
    return np.sort(trace.picked, axis=1), trace.entropy, trace.covers


def growth_gaps(cells, *, num_rounds: int, seed: int, beta: float = 0.1, max_swaps: int = 1000):
    """Greedy against its swap improvement on Dir(``beta``) federations (:func:`repro.cross_device.dirichlet_counts`,
    500 samples per client) for each ``(K, M, C)`` of ``cells``; no buffer, so each round is the greedy from a random
    first client (the ``selection`` stream of ``seed``).

    One row per (K, M, C, round): ``greedy_entropy``, ``swap_entropy``, ``swaps``, ``greedy_covers``, ``swap_covers``.
    """
    import pandas as pd

    rows = []
    for num_clients, m, num_classes in cells:
        counts = dirichlet_counts(num_clients, num_classes, seed=seed, beta=beta).astype(float)
        selector, rng = FedEntOptSelector(buffer_size=0), stream_rng(seed, "selection")
        for r in range(check_int("num_rounds", num_rounds, low=1)):
            picked, _ = selector.select(counts, m, (), rng)
            swap = swap_search(counts, np.sort(picked), max_swaps=max_swaps)
            rows.append(
                {
                    "num_clients": num_clients,
                    "clients_per_round": m,
                    "num_classes": num_classes,
                    "round": r + 1,
                    "greedy_entropy": _entropy(counts, picked),
                    "swap_entropy": swap.entropy,
                    "swaps": swap.nodes,
                    "greedy_covers": _covers(counts, picked),
                    "swap_covers": _covers(counts, swap.subset),
                }
            )
    return pd.DataFrame(rows)


def gap_summary(rounds, by, *, num_classes_column=None, num_classes=None):
    """Per group of ``by``: rounds, share where the swap search beats greedy, gap quantiles in bits (swap - greedy),
    mean gap as a share of log2 C, rounds where coverage differs; and from the exact rounds: how many were proven,
    the share of proven rounds where greedy is optimal (within GAP_TOL), the largest proven gap.
    """
    frame = rounds.assign(gap=rounds.swap_entropy - rounds.greedy_entropy)
    log_c = np.log2(frame[num_classes_column] if num_classes_column else num_classes)
    frame = frame.assign(gap_share=frame.gap / log_c)
    if "exact_entropy" in frame:
        frame = frame.assign(exact_gap=frame.exact_entropy - frame.greedy_entropy)
    groups = frame.groupby(by, sort=False)
    out = groups.agg(
        rounds=("gap", "size"),
        swap_better=("gap", lambda g: float((g > GAP_TOL).mean())),
        gap_median=("gap", "median"),
        gap_p90=("gap", lambda g: float(g.quantile(0.9))),
        gap_max=("gap", "max"),
        gap_share_mean=("gap_share", "mean"),
        coverage_greedy=("greedy_covers", "mean"),
        coverage_swap=("swap_covers", "mean"),
    )
    if "exact_entropy" in frame:
        exact = frame[frame.exact_optimal.notna()]
        proven = exact[exact.exact_optimal.astype(bool)]
        ex = exact.groupby(by, sort=False)
        out["exact_rounds"] = ex.size()
        out["proven"] = proven.groupby(by, sort=False).size().reindex(out.index, fill_value=0)
        out["greedy_optimal"] = (
            proven.groupby(by, sort=False).exact_gap.agg(lambda g: float((g <= GAP_TOL).mean())).reindex(out.index)
        )
        out["proven_gap_max"] = proven.groupby(by, sort=False).exact_gap.max().reindex(out.index)
        out["exact_beats_swap"] = ex.apply(
            lambda g: float((g.exact_entropy > g.swap_entropy + GAP_TOL).mean()), include_groups=False
        )
    return out.reset_index()


#: Tables stored gzipped (the per-round table of the paper's settings: 12,000 rows); the others are plain CSV.
GZIPPED = ("paper",)


def table_path(name: str, directory=None) -> Path:
    """Where the stored table ``name`` lives: ``<directory>/<name>.csv`` (``.csv.gz`` for :data:`GZIPPED`)."""
    directory = Path(directory) if directory is not None else STORED
    return directory / f"{name}.csv{'.gz' if name in GZIPPED else ''}"


def load_tables(directory=None) -> dict:
    """The stored tables of ``scripts/greedy_gap.py`` (``paper``, ``improved``, ``coverage_sizes``, ``growth``) and
    ``scripts/greedy_gap_training.py`` (``training``)."""
    import pandas as pd

    missing = [table_path(t, directory).name for t in TABLES if not table_path(t, directory).is_file()]
    if missing:
        raise FileNotFoundError(
            f"{table_path(TABLES[0], directory).parent} lacks {', '.join(missing)}: run "
            "python scripts/greedy_gap.py and scripts/greedy_gap_training.py"
        )
    return {t: pd.read_csv(table_path(t, directory)) for t in TABLES}


def with_best_known(rounds):
    """``rounds`` with ``swap_gap`` (swap - greedy) and, where the exact search ran, the best subset known
    (``best_entropy``: the larger of swap and branch and bound), ``best_gap`` and ``best_covers`` (its coverage)."""
    exact_better = rounds.exact_entropy > rounds.swap_entropy + GAP_TOL
    best = rounds.swap_entropy.where(~exact_better, rounds.exact_entropy).where(rounds.exact_entropy.notna())
    covers = (
        rounds.swap_covers.astype(object).where(~exact_better, rounds.exact_covers).where(rounds.exact_entropy.notna())
    )
    return rounds.assign(
        swap_gap=rounds.swap_entropy - rounds.greedy_entropy,
        best_entropy=best,
        best_gap=best - rounds.greedy_entropy,
        best_covers=covers,
    )


def participation_table(improved, num_clients: int):
    """Per (dataset, partition, Q, method): H_norm (v2 §V-E) of the stored picks per client, mean over seeds with
    its standard deviation, and the mean pooled entropy and coverage over rounds and seeds."""
    times = improved.times_picked.map(lambda t: np.array(t.split(), dtype=np.int64))
    frame = improved.assign(h_norm=times.map(lambda c: float(entropy_bits(c) / np.log2(num_clients))))
    keys = ["dataset", "partition", "buffer_size", "method"]
    return (
        frame.groupby(keys, sort=False)
        .agg(
            h_norm=("h_norm", "mean"),
            h_norm_std=("h_norm", "std"),
            mean_entropy=("mean_entropy", "mean"),
            coverage=("coverage", "mean"),
        )
        .reset_index()
    )
