"""Where a training curve stops moving: the round count of a tier read off measured curves.

``plateau_round`` takes the per-round test accuracy of several seeds of one configuration and returns the smallest
round R (at least ``min_round``) after which the seed-mean of the trailing ``window``-round mean never moves by as
much as its standard deviation over the seeds: for every later round R', |m(R') - m(R)| < s(R'). The subset tier's
round count is the largest such R over the curves measured (``tiers``' module docstring says which).
"""

from __future__ import annotations

import numpy as np

from fedlib._validate import check_int

__all__ = ["trailing_stats", "plateau_round", "plateau_table"]


def trailing_stats(curves, window: int = 10):
    """Seed-mean and seed-std of the trailing ``window``-round mean, per round.

    ``curves``: DataFrame with columns ``seed``, ``round``, ``test_accuracy`` of ONE configuration. Returns a
    DataFrame indexed by round (from round ``window`` on) with ``mean``, ``std`` and ``n_seeds``.
    """
    import pandas as pd

    window = check_int("window", window, low=1)
    wide = curves.pivot_table(index="round", columns="seed", values="test_accuracy").sort_index()
    rolled = wide.rolling(window).mean().dropna(how="all")
    return pd.DataFrame(
        {"mean": rolled.mean(axis=1), "std": rolled.std(axis=1, ddof=1), "n_seeds": rolled.notna().sum(axis=1)}
    )


def plateau_round(curves, *, min_round: int = 150, window: int = 10):
    """The smallest round R >= ``min_round`` after which the trailing mean moves by less than its seed std.

    Returns ``None`` when no round of the curve qualifies (it still moves at its end) or when fewer than two seeds
    give no standard deviation.

    >>> import pandas as pd
    >>> rows = [{"seed": s, "round": r, "test_accuracy": min(r, 20) / 100 + 0.01 * s}
    ...         for s in (0, 1, 2) for r in range(1, 41)]
    >>> plateau_round(pd.DataFrame(rows), min_round=10, window=5)
    22
    """
    min_round = check_int("min_round", min_round, low=1)
    stats = trailing_stats(curves, window)
    if stats["n_seeds"].max() < 2:
        return None
    rounds = stats.index.to_numpy()
    mean, std = stats["mean"].to_numpy(), stats["std"].to_numpy()
    for i, r in enumerate(rounds):
        if r < min_round:
            continue
        if np.all(np.abs(mean[i + 1 :] - mean[i]) < std[i + 1 :]):
            return int(r)
    return None


def plateau_table(frame, *, by=("partition", "method"), min_round: int = 150, window: int = 10):
    """``plateau_round`` for every configuration of ``frame``, with the trailing mean and std at that round and at
    the last round (accuracies in %)."""
    import pandas as pd

    rows = []
    for key, curves in frame.groupby(list(by)):
        stats = trailing_stats(curves, window)
        r = plateau_round(curves, min_round=min_round, window=window)
        last = stats.index.max()
        rows.append(
            {
                **dict(zip(by, key if isinstance(key, tuple) else (key,))),
                "n_seeds": int(stats["n_seeds"].max()),
                "plateau_round": r,
                "mean_at_plateau": 100 * stats.loc[r, "mean"] if r is not None else np.nan,
                "std_at_plateau": 100 * stats.loc[r, "std"] if r is not None else np.nan,
                "last_round": int(last),
                "mean_at_last": 100 * stats.loc[last, "mean"],
                "std_at_last": 100 * stats.loc[last, "std"],
            }
        )
    return pd.DataFrame(rows)
