"""Label-skew partitioners Dir(beta), #C=k and IID of NIID-Bench (Li et al., ICDE 2022) for FedEntOpt §V-A2."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence

import numpy as np

from fedlib._validate import ParameterError, check_choice, check_float, check_int, check_label_vector, check_rng

__all__ = [
    "SCHEMES",
    "PartitionError",
    "DEFAULT_MAX_REDRAWS",
    "labels_from_counts",
    "dirichlet_partition",
    "quantity_partition",
    "iid_partition",
    "partition",
    "label_count_matrix",
    "client_label_counts",
    "parse_partition",
    "partition_fields",
]

#: Partitioning schemes understood by :func:`partition`.
SCHEMES = ("dirichlet", "quantity", "iid")

#: Default cap of Dirichlet redraws: it decides when the loop gives up, never which partition it accepts.
DEFAULT_MAX_REDRAWS = 10_000
#: A progress message (logger ``fedlib.data.partition``, level WARNING) every this many redraws.
PROGRESS_EVERY = 2_000

_log = logging.getLogger("fedlib.data.partition")

PartitionError = ParameterError  # the former name, kept for user code

_NOTATION = (  # (pattern of the normalised text, scheme); the pattern's group is the scheme's parameter
    (re.compile(r"iid"), "iid"),
    (re.compile(r"dir\((.+)\)|dir(.+)"), "dirichlet"),
    (re.compile(r"c=?(.+)"), "quantity"),
)


def parse_partition(notation: str) -> dict:
    """``scheme``, ``beta``, ``classes_per_client`` of :func:`partition` from the paper's notation (``"Dir(0.1)"``,
    ``"C=2"``, ``"#C=2"``, ``"IID"``) or the command line's (``"dir0.1"``, ``"c2"``, ``"iid"``)."""
    text = str(notation).replace(" ", "").replace("#", "").lower()
    for pattern, scheme in _NOTATION:
        match = pattern.fullmatch(text)
        if match is None:
            continue
        value = next((g for g in match.groups() if g is not None), None)
        try:
            return {
                "scheme": scheme,
                "beta": float(value) if scheme == "dirichlet" else None,
                "classes_per_client": int(value) if scheme == "quantity" else None,
            }
        except ValueError:
            break
    allowed = (
        "'Dir(0.1)', 'C=2' or 'IID' (the paper's notation; '#C=2' too) or 'dir0.1', 'c2', 'iid' (the command line's)"
    )
    raise ParameterError(None, "notation", notation, allowed)


def partition_fields(notation: str) -> dict:
    """:func:`parse_partition` as the ``ExperimentConfig`` fields ``partition``, ``beta``, ``classes_per_client``."""
    spec = parse_partition(notation)
    return {"partition": spec["scheme"], "beta": spec["beta"], "classes_per_client": spec["classes_per_client"]}


def _required(name: str, value, what: str):
    if value is None:
        raise ParameterError(None, name, None, what)
    return value


def _check_class_counts(class_counts) -> np.ndarray:
    arr = np.asarray(class_counts)
    allowed = "a non-empty 1-D array of non-negative integer per-class counts, at least one sample in all"
    if arr.ndim != 1 or arr.size == 0:
        raise ParameterError(None, "class_counts", class_counts, allowed, got=f"shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise ParameterError(None, "class_counts", class_counts, allowed, got=f"dtype {arr.dtype}")
    if arr.min() < 0:
        c = int(np.argmin(arr))
        raise ParameterError(None, "class_counts", class_counts, allowed, got=f"{arr[c]} for class {c}")
    if arr.sum() == 0:
        raise ParameterError(None, "class_counts", class_counts, allowed, got="all counts 0")
    return arr.astype(np.int64)


def labels_from_counts(class_counts) -> np.ndarray:
    """The sorted int64 label vector ``np.repeat(arange(C), class_counts)``."""
    counts = _check_class_counts(class_counts)
    return np.repeat(np.arange(counts.size, dtype=np.int64), counts)


def _resolve_labels(labels, class_counts) -> tuple[np.ndarray, int]:
    """``(label vector, num_classes)`` from exactly one of ``labels`` and ``class_counts``."""
    if (labels is None) == (class_counts is None):
        given = "both" if labels is not None else "neither"
        allowed = "exactly one of labels (a 1-D integer label vector) and class_counts= (per-class counts)"
        raise ParameterError(None, "labels", labels, allowed, got=f"{given} of labels and class_counts")
    if class_counts is not None:
        counts = _check_class_counts(class_counts)
        return labels_from_counts(counts), int(counts.size)
    arr = check_label_vector("labels", labels)
    return arr, int(arr.max()) + 1


def _group_by_owner(owner: np.ndarray, num_clients: int) -> list[np.ndarray]:
    """An owner-per-sample vector as ``num_clients`` sorted int64 index arrays."""
    order = np.argsort(owner, kind="stable").astype(np.int64)
    sizes = np.bincount(owner, minlength=num_clients)
    return [np.ascontiguousarray(part) for part in np.split(order, np.cumsum(sizes)[:-1])]


def _class_index_lists(labels: np.ndarray, num_classes: int) -> list[np.ndarray]:
    order = np.argsort(labels, kind="stable")
    bounds = np.cumsum(np.bincount(labels, minlength=num_classes))[:-1]
    return np.split(order.astype(np.int64), bounds)


def _even_sizes(n: int, parts: int) -> np.ndarray:
    """The sizes of ``np.array_split`` of ``n`` items into ``parts`` pieces."""
    base, extra = divmod(n, parts)
    return np.full(parts, base, dtype=np.int64) + (np.arange(parts) < extra)


def _dirichlet_proportions(sizes, num_samples, num_clients, beta, rng) -> np.ndarray:
    """Draw Dir_K(beta) shares for one class, zero clients already holding >= N/K samples, renormalise."""
    p = rng.dirichlet(np.full(num_clients, beta))
    eligible = sizes * num_clients < num_samples  # holds < N/K, in exact integer arithmetic
    p = np.where(eligible, p, 0.0)
    total = p.sum()
    if not (np.isfinite(total) and total > 0.0):
        # every eligible share underflowed (tiny beta): one eligible client, uniformly, the beta -> 0 limit
        p = np.zeros(num_clients)
        p[rng.choice(np.flatnonzero(eligible))] = 1.0
        return p
    return p / total


def _dirichlet_counts(class_sizes, num_clients, beta, rng) -> np.ndarray:
    """One Dir(beta) draw of the (K, C) count matrix, classes dealt in class-id order."""
    num_samples = int(class_sizes.sum())
    counts = np.zeros((num_clients, class_sizes.size), dtype=np.int64)
    sizes = np.zeros(num_clients, dtype=np.int64)
    for c, n_c in enumerate(class_sizes):
        if n_c == 0:  # an empty class draws nothing (and may find every client full)
            continue
        p = _dirichlet_proportions(sizes, num_samples, num_clients, beta, rng)
        cum = np.cumsum(p)  # dividing by cum[-1] makes a zero share give exactly zero samples, even last
        cuts = np.minimum((cum[:-1] / cum[-1] * n_c).astype(np.int64), n_c)
        counts[:, c] = np.diff(cuts, prepend=0, append=n_c)
        sizes += counts[:, c]
    return counts


def _deal_counts(class_idx, counts, rng) -> np.ndarray:
    """Owner of every sample: each class's shuffled indices are cut into the clients' counts."""
    owner = np.empty(sum(idx.size for idx in class_idx), dtype=np.int64)
    clients = np.arange(counts.shape[0])
    for c, idx_c in enumerate(class_idx):
        owner[rng.permutation(idx_c)] = np.repeat(clients, counts[:, c])
    return owner


def dirichlet_partition(
    labels=None,
    num_clients=None,
    beta=None,
    *,
    rng,
    class_counts=None,
    min_partition_size=10,
    max_redraws=DEFAULT_MAX_REDRAWS,
) -> list[np.ndarray]:
    """Label skew Dir(beta) of NIID-Bench: ``K`` sorted int64 index arrays, disjoint, covering ``0..N-1``.

    Classes are dealt in class-id order at the cumulative shares ``p ~ Dir_K(beta)``, the share of every client
    already holding ``>= N/K`` samples set to 0; the count matrix is redrawn while the smallest client holds fewer
    than ``min_partition_size`` samples, at most ``max_redraws`` times (None: no limit). Give exactly one of
    ``labels`` and ``class_counts`` (indices then refer to ``labels_from_counts(class_counts)``).
    """
    rng = check_rng("rng", rng)
    y, num_classes = _resolve_labels(labels, class_counts)
    k = check_int("num_clients", _required("num_clients", num_clients, "an integer >= 1"), low=1)
    beta = check_float("beta", _required("beta", beta, "a finite float > 0"), low=0.0, low_open=True)
    min_size = check_int("min_partition_size", min_partition_size, low=0)
    if max_redraws is not None:
        max_redraws = check_int("max_redraws", max_redraws, low=0)
    part = "dirichlet_partition"
    if y.size < k * min_size:
        allowed = f"at most {y.size // k} ({y.size} samples over num_clients={k})"
        hint = (
            f"It needs at least num_clients * min_partition_size = {k} * {min_size} = {k * min_size} samples "
            f"(got {y.size}); lower min_partition_size or use fewer clients."
        )
        raise ParameterError(part, "min_partition_size", min_size, allowed, hint=hint)
    class_idx = _class_index_lists(y, num_classes)
    class_sizes = np.array([idx.size for idx in class_idx], dtype=np.int64)
    minima = np.zeros(max(min_size, 1), dtype=np.int64)  # minima[m]: rejected draws whose smallest client held m
    draws, t0 = 0, time.perf_counter()
    while True:
        counts = _dirichlet_counts(class_sizes, k, beta, rng)
        smallest = int(counts.sum(axis=1).min())
        if smallest >= min_size:  # accepted; which samples of a class a client gets is drawn once accepted
            return _group_by_owner(_deal_counts(class_idx, counts, rng), k)
        minima[smallest] += 1
        draws += 1
        if max_redraws is not None and draws > max_redraws:
            break
        if draws % PROGRESS_EVERY == 0 and draws != max_redraws:  # the cap's own message is the error
            seen = (draws, time.perf_counter() - t0, min_size, int(np.flatnonzero(minima).max()), k, beta, max_redraws)
            _log.warning(
                "dirichlet_partition: %d redraws in %.0f s, none with every client >= %d samples yet "
                "(largest minimum seen: %d; K=%d, beta=%g, cap %s)",
                *seen,
            )
    reached = np.cumsum(minima[::-1])[::-1] / draws  # reached[m]: fraction of draws with smallest client >= m
    suggest = int(np.flatnonzero(reached >= 0.01).max())  # the largest size reached by 1 % of the draws
    one_in = 1 / (1 - 0.05 ** (1 / draws))  # 95 % upper bound on the acceptance rate: 1 in one_in draws
    allowed = f"a size the draws reach ({suggest} was reached by {reached[suggest]:.1%} of the draws)"
    hint = (
        f"No draw gave every client >= {min_size} samples after {draws - 1} redraws (K={k}, beta={beta:g}, "
        f"{y.size:,} samples; the largest smallest client was {int(np.flatnonzero(minima).max())}): at 95 % "
        f"confidence fewer than 1 in {one_in:,.0f} draws would be accepted; lower min_partition_size, raise beta "
        f"(got {beta:g}) or use fewer clients (got num_clients={k})."
    )
    raise ParameterError(part, "min_partition_size", min_size, allowed, hint=hint)


def _draw_class_sets(num_clients: int, num_classes: int, k: int, rng) -> np.ndarray:
    """Boolean (K, C) matrix: client i holds class i mod C plus k-1 further distinct uniform classes."""
    rows = np.arange(num_clients)
    holds = np.zeros((num_clients, num_classes), dtype=bool)
    holds[rows, rows % num_classes] = True
    if k > 1:
        keys = rng.random((num_clients, num_classes))
        keys[rows, rows % num_classes] = np.inf  # never re-draw the fixed class
        extra = np.argpartition(keys, k - 2, axis=1)[:, : k - 1]  # k-1 smallest keys: uniform subset
        holds[rows[:, None], extra] = True
    return holds


def quantity_partition(
    labels=None,
    num_clients=None,
    classes_per_client=None,
    *,
    rng,
    class_counts=None,
) -> list[np.ndarray]:
    """Label skew #C=k: client ``i`` holds class ``i mod C`` and ``k-1`` further distinct uniform classes; each
    class's shuffled samples are split evenly among its holders. Arguments as for :func:`dirichlet_partition`."""
    rng = check_rng("rng", rng)
    y, num_classes = _resolve_labels(labels, class_counts)
    num_clients = check_int("num_clients", _required("num_clients", num_clients, "an integer >= 1"), low=1)
    k = _required("classes_per_client", classes_per_client, f"an integer in [1, {num_classes}]")
    k = check_int("classes_per_client", k, low=1, high=num_classes)
    class_idx = _class_index_lists(y, num_classes)
    holds = _draw_class_sets(num_clients, num_classes, k, rng)
    orphans = [c for c in range(num_classes) if class_idx[c].size and not holds[:, c].any()]
    if orphans:
        raise ParameterError(
            "quantity_partition",
            "num_clients",
            num_clients,
            f"at least the number of classes ({num_classes}) or a larger classes_per_client (got {k})",
            hint=f"Class(es) {orphans} have samples but no client drew them, so not every sample could be assigned.",
        )
    owner = np.empty(y.size, dtype=np.int64)
    for c in range(num_classes):
        holders = np.flatnonzero(holds[:, c])
        if class_idx[c].size:
            owner[rng.permutation(class_idx[c])] = np.repeat(holders, _even_sizes(class_idx[c].size, holders.size))
    return _group_by_owner(owner, num_clients)


def iid_partition(labels=None, num_clients=None, *, rng, class_counts=None) -> list[np.ndarray]:
    """All indices shuffled and cut into ``K`` parts whose sizes differ by at most one."""
    rng = check_rng("rng", rng)
    y, _ = _resolve_labels(labels, class_counts)
    k = check_int("num_clients", _required("num_clients", num_clients, "an integer >= 1"), low=1)
    owner = np.empty(y.size, dtype=np.int64)
    owner[rng.permutation(y.size)] = np.repeat(np.arange(k), _even_sizes(y.size, k))
    return _group_by_owner(owner, k)


def partition(
    labels=None,
    scheme=None,
    num_clients=None,
    *,
    rng,
    class_counts=None,
    beta=None,
    classes_per_client=None,
    min_partition_size=10,
    max_redraws=DEFAULT_MAX_REDRAWS,
) -> list[np.ndarray]:
    """Partition sample indices among ``num_clients`` clients with one of :data:`SCHEMES` (``"dirichlet"`` takes
    ``beta``, ``"quantity"`` ``classes_per_client``; the parameter of another scheme is an error)."""
    check_choice("scheme", scheme, SCHEMES)
    given = {"beta": beta, "classes_per_client": classes_per_client}
    needed = {"dirichlet": "beta", "quantity": "classes_per_client", "iid": None}[scheme]
    for name, value in given.items():
        if value is not None and name != needed:
            raise ParameterError(f"scheme {scheme!r}", name, value, "None (not a parameter of this scheme)")
    if needed is not None and given[needed] is None:
        raise ParameterError(f"scheme {scheme!r}", needed, None, f"a value (scheme {scheme!r} needs {needed}=)")
    common = dict(rng=rng, class_counts=class_counts)
    if scheme == "dirichlet":
        return dirichlet_partition(
            labels, num_clients, beta, min_partition_size=min_partition_size, max_redraws=max_redraws, **common
        )
    if scheme == "quantity":
        return quantity_partition(labels, num_clients, classes_per_client, **common)
    return iid_partition(labels, num_clients, **common)


def label_count_matrix(labels, parts: Sequence, num_classes: int) -> np.ndarray:
    """The (K, C) int64 matrix whose entry ``[i, c]`` counts the samples of class ``c`` in ``parts[i]``."""
    num_classes = check_int("num_classes", num_classes, low=1)
    y = check_label_vector("labels", labels, num_classes=num_classes)
    if len(parts) == 0:
        raise ParameterError(None, "parts", parts, "a non-empty sequence of 1-D index arrays, one per client")
    idx = [_check_part(i, part, y.size) for i, part in enumerate(parts)]
    client = np.repeat(np.arange(len(idx)), [p.size for p in idx])
    flat = client * num_classes + y[np.concatenate(idx)]
    return np.bincount(flat, minlength=len(idx) * num_classes).reshape(len(idx), num_classes).astype(np.int64)


def _check_part(i: int, part, num_samples: int) -> np.ndarray:
    arr = np.asarray(part)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    allowed = f"a 1-D integer index array with indices in [0, {num_samples})"
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise ParameterError(None, f"parts[{i}]", part, allowed, got=f"shape {arr.shape}, dtype {arr.dtype}")
    if arr.min() < 0 or arr.max() >= num_samples:
        raise ParameterError(None, f"parts[{i}]", part, allowed, got=f"indices from {arr.min()} to {arr.max()}")
    return arr.astype(np.int64)


def client_label_counts(
    profile_or_labels,
    scheme,
    num_clients,
    *,
    seed,
    beta=None,
    classes_per_client=None,
    min_partition_size=10,
    max_redraws=DEFAULT_MAX_REDRAWS,
    split="train",
) -> np.ndarray:
    """The (K, C) class-count matrix of a :func:`partition` of a profile's ``split`` (a name of
    :data:`fedlib.data.profiles.PROFILES`) or of a label vector; ``seed``: an int >= 0 or a Generator."""
    from fedlib.data.profiles import get_profile, profile_labels

    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(check_int("seed", seed, low=0))
    if isinstance(profile_or_labels, str):
        labels = profile_labels(profile_or_labels, split=split)
        num_classes = get_profile(profile_or_labels).num_classes
    else:
        labels = check_label_vector("profile_or_labels", profile_or_labels)
        num_classes = int(labels.max()) + 1
    parts = partition(
        labels,
        scheme,
        num_clients,
        rng=rng,
        beta=beta,
        classes_per_client=classes_per_client,
        min_partition_size=min_partition_size,
        max_redraws=max_redraws,
    )
    return label_count_matrix(labels, parts, num_classes)
