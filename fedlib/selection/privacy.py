"""Label DP of FedEntOpt (Lutz et al., v2 §V-B2): the Laplace mechanism of eq. (7) applied to label counts."""

from __future__ import annotations

import numpy as np

from fedlib._validate import check_choice, check_count_matrix, check_float, check_rng

__all__ = ["SENSITIVITY", "NEGATIVE_MODES", "laplace_counts"]

#: L1 sensitivity of a label-count vector under Definition 1 (neighbours differ by one sample: ||d - d'||_1 = 1).
SENSITIVITY = 1.0
#: How negative noisy counts are handled: "keep" leaves them (the paper's upload), "clip" sets them to 0.
NEGATIVE_MODES = ("clip", "keep")


def laplace_counts(counts, epsilon: float, *, rng, negative: str = "keep") -> np.ndarray:
    """The (K, C) label counts with independent noise ``Lap(0, SENSITIVITY / epsilon)`` on every entry, eq. (7):
    each client's upload is epsilon-DP (Definition 1, eq. 6); the paper applies it once, before round 1.

    ``epsilon`` > 0 (the paper: 0.5). ``negative="keep"`` returns negative noisy counts as they are (the selectors
    clip a pooled vector at 0 after pooling); ``"clip"`` sets them to 0, post-processing that keeps the guarantee.

    >>> noisy = laplace_counts([[10, 0], [3, 7]], 0.5, rng=np.random.default_rng(0), negative="clip")
    >>> noisy.shape, bool((noisy >= 0).all())
    ((2, 2), True)
    """
    arr = check_count_matrix("counts", counts)
    epsilon = check_float("epsilon", epsilon, low=0.0, low_open=True)
    rng = check_rng("rng", rng)
    check_choice("negative", negative, NEGATIVE_MODES)
    noisy = arr + rng.laplace(0.0, SENSITIVITY / epsilon, size=arr.shape)
    if negative == "clip":
        np.maximum(noisy, 0.0, out=noisy)
    return noisy
