"""Functional local training: one client's SGD as a pure function of tensors (``local_train``).

``sgd_step`` is exactly ``torch.optim.SGD`` (dampening 0, no Nesterov); ``client_batch_order`` visits the data as
a ``DataLoader(shuffle=True)`` with that generator would. Every (round, client) has its own generators seeded from
``client_seed(seed, round, client_id)``, so a client's training does not depend on the other clients.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.func import functional_call

from fedlib.seeds import CLIENT_STREAMS, STREAMS

__all__ = [
    "LocalHyperParams",
    "LocalResult",
    "model_state",
    "trainable_keys",
    "sgd_step",
    "sgd_update",
    "client_batch_order",
    "client_seed",
    "make_generator",
    "client_generators",
    "cap_batches",
    "local_train",
    "train_step",
]

Params = dict[str, torch.Tensor]

_TRAIN_STREAM = STREAMS["training"]  # keeps the training seeds apart from the other streams of config.seed


@dataclass(frozen=True)
class LocalHyperParams:
    """Client optimiser settings of one round for one client (``lr`` after decay; ``epochs`` fewer for a straggler)."""

    lr: float
    momentum: float = 0.9
    weight_decay: float = 5e-4
    batch_size: int = 64
    epochs: int = 5


@dataclass
class LocalResult:
    """What one client returns after local training: its model state, SGD steps τ_i, samples n_k, epochs, mean
    mini-batch loss, the optimiser settings (FedNova and SCAFFOLD need them), its id and ``state_delta``, what it
    uploads beside its model (set by the trainer from ``Algorithm.update_client_state``)."""

    params: Params
    num_steps: int
    num_samples: int
    epochs: int
    train_loss: float
    lr: float
    momentum: float
    weight_decay: float
    client_id: int = -1
    state_delta: dict = field(default_factory=dict)


def model_state(model: torch.nn.Module) -> Params:
    """Detached copies of all named parameters and buffers of ``model`` (the ``params`` dict)."""
    state = {k: v.detach().clone() for k, v in model.named_parameters()}
    state.update({k: v.detach().clone() for k, v in model.named_buffers()})
    return state


def trainable_keys(model: torch.nn.Module) -> tuple[str, ...]:
    """Names of the parameters that require grad, in the model's order."""
    return tuple(k for k, v in model.named_parameters() if v.requires_grad)


def sgd_step(params: Params, grads: Params, bufs: Params, *, lr: float, momentum: float, weight_decay: float):
    """One ``torch.optim.SGD`` step on the keys of ``grads`` (other keys unchanged): ``d = g + wd·p``, ``buf = d`` on
    the first step (``bufs`` empty), later ``buf = m·buf + d``, ``p ← p − lr·buf``. Returns ``(new_params,
    new_bufs)``; inputs are not modified."""
    keys = list(grads)
    first = momentum != 0 and any(bufs.get(k) is None for k in keys)
    if first and any(k in bufs for k in keys):
        raise ValueError("bufs must hold a momentum buffer for every key of grads, or none (first step).")
    new_p, new_b = sgd_update(
        [params[k] for k in keys],
        [grads[k] for k in keys],
        None if first or momentum == 0 else [bufs[k] for k in keys],
        lr=lr,
        momentum=momentum,
        weight_decay=weight_decay,
    )
    new_params = dict(params)
    new_params.update(zip(keys, new_p))
    return new_params, ({} if new_b is None else dict(zip(keys, new_b)))


def sgd_update(
    params: list, grads: list, bufs: list | None, *, lr: float, momentum: float, weight_decay: float
) -> tuple[list, list | None]:
    """:func:`sgd_step` on lists of tensors with ``torch._foreach_*`` ops (``bufs`` None: the first step); on CPU
    they run the per-tensor ops in turn, bitwise the per-tensor loop's."""
    d = list(grads) if weight_decay == 0 else torch._foreach_add(grads, params, alpha=weight_decay)
    if momentum != 0:
        bufs = [t.clone() for t in d] if bufs is None else torch._foreach_add(torch._foreach_mul(bufs, momentum), d)
        d = bufs
    else:
        bufs = None
    return torch._foreach_add(params, d, alpha=-lr), bufs


def client_batch_order(
    num_samples: int, batch_size: int, epochs: int, generator: torch.Generator
) -> list[torch.Tensor]:
    """Mini-batch index tensors (int64, on the generator's device): per epoch one ``torch.randperm`` cut into
    batches of ``batch_size``, the last partial batch kept."""
    if num_samples < 1:
        return []
    order: list[torch.Tensor] = []
    for _ in range(epochs):
        perm = torch.randperm(num_samples, generator=generator, device=generator.device)
        order.extend(perm.split(batch_size))
    return order


def _on_device(batches: list[torch.Tensor], device) -> list[torch.Tensor]:
    """The batches on ``device`` with one host-to-device copy for all of them (not one per step)."""
    if not batches or batches[0].device == torch.device(device):
        return batches
    return list(torch.cat(batches).to(device).split([int(b.shape[0]) for b in batches]))


def client_seed(seed: int, round_index: int, client_id: int, stream: int = CLIENT_STREAMS["batch_order"]) -> int:
    """63-bit seed of the generator ``stream`` (:data:`fedlib.seeds.CLIENT_STREAMS`) of a client in a round."""
    ss = np.random.SeedSequence([int(seed), _TRAIN_STREAM, int(round_index), int(client_id), int(stream)])
    return int(ss.generate_state(1, np.uint64)[0] & np.uint64((1 << 63) - 1))


def make_generator(seed: int, device="cpu") -> torch.Generator:
    """A ``torch.Generator`` on ``device`` seeded with ``seed``."""
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g


def client_generators(seed: int, round_index: int, client_id: int, device) -> tuple[torch.Generator, torch.Generator]:
    """``(batch order, augmentation)`` generators of a client in a round: the first on the CPU, the second on
    ``device`` (the data's)."""
    order = make_generator(client_seed(seed, round_index, client_id, CLIENT_STREAMS["batch_order"]), "cpu")
    augment = make_generator(client_seed(seed, round_index, client_id, CLIENT_STREAMS["augmentation"]), device)
    return order, augment


def cap_batches(x: torch.Tensor, y: torch.Tensor, hp: LocalHyperParams, max_batches: int, generator: torch.Generator):
    """``(x, y, hp)`` for ``max_batches`` mini-batches in random order: the samples
    ``torch.randperm(n)[: max_batches * batch_size]`` (from ``generator``) and one epoch over them."""
    idx = torch.randperm(int(y.shape[0]), generator=generator)[: max_batches * hp.batch_size].to(y.device)
    return x[idx], y[idx], dataclasses.replace(hp, epochs=1)


def train_step(model, keys, train: Params, other: Params, global_params: Params, xb, yb, ctx, algorithm, hp, opt_bufs):
    """One SGD step of :func:`local_train` on a transformed batch: forward, loss, gradients, ``correct_grads``,
    :func:`sgd_step`, ``after_step``; returns the new trainable tensors, momentum buffers and the detached loss."""
    leaves = {k: v.requires_grad_(True) for k, v in train.items()}
    logits = functional_call(model, {**leaves, **other}, (xb,))
    loss = algorithm.loss(logits, yb, params=leaves, global_params=global_params, ctx=ctx)
    grads = torch.autograd.grad(loss, [leaves[k] for k in keys])
    grads = algorithm.correct_grads(dict(zip(keys, grads)), ctx=ctx)
    with torch.no_grad():
        detached = {k: v.detach() for k, v in leaves.items()}
        train, opt_bufs = sgd_step(
            detached, grads, opt_bufs, lr=hp.lr, momentum=hp.momentum, weight_decay=hp.weight_decay
        )
        if algorithm.has_after_step:
            train = algorithm.after_step(train, ctx=ctx, lr=hp.lr)
    return train, opt_bufs, loss.detach()


def local_train(
    model: torch.nn.Module,
    params: Mapping[str, torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    ctx: Mapping[str, torch.Tensor],
    algorithm,
    hp: LocalHyperParams,
    generator: torch.Generator,
    *,
    transform: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None,
    aug_generator: torch.Generator | None = None,
    client_id: int = -1,
) -> LocalResult:
    """Train one client for ``hp.epochs`` epochs of mini-batch SGD from ``params`` with the algorithm's hooks.

    ``x``/``y`` are on the compute device, ``x`` in the form ``transform(xb, aug_generator)`` expects
    (``aug_generator`` defaults to ``generator``, which draws the batch order). Buffers are updated as in train
    mode; ``model`` only supplies the architecture.
    """
    keys = algorithm.trainable if algorithm.trainable else trainable_keys(model)
    global_params = {k: params[k].detach() for k in keys}
    train = {k: params[k].detach().clone() for k in keys}
    other = {k: v.detach().clone() for k, v in params.items() if k not in train}
    opt_bufs: Params = {}
    was_training = model.training
    model.train()
    loss_sum = None
    steps = 0
    aug_generator = generator if aug_generator is None else aug_generator
    try:
        for idx in _on_device(client_batch_order(int(y.shape[0]), hp.batch_size, hp.epochs, generator), y.device):
            xb, yb = x[idx], y[idx]
            if transform is not None:
                xb = transform(xb, aug_generator)
            train, opt_bufs, loss = train_step(
                model, keys, train, other, global_params, xb, yb, ctx, algorithm, hp, opt_bufs
            )
            loss_sum = loss if loss_sum is None else loss_sum + loss
            steps += 1
    finally:
        model.train(was_training)
    out = {k: (train[k].detach() if k in train else other[k]) for k in params}
    return LocalResult(
        params=out,
        num_steps=steps,
        num_samples=int(y.shape[0]),
        epochs=hp.epochs,
        train_loss=float(loss_sum / steps) if steps else float("nan"),
        lr=hp.lr,
        momentum=hp.momentum,
        weight_decay=hp.weight_decay,
        client_id=client_id,
    )
