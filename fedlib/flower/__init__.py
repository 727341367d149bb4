"""FedEntOpt (and every other fedlib selector) in Flower: a Message-API strategy and the label-count query.
An optional extra: ``pip install -e ".[flower]"`` (Flower 1.41 with its Ray-based simulation engine).

* ``SelectorStrategy`` (``fedlib.flower.strategy``): Flower's ``FedAvg`` strategy whose ``configure_train`` picks
  the round's clients with a fedlib selector (``fedlib.selection.selectors``; FedEntOpt's buffer kept across rounds)
  from the label counts every client reports once, in answer to a ``"query.label_counts"`` message.
* ``label_counts_reply``: the client side of that query (optionally Laplace-noised on the client, with the ε
  semantics of ``fedlib.selection.privacy``).
* ``fedlib.flower.apps``: a fedlib federation (``ExperimentConfig``) as a Flower ServerApp and ClientApp, and
  ``flwr_run(config, workdir)`` that runs it with ``flwr run`` in Flower's simulation runtime (used by the tests to
  compare Flower with fedlib's own trainer).
"""

from __future__ import annotations

FLOWER_MISSING = (
    'fedlib.flower needs Flower, an optional extra of fedlib: pip install -e ".[flower]" '
    '(or pip install "flwr[simulation]==1.41.0")'
)

try:
    import flwr  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised where Flower is missing
    raise ImportError(FLOWER_MISSING) from exc

from fedlib.flower.strategy import LABEL_COUNTS_QUERY, SelectorStrategy, label_counts_reply  # noqa: E402

__all__ = ["SelectorStrategy", "label_counts_reply", "LABEL_COUNTS_QUERY", "FLOWER_MISSING"]
