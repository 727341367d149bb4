"""Label DP of FedEntOpt (Lutz et al., v2 §V-B2): the Laplace mechanism of eq. (7) applied to label counts."""

from __future__ import annotations

import numpy as np

from fedlib._validate import check_choice, check_count_matrix, check_float, check_rng

__all__ = ["SENSITIVITY", "NEGATIVE_MODES", "laplace_counts"]

#: L1 sensitivity of a label-count vector under Definition 1 (neighbours differ by one sample: ||d - d'||_1 = 1).
SENSITIVITY = 1.0
#: How negative noisy counts are handled: "keep" leaves them (default, as the paper uploads them), "clip" sets them to
#: 0.
NEGATIVE_MODES = ("clip", "keep")


def laplace_counts(counts, epsilon: float, *, rng, negative: str = "keep") -> np.ndarray:
    """Perturb every client's label counts once with the Laplace mechanism, eq. (7): ``l + Lap(1/epsilon)``.

    Each entry gets independent noise ``Z ~ Lap(0, SENSITIVITY / epsilon)``, which makes each client's
    upload epsilon-DP (Definition 1, eq. 6). The paper applies it once before round 1 "without any
    further preprocessing", and the server then selects with the noisy counts.

    Negative noisy counts: entropy (eq. 5) is undefined for negative mass, so the handling is explicit.

    - ``"keep"`` (default, the paper's upload): the raw noisy values are returned. Selectors in
      :mod:`fedlib.selection.selectors` accept them and score every pooled vector as ``max(L + l^(m), 0)``
      (entries clipped at 0 *after* pooling, so negative noise can cancel positive noise of other
      clients first; ``tests/test_privacy.py`` checks it).
    - ``"clip"``: negative entries are set to 0 on the server before selection. Clipping is
      post-processing, so the epsilon-DP guarantee is unchanged, and every downstream quantity
      (entropy, coverage, cosine distance) is then computed on genuine non-negative count vectors.

    Parameters
    ----------
    counts : array_like, shape (K, C)
        True, non-negative label counts.
    epsilon : float
        Privacy budget, > 0 (the paper uses 0.5). Smaller means more noise (scale 1/epsilon).
    rng : numpy.random.Generator
        Source of the noise.
    negative : {"keep", "clip"}
        Handling of negative noisy entries, see above.

    Returns
    -------
    numpy.ndarray of float, shape (K, C)

    Examples
    --------
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
