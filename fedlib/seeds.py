"""The seed streams of an experiment: every random draw comes from ``SeedSequence([seed, STREAMS[name]])``, so
changing one part of an experiment never changes another part's draws. The numbers are part of the stored results.
"""

from __future__ import annotations

import numpy as np

from fedlib._validate import check_choice, check_int

__all__ = ["STREAMS", "CLIENT_STREAMS", "stream_rng"]

#: Stream name -> the second entry of its ``SeedSequence``.
STREAMS = {
    "partition": 1,  # which client holds which samples (fedlib.data.partition)
    "selection": 2,  # the selector's generator, every round (fedlib.selection.selectors)
    "availability": 3,  # dropout and straggler epochs, every round
    "stragglers": 4,  # the straggler set, once per run
    "label_dp": 5,  # Laplace noise on the label counts the server sees (fedlib.selection.privacy)
    "model_init": 6,  # the initial model's weights
    "clustering": 7,  # FedConcat's k-means on the label counts
    "head_init": 8,  # FedConcat's concatenated classifier
    "coverage": 9,  # label-only Monte Carlo of uniform random subsets (fedlib.label_only.simulate.coverage_probability)
    "liars": 15,  # which clients lie about their labels (a study of lying clients)
    "training": 0x7472,  # "tr": per-(round, client) training generators (fedlib.training.local.client_seed)
}

#: The generators one client uses in one round, within the "training" stream (fedlib.training.local.client_seed's
#: ``stream`` argument; fedlib.training.local.client_generators makes the first two).
CLIENT_STREAMS = {
    "batch_order": 0,  # the order of the mini-batches (on the CPU)
    "augmentation": 1,  # random crops and flips (on the data's device)
    "torch_rng": 2,  # the global torch RNG while the client trains (layers such as dropout)
}


def _entropy(seed: int, name: str) -> list[int]:
    seed = check_int("seed", seed, low=0)
    return [seed, STREAMS[check_choice("name", name, STREAMS)]]


def stream_rng(seed: int, name: str) -> np.random.Generator:
    """The numpy generator of stream ``name`` (a key of :data:`STREAMS`) for experiment ``seed``."""
    return np.random.default_rng(np.random.SeedSequence(_entropy(seed, name)))
