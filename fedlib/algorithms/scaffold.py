"""SCAFFOLD (Karimireddy et al., ICML 2020), control variates with option II, global learning rate 1.

Client i trains from the global model x with the corrected gradient g̃ = ∇F_i(y) − c_i + c for K_i steps of lr η,
ending at y_i, then updates (option II) c_i⁺ = c_i − c + (x − y_i) / (a_i · η), uploading Δc_i = c_i⁺ − c_i.
The server sets x⁺ = Σ_i p_i y_i (p_i = n_i / Σ n_j) and c⁺ = c + (1/N) Σ_{i∈S} Δc_i.

``normaliser``: a_i = K_i (``"steps"``, the paper's plain SGD) or FedNova's Σ_t (1 − ρ^t)/(1 − ρ) (``"momentum"``):
under momentum ρ the displacement holds about a_i average gradients, and K_i makes the control variates too large.
``correction``: ``"gradient"`` adds c − c_i to the gradient (before weight decay, inside the momentum buffer;
normaliser ``"momentum"`` unless given); ``"after_step"`` is NIID-Bench's (Li et al., ICDE 2022): plain momentum
SGD, then y ← y − η·(c − c_i) after every step (normaliser ``"steps"`` unless given; trainable parameters only).

State: server ``{"c:" + key}`` plus ``"num_clients"``; client ``{key: c_i}``; context ``{"corr:" + key: c − c_i}``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fedlib._validate import check_choice
from fedlib.algorithms.base import Algorithm, HParams, weighted_average
from fedlib.algorithms.fednova import fednova_normaliser

NORMALISERS = ("momentum", "steps")
CORRECTIONS = ("gradient", "after_step")

__all__ = ["Scaffold"]


class Scaffold(Algorithm):
    """SCAFFOLD (module docstring); ``normaliser`` defaults by ``correction`` (NIID-Bench's pair for "after_step")."""

    name = "scaffold"
    upload_factor = 2  # the model y_i and the control-variate change Δc_i

    @dataclass(frozen=True)
    class HParams(HParams):
        """``normaliser`` in ``NORMALISERS`` (None: by ``correction``, stored resolved); ``correction`` in
        ``CORRECTIONS``."""

        normaliser: str | None = None
        correction: str = "gradient"

        def __post_init__(self):
            check_choice("correction", self.correction, CORRECTIONS)
            if self.normaliser is None:
                object.__setattr__(self, "normaliser", "momentum" if self.correction == "gradient" else "steps")
            check_choice("normaliser", self.normaliser, NORMALISERS)

    @property
    def has_after_step(self) -> bool:
        """True for ``correction="after_step"``: the correction is applied after every optimiser step."""
        return self.hparams.correction == "after_step"

    def init_server_state(self, global_params, *, num_clients):
        state = {"c:" + k: torch.zeros_like(global_params[k]) for k in self.trainable}
        state["num_clients"] = torch.tensor(int(num_clients), dtype=torch.int64)
        return state

    def init_client_state(self, global_params):
        return {k: torch.zeros_like(global_params[k]) for k in self.trainable}

    def client_context(self, client_id, label_counts, server_state, client_state):
        return {"corr:" + k: server_state["c:" + k] - client_state[k] for k in self.trainable}

    def correct_grads(self, grads, *, ctx):
        if self.has_after_step:
            return grads
        return {k: g + ctx["corr:" + k] for k, g in grads.items()}

    def after_step(self, params, *, ctx, lr):
        return {k: p.add(ctx["corr:" + k], alpha=-lr) for k, p in params.items()}

    def update_client_state(self, client_state, result, *, global_params, server_state, ctx, hp):
        if result.num_steps == 0:
            return client_state, {k: torch.zeros_like(v) for k, v in client_state.items()}
        if self.hparams.normaliser == "steps":
            steps = result.num_steps
        else:
            steps = fednova_normaliser(result.num_steps, result.momentum)
        scale = 1.0 / (steps * result.lr)
        new, delta = {}, {}
        for k in self.trainable:
            ci = client_state[k]
            new[k] = ci - server_state["c:" + k] + (global_params[k] - result.params[k]) * scale
            delta[k] = new[k] - ci
        return new, delta

    def aggregate(self, global_params, results, weights, server_state):
        new_global = weighted_average([r.params for r in results], weights)
        n = int(server_state["num_clients"])
        new_state = dict(server_state)
        for k in self.trainable:
            total = torch.zeros_like(server_state["c:" + k])
            for r in results:
                total = total + r.state_delta[k]
            new_state["c:" + k] = server_state["c:" + k] + total / n
        return new_global, new_state
