"""FedNova: normalised averaging (Wang et al., NeurIPS 2020, "Tackling the Objective Inconsistency Problem in
Heterogeneous Federated Optimization").

Clients train exactly as in FedAvg.  Client i with τ_i local SGD steps and momentum ρ returns y_i; its
cumulative-gradient normaliser is ‖a_i‖₁, the sum of the coefficients with which its τ_i gradients enter
x − y_i:

    a_i = τ_i                                             (ρ = 0, plain SGD)
    a_i = Σ_{t=1}^{τ_i} (1 − ρ^t)/(1 − ρ)
        = [τ_i − ρ(1 − ρ^{τ_i})/(1 − ρ)] / (1 − ρ)        (momentum ρ; Wang et al. 2020, Appendix / eq. for
                                                             momentum SGD; the same expression is used by
                                                             NIID-Bench, Li et al. ICDE 2022, ``a_i`` in
                                                             ``experiments.py``)

The server forms the normalised update and rescales it by the effective number of steps:

    d_i   = (x − y_i) / a_i
    τ_eff = Σ_i p_i a_i,        p_i = n_i / Σ_{j∈S} n_j
    x⁺    = x − τ_eff · Σ_i p_i d_i

(the learning rate cancels between d_i and x⁺, so it does not appear).  Weight decay is not part of a_i (as in
NIID-Bench).  With equal τ_i and ρ = 0 this is FedAvg up to float rounding (a_i cancels).  Buffers that are
not trainable (batch-norm statistics) are averaged with p_i.  Arithmetic is done in float64 and cast back.
"""

from __future__ import annotations

import numpy as np
import torch

from fedlib.algorithms.base import Algorithm, weighted_average

__all__ = ["FedNova", "fednova_normaliser"]


def fednova_normaliser(num_steps: int, momentum: float) -> float:
    """‖a_i‖₁ for ``num_steps`` SGD steps with momentum ``momentum`` (see the module docstring)."""
    tau = float(num_steps)
    rho = float(momentum)
    if rho == 0.0:
        return tau
    return (tau - rho * (1.0 - rho**tau) / (1.0 - rho)) / (1.0 - rho)


class FedNova(Algorithm):
    """FedNova (no hyper-parameters; ρ is the client optimiser's momentum)."""

    name = "fednova"

    def aggregate(self, global_params, results, weights, server_state):
        p = np.asarray(weights, dtype=np.float64)
        a = np.array([fednova_normaliser(r.num_steps, r.momentum) for r in results], dtype=np.float64)
        keep = a > 0  # a client with no step has no update and no weight in τ_eff
        if not keep.any():
            return {k: v.clone() for k, v in global_params.items()}, server_state
        tau_eff = float(np.sum(p * a))
        new = weighted_average([r.params for r in results], weights)  # buffers (and fallback)
        for k in self.trainable:
            x = global_params[k].to(torch.float64)
            acc = torch.zeros_like(x)
            for pi, ai, r in zip(p, a, results):
                if ai > 0:
                    acc += (pi / ai) * (x - r.params[k].to(torch.float64))
            new[k] = (x - tau_eff * acc).to(global_params[k].dtype)
        return new, server_state
