"""``SelectorStrategy``: Flower's FedAvg with the round's clients picked by a fedlib selector.

Protocol (Flower's Message API, ``flwr.serverapp.strategy``):

1. Before the first training round the strategy sends every connected node one ``"query.label_counts"`` message;
   each ClientApp answers with ``label_counts_reply`` (its label histogram, optionally Laplace-noised on the
   client).  This happens once: the counts and the node order are kept.
2. Row ``k`` of the server's count matrix is the node whose reply carries the ``k``-th smallest ``partition-id``
   (ties and missing ids: by node id), so in a simulation client ``k`` of fedlib is Flower's partition ``k``.
3. Every round ``configure_train`` calls ``selector.select(counts, M, state, rng)`` and sends the training
   message to the picked nodes only; the selector's state (FedEntOpt's FIFO buffer) is carried to the next
   round.  ``picks`` records the picked client indices of every round, in pick order.
4. Aggregation: ``aggregation="flower"`` is Flower's FedAvg (``FedAvg.aggregate_train``: float32 arrays, weights
   ``num-examples``); ``"fedlib"`` is fedlib's FedAvg server step (``fedlib.algorithms.base.weighted_average``:
   float64 accumulation, cast back), the server step of fedlib's fedavg, fedprox, fedrs and fedlc.  Both sum the
   replies in pick order (Flower delivers replies in the order they arrive), so a run is reproducible.  Both run
   ``FedAvg.aggregate_train`` first, which drops error replies, checks the others and aggregates the metrics;
   ``"fedlib"`` then replaces its arrays (Flower's float32 average is computed and discarded).

Federated evaluation (``configure_evaluate``) is FedAvg's, unchanged.

Flower API used: only public names of Flower 1.41 (no name with a leading underscore, no private method of
``FedAvg``; ``tests/test_flower_public_api.py`` checks the source): ``flwr.app`` (``Message(content, dst_node_id=,
message_type=)``, ``Message(content, reply_to=)``, ``Message.has_error``/``error``/``metadata``/``content``,
``MessageType``, ``RecordDict`` with its ``metric_records``/``array_records``, ``ArrayRecord`` and its
``to_torch_state_dict``, ``ConfigRecord``, ``MetricRecord``), ``flwr.serverapp.Grid`` (``get_node_ids``,
``send_and_receive``), ``flwr.serverapp.strategy.FedAvg`` (its constructor and attributes ``min_available_nodes``,
``arrayrecord_key``, ``configrecord_key``, ``weighted_by_key``; the methods ``summary``, ``aggregate_train``,
``configure_evaluate``, ``aggregate_evaluate``, ``start``, which fedlib overrides or inherits) and
``flwr.supercore.log``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg

from fedlib._validate import ParameterError, check_choice, check_float, check_int, check_label_vector
from fedlib.selection.selectors import Selector, make_selector

__all__ = ["SelectorStrategy", "label_counts_reply", "LABEL_COUNTS_QUERY", "LABEL_COUNTS_KEY", "AGGREGATIONS"]

#: Message type of the one-time label-count query (a ClientApp handles it with ``@app.query("label_counts")``).
LABEL_COUNTS_QUERY = f"{MessageType.QUERY}.label_counts"
#: Key of the MetricRecord in the reply: ``counts`` (list of C floats) and optionally ``partition-id`` (int).
LABEL_COUNTS_KEY = "label-counts"
AGGREGATIONS = ("flower", "fedlib")


def label_counts_reply(
    message: Message,
    labels,
    num_classes: int,
    *,
    partition_id: int | None = None,
    epsilon: float | None = None,
    negative: str = "keep",
    rng=None,
) -> Message:
    """The ClientApp's answer to the label-count query: its label histogram, optionally ε-DP.

    ``labels``: the client's training labels (ints in ``[0, num_classes)``).  With ``epsilon`` the counts are
    perturbed on the client by ``fedlib.selection.privacy.laplace_counts`` (Laplace noise of scale 1/ε per class, so the
    upload is ε-DP; ``negative`` clips or keeps negative noisy counts), drawn from ``rng`` (a
    ``numpy.random.Generator``; None: fresh OS entropy, as real deployments need).  ``partition_id`` orders the
    clients on the server (the simulation engine's ``context.node_config["partition-id"]``).
    """
    from fedlib.selection.privacy import laplace_counts

    num_classes = check_int("num_classes", num_classes, low=1)
    y = np.asarray(labels)
    if y.size:  # a client without data reports zeros
        y = check_label_vector("labels", y, num_classes=num_classes)
    counts = np.bincount(y.astype(np.int64).ravel(), minlength=num_classes).astype(np.float64)
    if epsilon is not None:
        rng = np.random.default_rng() if rng is None else rng
        counts = laplace_counts(counts[None, :], epsilon, rng=rng, negative=negative)[0]
    record = MetricRecord({"counts": [float(c) for c in counts]})
    if partition_id is not None:
        record["partition-id"] = check_int("partition_id", partition_id, low=0)
    return Message(RecordDict({LABEL_COUNTS_KEY: record}), reply_to=message)


class SelectorStrategy(FedAvg):
    """FedAvg whose training clients are picked by a fedlib selector from the clients' label counts.

    Parameters
    ----------
    selector : str or fedlib.selection.selectors.Selector
        A selector, or its name for ``make_selector(selector, **selector_params)`` (``"fedentopt"``, ``"kl"``,
        ``"dc"``, ``"random"``).
    clients_per_round : int
        M, the clients trained per round.
    selector_params : dict, optional
        Parameters when ``selector`` is a name, e.g. ``{"buffer_fraction": 0.5}``.
    seed, rng : optional
        The selection randomness: a ``numpy.random.Generator`` (``rng``) or a seed for ``default_rng`` (at most
        one of the two).
    num_clients : int, optional
        Nodes to wait for before the label-count query (default: ``min_available_nodes``).
    aggregation : {"flower", "fedlib"}
        See the module docstring.
    query_timeout : float
        Seconds to wait for the label counts.
    **fedavg_kwargs
        Passed to ``flwr.serverapp.strategy.FedAvg`` (``fraction_evaluate``, ``min_available_nodes``, ...);
        ``fraction_train`` is not allowed (the selector decides).
    """

    def __init__(
        self,
        selector="fedentopt",
        clients_per_round: int = 10,
        *,
        selector_params: dict | None = None,
        seed: int | None = None,
        rng: np.random.Generator | None = None,
        num_clients: int | None = None,
        aggregation: str = "flower",
        query_timeout: float = 600.0,
        **fedavg_kwargs,
    ):
        if "fraction_train" in fedavg_kwargs:
            allowed = "no value (the selector picks clients_per_round clients every round)"
            raise ParameterError("SelectorStrategy", "fraction_train", fedavg_kwargs["fraction_train"], allowed)
        if isinstance(selector, Selector):
            if selector_params:
                allowed = f"None with a {type(selector).__name__} (selector_params are for a selector given by name)"
                raise ParameterError(None, "selector_params", selector_params, allowed)
            self.selector = selector
        else:
            self.selector = make_selector(selector, **(selector_params or {}))
        if seed is not None and rng is not None:
            allowed = f"None with seed={seed!r} (give the selection randomness as seed or as rng, not both)"
            raise ParameterError(None, "rng", rng, allowed, got=f"a {type(rng).__name__}")
        self.rng = rng if rng is not None else np.random.default_rng(seed)
        self.clients_per_round = check_int("clients_per_round", clients_per_round, low=1)
        self.num_clients = None if num_clients is None else check_int("num_clients", num_clients, low=1)
        self.aggregation = check_choice("aggregation", aggregation, AGGREGATIONS)
        self.query_timeout = check_float("query_timeout", query_timeout, low=0.0, low_open=True)
        super().__init__(fraction_train=1.0, **fedavg_kwargs)
        self.counts: np.ndarray | None = None  # (K, C) as the clients reported them
        self.node_ids: list[int] = []  # node of row k
        self.partition_ids: list[int | None] = []
        self.selector_state: tuple = ()
        self.picks: list[list[int]] = []  # picked client indices per round, in pick order
        self._round_nodes: list[int] = []

    def summary(self) -> None:
        super().summary()
        from logging import INFO

        from flwr.supercore import log

        log(
            INFO,
            "\t└──> fedlib selector: %r, %d clients per round, aggregation %r",
            self.selector,
            self.clients_per_round,
            self.aggregation,
        )

    # ------------------------------------------------------------------ label counts (once)

    def _wait_for_nodes(self, grid: Grid) -> list[int]:
        need = self.num_clients or self.min_available_nodes
        t0 = time.monotonic()
        while len(nodes := sorted(grid.get_node_ids())) < need:
            if time.monotonic() - t0 > self.query_timeout:
                raise TimeoutError(
                    f"{len(nodes)} nodes connected after {self.query_timeout:g} s; "
                    f"SelectorStrategy waits for num_clients={need}."
                )
            time.sleep(0.5)
        return nodes

    def collect_label_counts(self, grid: Grid) -> np.ndarray:
        """Ask every connected node for its label counts (once); set ``counts``, ``node_ids``, the initial state."""
        nodes = self._wait_for_nodes(grid)
        messages = [
            Message(RecordDict({self.configrecord_key: ConfigRecord()}), dst_node_id=n, message_type=LABEL_COUNTS_QUERY)
            for n in nodes
        ]
        rows = []
        for reply in grid.send_and_receive(messages, timeout=self.query_timeout):
            node = reply.metadata.src_node_id
            if reply.has_error() or LABEL_COUNTS_KEY not in reply.content.metric_records:
                reason = reply.error.reason if reply.has_error() else "no 'label-counts' record in the reply"
                raise RuntimeError(
                    f"node {node} did not report its label counts ({reason}); its ClientApp needs "
                    f"@app.query('label_counts') returning fedlib.flower.label_counts_reply(...)."
                )
            rec = reply.content.metric_records[LABEL_COUNTS_KEY]
            pid = int(rec["partition-id"]) if "partition-id" in rec else None
            rows.append((pid if pid is not None else -1, node, pid, np.asarray(rec["counts"], dtype=np.float64)))
        if len({r[3].shape for r in rows}) != 1:
            raise ValueError(
                f"the clients reported label counts of different lengths: {sorted({r[3].size for r in rows})}."
            )
        rows.sort(key=lambda r: (r[0], r[1]))
        self.node_ids = [r[1] for r in rows]
        self.partition_ids = [r[2] for r in rows]
        self.counts = np.stack([r[3] for r in rows])
        self.selector_state = self.selector.initial_state(len(rows))
        return self.counts

    # ------------------------------------------------------------------ training rounds

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Pick the round's clients with the selector and send them the global model."""
        if self.counts is None:
            self.collect_label_counts(grid)
        picked, self.selector_state = self.selector.select(
            self.counts, self.clients_per_round, self.selector_state, self.rng
        )
        picked = [int(k) for k in picked]
        self.picks.append(picked)
        self._round_nodes = [self.node_ids[k] for k in picked]
        config["server-round"] = server_round
        record = RecordDict({self.arrayrecord_key: arrays, self.configrecord_key: config})
        return [Message(record, dst_node_id=n, message_type=MessageType.TRAIN) for n in self._round_nodes]

    def aggregate_train(self, server_round: int, replies: Iterable[Message]):
        """FedAvg over the replies, summed in pick order (``aggregation``: Flower's or fedlib's arithmetic).

        Both go through ``FedAvg.aggregate_train``, which drops and logs the replies that carry an error, checks
        the others (one ArrayRecord with the same keys, one MetricRecord with ``weighted_by_key``; otherwise it
        raises Flower's ``InconsistentMessageReplies``) and aggregates their metrics.  With ``"fedlib"`` its
        arrays are then replaced by fedlib's average of the same replies (those without an error).
        """
        order = {n: j for j, n in enumerate(self._round_nodes)}
        replies = sorted(replies, key=lambda m: order.get(m.metadata.src_node_id, len(order)))
        arrays, metrics = super().aggregate_train(server_round, replies)
        if self.aggregation == "flower" or arrays is None:
            return arrays, metrics
        return self._fedlib_average([m.content for m in replies if not m.has_error()]), metrics

    def _fedlib_average(self, contents: list[RecordDict]) -> ArrayRecord | None:
        from fedlib.algorithms.base import weighted_average

        n = np.array([float(next(iter(c.metric_records.values()))[self.weighted_by_key]) for c in contents])
        keep = n > 0  # fedlib's trainer aggregates the clients that trained on at least one sample
        if not keep.any():
            return None
        params = [next(iter(c.array_records.values())).to_torch_state_dict() for c, k in zip(contents, keep) if k]
        return ArrayRecord(weighted_average(params, n[keep] / n[keep].sum()))
