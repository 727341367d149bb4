"""Federated training: the configuration (``config``), the trainer (``trainer``), local training per client
(``local``) and all clients of a round at once (``batched``), the models (``models``), run tables and the run store
(``runs``), sweeps on Ray (``distributed``), the floating-point environment of a run (``float_env``, ``numerics``)
and the GPU cost model (``cost_model``). The algorithms live in :mod:`fedlib.algorithms`."""
