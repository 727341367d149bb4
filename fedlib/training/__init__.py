"""Federated training: the configuration (``config``), the trainer (``trainer``), local training per client
(``local``) and all clients of a round at once (``batched``), the models (``models``), run tables and the run cache
(``runs``) and the numeric settings of a run (``numerics``). The algorithms live in :mod:`fedlib.algorithms`."""
