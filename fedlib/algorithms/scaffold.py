"""SCAFFOLD (Karimireddy et al., ICML 2020), control variates with option II.

Server control variate c and client control variates c_i (all zero at the start).  Client i starts from the
global model x and trains with the corrected gradient

    g̃ = ∇F_i(y) − c_i + c                    (``correct_grads``; the correction enters the SGD step like the
                                              gradient, i.e. before weight decay and inside the momentum buffer)

for K_i local steps with learning rate η, ending at y_i.  Option II update of its control variate:

    c_i⁺ = c_i − c + (x − y_i) / (a_i · η),        Δc_i = c_i⁺ − c_i

Option II estimates the client's average corrected gradient from its displacement. The SCAFFOLD paper trains
with plain SGD, where a_i = K_i. The FedEntOpt paper trains with momentum ρ = 0.9 (§V-A5), where K_i steps
move the model by about η·a_i average gradients with a_i = Σ_{t=1}^{K_i} (1 − ρ^t)/(1 − ρ), about 10·K_i. Dividing by
K_i·η then makes the control variates ~10x too large; with the correction inside the momentum buffer the run
diverges to chance accuracy (measured on IID MNIST in fedlib's tests). ``normaliser`` chooses:
``"momentum"`` (default) a_i as above, FedNova's normaliser (:func:`fedlib.algorithms.fednova.fednova_normaliser`);
``"steps"`` the literal a_i = K_i. Both agree when momentum is 0.

Where the correction enters (``correction``):

``"gradient"`` (default; fedlib's formulation, used by the quick and subset tiers)
    g̃ = ∇F_i(y) − c_i + c as above: the correction passes through weight decay's sum and the momentum buffer,
    and the normaliser is ``"momentum"`` unless given.
``"after_step"`` (NIID-Bench's formulation, Li et al., ICDE 2022, the baseline code FedEntOpt cites for its
    partitions and its SCAFFOLD/FedNova observation; used by the paper tier)
    the client runs plain momentum SGD on ∇F_i and after every optimiser step sets y ← y − η·(c − c_i), outside
    the momentum buffer; the normaliser is ``"steps"`` (x − y_i)/(K_i·η) unless given.  NIID-Bench also shifts
    non-trainable buffers (BatchNorm statistics) this way; fedlib corrects the trainable parameters only (the
    paper's LeNet-5 and VGG-11 have no buffers).

Server, with S the uploading clients and N the pool size (global learning rate η_g = 1):

    x⁺ = x + Σ_{i∈S} p_i (y_i − x) = Σ_i p_i y_i     (p_i = n_i/Σ n_j: the paper's FedAvg weighting, §V-A5)
    c⁺ = c + (|S|/N) · (1/|S|) Σ_{i∈S} Δc_i = c + (1/N) Σ_{i∈S} Δc_i

In the first round every control variate is zero, so that round is exactly FedAvg.

State layout (all ``dict[str, Tensor]``):
  server state ``{"c:" + key: (shape of key)}`` for every trainable key, plus ``"num_clients": ()`` int64;
  client state ``{key: c_i[key]}``;
  client context ``{"corr:" + key: c − c_i}`` -- a batched caller stacks each entry along the client axis.
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
    """SCAFFOLD, option II, global learning rate 1 (module docstring).

    ``correction`` in {"gradient", "after_step"}; ``normaliser`` in {"momentum", "steps"}, default ``"momentum"``
    for ``"gradient"`` and ``"steps"`` for ``"after_step"`` (NIID-Bench's pair).
    """

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
