"""FedNova: normalised averaging (Wang et al., NeurIPS 2020).

Clients train as in FedAvg. Client i with τ_i steps and momentum ρ has normaliser a_i = Σ_{t=1}^{τ_i} (1 − ρ^t)/(1 − ρ)
(τ_i for ρ = 0; as NIID-Bench's ``a_i``). The server sets d_i = (x − y_i)/a_i, τ_eff = Σ_i p_i a_i and
x⁺ = x − τ_eff · Σ_i p_i d_i (p_i = n_i / Σ n_j), in float64; non-trainable buffers are averaged with p_i.
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
