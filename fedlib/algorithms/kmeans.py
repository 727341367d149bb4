"""Seeded K-means with k-means++ seeding (Lloyd 1982; Arthur & Vassilvitskii 2007), as FedConcat clusters clients by
label distribution."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedlib._validate import ParameterError, check_float, check_int, check_rng

__all__ = ["KMeansResult", "kmeans", "kmeans_plus_plus_init"]


@dataclass(frozen=True)
class KMeansResult:
    """Outcome of :func:`kmeans`: ``(n,)`` int64 labels numbered by first appearance (point 0 is in cluster 0),
    ``(k, d)`` centres, the inertia (sum of squared distances to the centres) and the Lloyd iterations of the kept
    restart."""

    labels: np.ndarray
    centers: np.ndarray
    inertia: float
    n_iter: int


def _squared_distances(x: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """``(n, k)`` squared Euclidean distances, clipped at 0 against rounding."""
    d = (x * x).sum(1)[:, None] - 2.0 * x @ centers.T + (centers * centers).sum(1)[None, :]
    return np.maximum(d, 0.0)


def kmeans_plus_plus_init(x, k: int, rng: np.random.Generator) -> np.ndarray:
    """``(k, d)`` initial centres (copies of rows of ``x``) by k-means++ seeding: the first uniformly, each further
    one with probability :math:`D(x)^2 / \\sum D^2` (uniformly among the unchosen points when all :math:`D = 0`).

    >>> import numpy as np
    >>> kmeans_plus_plus_init(np.array([[0.0, 0.0], [0.0, 0.1], [10.0, 10.0]]), 1, np.random.default_rng(0)).shape
    (1, 2)
    """
    x = _check_points(x)
    n = x.shape[0]
    k = check_int("k", k, low=1, high=n)
    check_rng("rng", rng)
    chosen = [int(rng.integers(n))]
    closest = _squared_distances(x, x[chosen])[:, 0]
    for _ in range(1, k):
        total = closest.sum()
        if total > 0.0:
            idx = int(rng.choice(n, p=closest / total))
        else:
            free = np.setdiff1d(np.arange(n), np.asarray(chosen))
            idx = int(rng.choice(free))
        chosen.append(idx)
        closest = np.minimum(closest, _squared_distances(x, x[[idx]])[:, 0])
    return x[chosen].copy()


def _check_points(x) -> np.ndarray:
    arr = np.asarray(x)
    allowed = "a non-empty 2-D array (num_points, num_features) of finite numbers"
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ParameterError(None, "x", x, allowed, got=f"shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.number):
        raise ParameterError(None, "x", x, allowed, got=f"dtype {arr.dtype}")
    arr = arr.astype(float)
    if not np.all(np.isfinite(arr)):
        i, j = np.argwhere(~np.isfinite(arr))[0]
        raise ParameterError(None, "x", x, allowed, got=f"{arr[i, j]} for point {i}, feature {j}")
    return arr


def _canonical(labels: np.ndarray, centers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Renumber clusters by first appearance in ``labels``; clusters without points go last."""
    order = list(dict.fromkeys(labels.tolist()))
    order += [j for j in range(centers.shape[0]) if j not in order]
    remap = np.empty(centers.shape[0], dtype=np.int64)
    remap[np.asarray(order)] = np.arange(len(order))
    return remap[labels], centers[np.asarray(order)]


def _lloyd(x: np.ndarray, centers: np.ndarray, max_iter: int, tol: float):
    """Lloyd iterations from ``centers``; an emptied cluster takes the point farthest from its centre."""
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        d = _squared_distances(x, centers)
        labels = d.argmin(1)
        new = centers.copy()
        for j in range(centers.shape[0]):
            members = labels == j
            if members.any():
                new[j] = x[members].mean(0)
            else:
                far = int(d[np.arange(x.shape[0]), labels].argmax())
                new[j] = x[far]
                labels[far] = j
                d[far, :] = 0.0  # the point is now its own centre; never steal it twice
        shift = float(((new - centers) ** 2).sum())
        centers = new
        if shift <= tol:
            break
    d = _squared_distances(x, centers)
    labels = d.argmin(1)
    inertia = float(d[np.arange(x.shape[0]), labels].sum())
    return labels.astype(np.int64), centers, inertia, n_iter


def kmeans(
    x,
    k: int,
    rng: np.random.Generator,
    *,
    n_init: int = 10,
    max_iter: int = 300,
    tol: float = 1e-10,
) -> KMeansResult:
    """K-means (Lloyd's algorithm, ties to the lowest centre) from k-means++ seeds drawn from ``rng``, the best of
    ``n_init`` restarts (lowest inertia, first among equals); a restart stops when the summed squared centre shift
    is at most ``tol`` or after ``max_iter`` iterations. With fewer than ``k`` distinct points some clusters are empty.

    >>> import numpy as np
    >>> x = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0]])
    >>> kmeans(x, 2, np.random.default_rng(0)).labels.tolist()
    [0, 0, 1, 1]
    """
    x = _check_points(x)
    k = check_int("k", k, low=1, high=x.shape[0])
    check_rng("rng", rng)
    n_init = check_int("n_init", n_init, low=1)
    max_iter = check_int("max_iter", max_iter, low=1)
    tol = check_float("tol", tol, low=0.0)
    best = None
    for _ in range(n_init):
        run = _lloyd(x, kmeans_plus_plus_init(x, k, rng), max_iter, tol)
        if best is None or run[2] < best[2]:
            best = run
    labels, centers, inertia, n_iter = best
    labels, centers = _canonical(labels, centers)
    return KMeansResult(labels=labels, centers=centers, inertia=inertia, n_iter=n_iter)
