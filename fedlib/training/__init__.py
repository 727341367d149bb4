"""Federated training: the configuration (``config``), the trainer (``trainer``), local training per client
(``local``) and all clients of a round at once (``batched``), the models (``models``) and their pooling layer
(``pooling``), run tables and the run cache (``runs``) and the numeric settings of a run (``numerics``). The
algorithms live in :mod:`fedlib.algorithms`.

Budget about 1,700 lines; over it because the batched engine (``batched``) keeps a CPU kernel beside the GPU one
and its options for the GPU (compile, CUDA graphs, bf16), each held equal to ``local_train`` by a test."""
