"""Batched local training: all picked clients of a round trained at once with ``torch.func.vmap``.

:func:`train_clients_batched` returns the same ``LocalResult`` list as calling
``fedlib.training.local.local_train`` once per client, in the order given, from the same ``torch.Generator`` objects:

* **Client axis** (``kernel="vmap"``, the default on CUDA). The trainable parameters and momentum buffers of
  the M clients are stacked along a leading axis; the client contexts (``Algorithm.client_context``) are
  stacked key by key. One local step is one ``vmap(grad(loss))`` call over all clients still training
  (``torch.func.functional_call`` on the model), the algorithm's ``correct_grads`` inside the vmap, then one
  SGD update on the stacked tensors with the same tensor ops as ``fedlib.training.local.sgd_step`` (and the algorithm's
  ``after_step`` on the stacked parameters and contexts, e.g. SCAFFOLD with ``correction="after_step"``).
  ``kernel="loop"`` (the default on CPU, where oneDNN's grouped convolutions are slower than separate ones)
  batches the gather, augmentation and SGD update (``torch._foreach_*`` over all clients' tensors) and runs
  the forward/backward per client on its exact batch: bitwise the reference result on CPU.
* **Same random draws.** Before training, each client's batch order is drawn with
  ``fedlib.training.local.client_batch_order`` from *its own* generator, then its augmentation uniforms one
  ``(batch, 7)`` draw per step from its augmentation generator -- exactly the sequence ``local_train`` draws, so
  the batches and augmentations agree for the same seeds (a client's stream never depends on other clients).
* **Unequal client sizes.** Client i takes ``τ_i = E_i · ceil(n_i / B)`` steps. ``shrink="compact"`` (default)
  drops a client from the stacked state at the step it finishes (its final state is stored, later steps vmap
  over fewer clients: no wasted compute under Dir(0.1) size skew); ``shrink="mask"`` keeps all M clients for
  ``max_i τ_i`` steps (fixed shapes, for ``torch.compile``/CUDA graphs) and a per-client ``active`` mask keeps
  the parameters and buffers of finished clients unchanged (``torch.where``).
* **Partial last batches.** A batch of r < B real samples is padded to the step's common width. The loss seen
  by ``grad`` is ``algorithm.loss`` on logits whose real rows carry a gradient scale ``B/r`` (forward value
  unchanged) and whose padded rows are a detached copy of row 0, so the gradient is exactly that of the mean
  over the r real samples; the reported loss value is ``(B·v − (B−r)·v0) / r`` with ``v0`` the loss of row 0
  repeated, which equals the mean over the real samples. Both identities need the contract's form of the
  loss: a mean over samples of per-sample terms plus terms of the parameters only (true for FedAvg, FedProx,
  FedNova, SCAFFOLD, FedRS, FedLC).
* **Augmentation on the device.** With ``transform = Preprocessor.train`` the augmentation of all clients'
  images of a step runs as one vectorised call fed with the pre-drawn uniforms (:func:`augment_from_uniforms`,
  op for op ``fedlib.data.augment.augment_batch``); any other callable is called per client and step.
* **Fallback.** Models with buffers (BatchNorm running statistics) or random layers (dropout, stochastic
  depth), algorithms outside the six above (FedConcat's phases, FedEntropy, unless they set
  ``supports_batched = True``), differing lr/momentum/weight decay/batch size across clients, or clients
  sharing one generator run the reference path (``local_train`` per client) with a ``UserWarning`` naming the
  reason (:func:`batching_unsupported_reason`).

Options (:class:`BatchedOptions`): ``compile`` (``torch.compile`` of the vmapped step; off by default),
``cuda_graphs`` (``mode="reduce-overhead"``, CUDA only), ``amp_dtype`` (e.g. ``torch.bfloat16`` autocast of the
forward; loss, gradients and SGD stay fp32), ``chunk_size`` (``vmap`` chunking to bound memory); a run sets them
in its configuration's ``engine_options`` (:func:`options_from_config`).

**Host traffic.** The batch orders, augmentation uniforms and per-step tables of a round are built before the
step loop and copied to the device once; a step copies nothing from the host and reads nothing back (on CUDA:
no synchronisation per step; ``tests/test_devices.py`` counts them with ``torch.cuda.set_sync_debug_mode``). The
host syncs of a round are one per client that finishes (compact shrinking) and one per client for its loss.

:func:`evaluate` scores one model on a test set in large batches on the device.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from fedlib._validate import ParameterError, check_choice, check_int, check_optional
from fedlib.data.augment import Preprocessor
from fedlib.training.local import (
    LocalHyperParams,
    LocalResult,
    client_batch_order,
    local_train,
    sgd_update,
    trainable_keys,
)

__all__ = [
    "BatchedOptions",
    "BATCHABLE_ALGORITHMS",
    "batching_unsupported_reason",
    "augment_from_uniforms",
    "train_clients_batched",
    "evaluate",
    "resolve_kernel",
    "options_from_config",
]

Params = dict[str, torch.Tensor]

#: Registry names of the algorithms whose client hooks are known to be vmappable and of the form the
#: partial-batch identities need (mean of per-sample terms + parameter-only terms).
BATCHABLE_ALGORITHMS = ("fedavg", "fedprox", "fednova", "scaffold", "fedrs", "fedlc")

_SHRINK = ("compact", "mask")
_KERNELS = ("auto", "vmap", "loop", "sequential")


@dataclass(frozen=True)
class BatchedOptions:
    """Settings of the batched engine.

    Attributes
    ----------
    shrink : {"compact", "mask"}
        How finished clients are handled: removed from the stacked state (``"compact"``, default, least
        compute) or kept and masked (``"mask"``, fixed shapes: every step vmaps over all M clients and pads every
        batch to B; use it with ``compile``/``cuda_graphs`` to avoid recompiles).
    compile : bool
        ``torch.compile`` the vmapped gradient function (default False; on CPU it rarely pays off). Use it with
        ``shrink="mask"``: fixed shapes, so two compiled variants (full and partial batches) per model and
        algorithm; ``"compact"`` recompiles for every width of the shrinking client set.
    cuda_graphs : bool
        Compile with ``mode="reduce-overhead"`` (CUDA graphs); needs ``compile=True`` and a CUDA device.
    amp_dtype : torch.dtype or None
        Autocast dtype of the forward/backward (``torch.bfloat16``); None (default) is fp32 throughout.
    chunk_size : int or None
        Passed to ``torch.func.vmap``: at most this many clients per internal chunk (bounds memory).
    kernel : {"auto", "vmap", "loop", "sequential"}
        How the per-client forward/backward of a step runs: one ``vmap(grad)`` call over the clients
        (``"vmap"``; convolutions become grouped convolutions) or a loop over the clients inside the step
        (``"loop"``; exact-size batches, no padding), with the gather, augmentation and SGD update batched in
        both; or no batching at all (``"sequential"``: ``local_train`` for one client after the other).
        ``"auto"`` (default) is ``"vmap"`` on CUDA. On CPU it is ``"loop"`` for models of at most
        ``cpu_loop_max_params`` trainable parameters and ``"sequential"`` above: oneDNN's grouped convolution
        measured ~2.5x slower than M separate convolutions (LeNet-5, M=10, B=64), and for a large model the
        loop kernel, which advances all M clients one step at a time, cycles M parameter sets through the CPU
        caches every step (VGG-11, 9.2M parameters: 13 % slower than one client after the other, measured with
        ``benchmarks/bench_trainer.py``). Every kernel gives the reference path's numbers.
    cpu_loop_max_params : int
        Threshold of ``"auto"`` on CPU (default 1,000,000: LeNet-5 batches, VGG-11 and EfficientNet do not).
    """

    shrink: str = "compact"
    compile: bool = False
    cuda_graphs: bool = False
    amp_dtype: torch.dtype | None = None
    chunk_size: int | None = None
    kernel: str = "auto"
    cpu_loop_max_params: int = 1_000_000

    def __post_init__(self):
        check_choice("kernel", self.kernel, _KERNELS)
        if self.compile and self.kernel in ("loop", "sequential"):
            allowed = "'vmap' or 'auto' with compile=True (the loop kernels are not compiled)"
            raise ParameterError(None, "kernel", self.kernel, allowed)
        check_choice("shrink", self.shrink, _SHRINK)
        if self.cuda_graphs and not self.compile:
            allowed = "False unless compile=True (CUDA graphs come from torch.compile(mode='reduce-overhead'))"
            raise ParameterError(None, "cuda_graphs", self.cuda_graphs, allowed)
        if self.amp_dtype not in (None, torch.bfloat16, torch.float16):
            raise ParameterError(None, "amp_dtype", self.amp_dtype, "None, torch.bfloat16 or torch.float16")
        check_optional(check_int, "chunk_size", self.chunk_size, low=1)


#: ``amp_dtype`` names of a configuration's ``engine_options`` (JSON) -> torch dtypes.
_AMP_DTYPES = {None: None, "bfloat16": torch.bfloat16, "float16": torch.float16}
#: ``engine_options`` keys that are not BatchedOptions fields (the CUDA numerics, ``fedlib.training.numerics``).
_NUMERICS_KEYS = ("tf32", "deterministic")


def options_from_config(engine_options: Mapping) -> BatchedOptions:
    """The ``BatchedOptions`` of a configuration's ``engine_options`` (``fedlib.training.config.ENGINE_OPTIONS``; the
    numerics keys ``tf32``/``deterministic`` are not engine options and are skipped)."""
    kw = {k: v for k, v in dict(engine_options).items() if k not in _NUMERICS_KEYS}
    if "amp_dtype" in kw:
        kw["amp_dtype"] = _AMP_DTYPES[check_choice("amp_dtype", kw["amp_dtype"], _AMP_DTYPES)]
    return BatchedOptions(**kw)


# --------------------------------------------------------------------------------------------- support checks
def _algorithm_name(algorithm) -> str:
    return str(getattr(algorithm, "name", type(algorithm).__name__))


def batching_unsupported_reason(
    model: torch.nn.Module, algorithm, hps: Sequence[LocalHyperParams] = (), generators: Sequence[torch.Generator] = ()
) -> str | None:
    """Why these clients cannot be trained by the batched engine, or None if they can.

    Checks the model (no buffers, no random layers), the algorithm (one of :data:`BATCHABLE_ALGORITHMS` or
    ``supports_batched = True``), that all clients share lr, momentum, weight decay and batch size, and that no
    two clients share a generator object.
    """
    flag = getattr(algorithm, "supports_batched", None)
    name = _algorithm_name(algorithm)
    if flag is False or (flag is None and name not in BATCHABLE_ALGORITHMS):
        if flag is False:
            return f"algorithm {name!r} is not batchable in this form ({algorithm!r} sets supports_batched = False)"
        return (
            f"algorithm {name!r} is not batchable (batched: {', '.join(BATCHABLE_ALGORITHMS)}; "
            f"others need supports_batched = True and vmappable client hooks)"
        )
    buffers = [k for k, _ in model.named_buffers()]
    if buffers:
        return (
            f"model {type(model).__name__} has buffers ({', '.join(buffers[:3])}{', ...' if len(buffers) > 3 else ''}"
            f"), e.g. BatchNorm running statistics, which a vmapped forward cannot update per client"
        )
    for mod_name, module in model.named_modules():
        random_layer = (
            isinstance(module, torch.nn.modules.dropout._DropoutNd) and module.p > 0
        ) or "StochasticDepth" in type(module).__name__
        if random_layer:
            return (
                f"model {type(model).__name__} has a random layer ({mod_name or 'root'}: "
                f"{type(module).__name__}) whose masks could not match the reference path"
            )
    if hps:
        for field_name in ("lr", "momentum", "weight_decay", "batch_size"):
            values = {getattr(hp, field_name) for hp in hps}
            if len(values) > 1:
                return f"clients differ in {field_name} ({sorted(values)}); the batched step shares it"
    if generators and len({id(g) for g in generators}) < len(generators):
        return "two clients share one torch.Generator; batching would change the order of their random draws"
    return None


# ---------------------------------------------------------------------------------------------- augmentation
def _preprocessor_of(transform) -> Preprocessor | None:
    """The Preprocessor if ``transform`` is a bound ``Preprocessor.train`` (the vectorised fast path)."""
    owner = getattr(transform, "__self__", None)
    func = getattr(transform, "__func__", None)
    if isinstance(owner, Preprocessor) and func is Preprocessor.train:
        return owner
    return None


def augment_from_uniforms(x: torch.Tensor, u: torch.Tensor, pre: Preprocessor) -> torch.Tensor:
    """``pre.train`` with the random draws given: ``u`` holds the (N, 7) uniforms ``augment_batch`` would draw.

    A thin name for :meth:`Preprocessor.train_with_uniforms`; ``tests/test_batched.py`` pins the equality with
    ``Preprocessor.train`` for the same generator.
    """
    return pre.train_with_uniforms(x, u)


# ------------------------------------------------------------------------------------------- the step kernel
def _make_grad_fn(model, algorithm, partial: bool, amp_dtype, device_type: str, chunk_size):
    """vmap over clients of ``(grads, loss_value)`` for one step; ``partial`` adds the padding identities."""

    def forward(train, other, x):
        if amp_dtype is None:
            return functional_call(model, {**train, **other}, (x,))
        with torch.autocast(device_type=device_type, dtype=amp_dtype):
            logits = functional_call(model, {**train, **other}, (x,))
        return logits.float()

    def full_loss(train, other, gp, x, y, rmask, scale, ctx):
        logits = forward(train, other, x)
        loss = algorithm.loss(logits, y, params=train, global_params=gp, ctx=ctx)
        return loss, loss.detach()

    def partial_loss(train, other, gp, x, y, rmask, scale, ctx):
        logits = forward(train, other, x)
        n = logits.shape[0]
        fixed = logits.detach()
        scaled = fixed + (logits - fixed) * scale  # value == logits; gradient × B/r on the real rows
        row0, y0 = fixed[0], y[0]
        mixed = torch.where(rmask.unsqueeze(-1), scaled, row0.expand_as(fixed))
        y_mixed = torch.where(rmask, y, y0.expand_as(y))
        v = algorithm.loss(mixed, y_mixed, params=train, global_params=gp, ctx=ctx)
        frozen = {k: t.detach() for k, t in train.items()}
        v0 = algorithm.loss(row0.expand_as(fixed), y0.expand_as(y), params=frozen, global_params=gp, ctx=ctx)
        real = rmask.sum().to(v.dtype)
        value = torch.where(real == n, v.detach(), (n * v.detach() - (n - real) * v0.detach()) / real)
        return v, value

    loss_fn = partial_loss if partial else full_loss

    def per_client(train, other, gp, x, y, rmask, scale, ctx):
        grads, value = grad(loss_fn, has_aux=True)(train, other, gp, x, y, rmask, scale, ctx)
        return algorithm.correct_grads(grads, ctx=ctx), value

    return vmap(per_client, in_dims=(0, None, None, 0, 0, 0, 0, 0), chunk_size=chunk_size)


# ----------------------------------------------------------------------------------------------- the planner
@dataclass
class _ClientPlan:
    idx: torch.Tensor  # (τ, B) global data indices, padded with the batch's first index
    count: list[int]  # real samples per step
    u: torch.Tensor | None  # (τ, B, 7) augmentation uniforms (zeros in padding), fast path only


def _plan_client(
    indices: torch.Tensor, hp: LocalHyperParams, generator, aug_generator, *, draw_uniforms: bool, device
) -> _ClientPlan:
    """Draw the client's batch order and (fast path) its augmentation uniforms in the reference order."""
    n, bsz = int(indices.shape[0]), hp.batch_size
    batches = client_batch_order(n, bsz, hp.epochs, generator)
    count = [int(b.shape[0]) for b in batches]
    if not batches:
        return _ClientPlan(torch.empty(0, bsz, dtype=torch.long, device=device), [], None)
    indices = indices.to(device)
    rows = []
    for b in batches:  # padded on the generator's device, then one copy of the (τ, B) table
        if b.shape[0] < bsz:
            b = torch.cat([b, b[:1].expand(bsz - b.shape[0])])
        rows.append(b)
    idx = indices[torch.stack(rows).to(device)]
    u = None
    if draw_uniforms:
        gen = aug_generator
        us = []
        for c in count:  # one (c, 7) draw per step, as local_train draws them; one copy of the table
            draw = torch.rand((c, 7), generator=gen, device=gen.device)
            if c < bsz:
                draw = torch.cat([draw, draw.new_zeros(bsz - c, 7)])
            us.append(draw)
        u = torch.stack(us).to(device)
    return _ClientPlan(idx, count, u)


# ------------------------------------------------------------------------------------------------ entry point
def _as_list(value, m: int, name: str) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != m:
            raise ValueError(f"{name} has {len(value)} entries but there are {m} clients.")
        return list(value)
    return [value] * m


def _stack_ctx(ctxs: Sequence[Mapping[str, torch.Tensor]], device) -> Params:
    keys = list(ctxs[0].keys()) if ctxs else []
    for i, c in enumerate(ctxs):
        if list(c.keys()) != keys:
            raise ValueError(
                f"client context {i} has keys {sorted(c)}, client 0 has {sorted(keys)}; "
                "all clients of a round must share the context keys."
            )
    return {k: torch.stack([c[k].to(device) for c in ctxs]) for k in keys}


_COMPILED: dict = {}


def cpu_compile_unsupported_reason() -> str | None:
    """Why ``compile=True`` cannot run on this CPU, or None.  torch's C++ backend (inductor) needs a vector
    instruction set here: without one (a CPU without AVX2, or ``ATEN_CPU_CAPABILITY=default``) torch 2.13's
    generated code still calls ``at::vec`` and fails to compile."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    if pick_vec_isa():
        return None
    cap = torch.backends.cpu.get_cpu_capability()
    return (
        f"torch.compile on this CPU (torch capability {cap}) has no vector instruction set, and torch "
        f"{torch.__version__}'s C++ backend then generates code that does not compile"
    )


def _compile_cache_per_capability() -> None:
    """Point torch's compile cache at a folder of this CPU capability, unless ``TORCHINDUCTOR_CACHE_DIR`` is set.
    The cache keys kernels by their source, not by the capability that chose their instructions: kernels cached
    under AVX-512 and loaded under ``ATEN_CPU_CAPABILITY=avx2`` (as the tests imitate another CPU) crash."""
    import os

    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    default = os.path.abspath(default_cache_dir())
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR", default) != default:  # torch writes its default in on first use
        return
    cap = torch.backends.cpu.get_cpu_capability().lower()
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(default, f"capability-{cap}")


def _check_cpu_compile() -> None:
    reason = cpu_compile_unsupported_reason()
    if reason is not None:
        raise ValueError(f"BatchedOptions(compile=True): {reason}; use compile=False on this machine.")


def _grad_fn(model, algorithm, partial, options: BatchedOptions, device_type):
    fn = _make_grad_fn(model, algorithm, partial, options.amp_dtype, device_type, options.chunk_size)
    if not options.compile:
        return fn
    key = (id(model), id(algorithm), partial, options)
    if key not in _COMPILED:
        # every compiled step shares the code object of ``per_client``, so dynamo's per-code cache (default 8
        # entries) fills up with (full, partial) x widths x algorithms and then silently runs eagerly
        import torch._dynamo

        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
        _compile_cache_per_capability()
        mode = "reduce-overhead" if options.cuda_graphs else None
        _COMPILED[key] = torch.compile(fn, mode=mode, dynamic=False)
    return _COMPILED[key]


def train_clients_batched(
    model: torch.nn.Module,
    global_params: Mapping[str, torch.Tensor],
    data_x: torch.Tensor,
    data_y: torch.Tensor,
    client_indices: Sequence[torch.Tensor],
    ctxs: Sequence[Mapping[str, torch.Tensor]],
    algorithm,
    hp: LocalHyperParams | Sequence[LocalHyperParams],
    generators: Sequence[torch.Generator],
    *,
    transform: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None,
    aug_generators: Sequence[torch.Generator] | None = None,
    client_ids: Sequence[int] | None = None,
    options: BatchedOptions | None = None,
) -> list[LocalResult]:
    """Train M clients from ``global_params`` at once; returns what ``local_train`` returns for each client.

    Parameters
    ----------
    model : torch.nn.Module
        Supplies the architecture only (its tensors are not touched), as in ``local_train``.
    global_params : dict of str to Tensor
        The round's global model state (``fedlib.training.local.model_state``), on the compute device.
    data_x, data_y : Tensor
        The whole training set on the compute device, held once (uint8 images if ``transform`` expects them).
    client_indices : list of 1-D int64 Tensor
        Client i's rows of ``data_x``/``data_y`` (its ``local_train`` data is ``data_x[client_indices[i]]``).
    ctxs : list of dict
        ``algorithm.client_context(...)`` of each client (same keys and shapes for all).
    algorithm : fedlib.algorithms.Algorithm
        Bound to the model's trainable keys (``algorithm.bind``).
    hp : LocalHyperParams or list of them
        One for all clients or one per client (epochs may differ, e.g. stragglers; lr, momentum, weight decay
        and batch size must agree).
    generators : list of torch.Generator
        Client i's training generator, seeded as the reference path seeds it (``make_generator(client_seed(...))``).
    transform, aug_generators, client_ids
        As ``local_train``'s ``transform``, ``aug_generator`` (per client; default: ``generators``) and
        ``client_id``.
    options : BatchedOptions, optional
        Engine settings (defaults: compact shrinking, no compile, fp32).

    Returns
    -------
    list of LocalResult
        One per client, in the order given.

    Notes
    -----
    Unsupported cases (see :func:`batching_unsupported_reason`) run ``local_train`` per client after a
    ``UserWarning`` that names the reason.
    """
    options = options or BatchedOptions()
    m = len(client_indices)
    if m == 0:
        return []
    hps = _as_list(hp, m, "hp")
    ctxs = _as_list(ctxs, m, "ctxs") if isinstance(ctxs, (list, tuple)) else [ctxs] * m
    gens = _as_list(generators, m, "generators")
    aug_gens = gens if aug_generators is None else _as_list(aug_generators, m, "aug_generators")
    ids = list(client_ids) if client_ids is not None else [-1] * m
    if len(ids) != m:
        raise ValueError(f"client_ids has {len(ids)} entries but there are {m} clients.")

    reason = batching_unsupported_reason(model, algorithm, hps, gens)
    if reason is None and aug_generators is not None and len({id(g) for g in aug_gens}) < m:
        reason = "two clients share one augmentation generator"
    if reason is not None:
        warnings.warn(
            f"fedlib.training.batched: falling back to the reference path (local_train per client): {reason}.",
            UserWarning,
            stacklevel=2,
        )
    device = data_x.device
    if options.compile and device.type == "cpu":
        _check_cpu_compile()
    kernel = resolve_kernel(options, model, device)
    if reason is not None or kernel == "sequential":
        return [
            local_train(
                model,
                global_params,
                data_x[ci],
                data_y[ci],
                ctxs[i],
                algorithm,
                hps[i],
                gens[i],
                transform=transform,
                aug_generator=aug_gens[i],
                client_id=ids[i],
            )
            for i, ci in enumerate(client_indices)
        ]

    keys = algorithm.trainable if algorithm.trainable else trainable_keys(model)
    gp = {k: global_params[k].detach() for k in keys}
    other = {k: v.detach() for k, v in global_params.items() if k not in gp}
    h0 = hps[0]
    bsz = h0.batch_size
    pre = _preprocessor_of(transform)
    plans = [
        _plan_client(ci, hps[i], gens[i], aug_gens[i], draw_uniforms=pre is not None and pre.augment, device=device)
        for i, ci in enumerate(client_indices)
    ]
    tau = [len(p.count) for p in plans]
    trained = [i for i in range(m) if tau[i] > 0]

    final: dict[int, Params] = {}
    loss_sum: dict[int, torch.Tensor] = {}
    if trained:
        final, loss_sum = _run(
            model,
            algorithm,
            keys,
            gp,
            other,
            data_x,
            data_y,
            plans,
            tau,
            trained,
            [ctxs[i] for i in trained],
            transform,
            pre,
            [aug_gens[i] for i in trained],
            h0,
            bsz,
            options,
            device,
            kernel,
        )
    results = []
    for i in range(m):
        if tau[i] > 0:
            out = {k: (final[i][k] if k in final[i] else global_params[k].detach().clone()) for k in global_params}
            loss = float(loss_sum[i] / tau[i])
        else:
            out = {k: v.detach().clone() for k, v in global_params.items()}
            loss = float("nan")
        results.append(
            LocalResult(
                params=out,
                num_steps=tau[i],
                num_samples=int(client_indices[i].shape[0]),
                epochs=hps[i].epochs,
                train_loss=loss,
                lr=h0.lr,
                momentum=h0.momentum,
                weight_decay=h0.weight_decay,
                client_id=ids[i],
            )
        )
    return results


def resolve_kernel(options: BatchedOptions, model: torch.nn.Module, device: torch.device) -> str:
    """The kernel ``options.kernel`` stands for on ``device`` (see :class:`BatchedOptions`)."""
    if options.kernel != "auto":
        return options.kernel
    if device.type == "cuda":
        return "vmap"
    size = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return "loop" if size <= options.cpu_loop_max_params else "sequential"


def _run(
    model,
    algorithm,
    keys,
    gp,
    other,
    data_x,
    data_y,
    plans,
    tau,
    trained,
    ctxs,
    transform,
    pre,
    aug_gens,
    h0,
    bsz,
    options,
    device,
    kernel,
):
    """The step loop over the clients in ``trained`` (positions into ``plans``) with the resolved ``kernel``."""
    compact = options.shrink == "compact"
    fixed_width = not compact or options.compile
    width = len(trained)
    steps = max(tau[i] for i in trained)
    # (W, T, B) index table, (W, T) real counts; finished steps: first index, full count (masked in "mask" mode)
    idx = torch.zeros(width, steps, bsz, dtype=torch.long, device=device)
    count = torch.full((width, steps), bsz, dtype=torch.long)
    u = torch.zeros(width, steps, bsz, 7, device=device) if plans[trained[0]].u is not None else None
    for j, i in enumerate(trained):
        idx[j, : tau[i]] = plans[i].idx
        idx[j, tau[i] :] = plans[i].idx[0, 0]
        count[j, : tau[i]] = torch.tensor(plans[i].count)
        if u is not None:
            u[j, : tau[i]] = plans[i].u
    tau_t = torch.tensor([tau[i] for i in trained])
    if kernel == "loop":
        return _run_loop(
            model,
            algorithm,
            keys,
            gp,
            other,
            data_x,
            data_y,
            idx,
            count,
            u,
            tau_t,
            trained,
            ctxs,
            transform,
            pre,
            aug_gens,
            h0,
            options,
            device,
        )
    ctx = _stack_ctx(ctxs, device)
    params = [gp[k].unsqueeze(0).repeat(width, *([1] * gp[k].dim())) for k in keys]
    bufs = None
    losses = torch.zeros(width, device=device)
    rows = torch.arange(width)  # rows of the tables still in the stacked state (compact mode)
    # the tables on the device once per round: a step copies nothing from the host and reads nothing back
    rows_dev, count_dev, tau_dev = torch.arange(width, device=device), count.to(device), tau_t.to(device)
    final: dict[int, Params] = {}
    loss_sum: dict[int, torch.Tensor] = {}
    grad_fns = {}
    device_type = device.type
    was_training = model.training
    model.train()
    try:
        for t in range(steps):
            if compact:
                done = tau_t[rows] <= t
                if bool(done.any()):
                    keep = (~done).nonzero().flatten()
                    for j in done.nonzero().flatten().tolist():
                        i = trained[int(rows[j])]
                        final[i] = {k: p[j].clone() for k, p in zip(keys, params)}
                        loss_sum[i] = losses[j].clone()
                    keep_dev = keep.to(device)
                    params = [p[keep_dev] for p in params]
                    bufs = None if bufs is None else [b[keep_dev] for b in bufs]
                    losses = losses[keep_dev]
                    ctx = {k: v[keep_dev] for k, v in ctx.items()}
                    rows, rows_dev = rows[keep], rows_dev[keep_dev]
            cnt, cnt_dev = count[rows, t], count_dev[rows_dev, t]
            active = tau_t[rows] > t
            if not compact:  # finished clients compute on a dummy full batch, then are masked out
                cnt = torch.where(active, cnt, torch.full_like(cnt, bsz))
                active_dev = tau_dev[rows_dev] > t
                cnt_dev = torch.where(active_dev, cnt_dev, torch.full_like(cnt_dev, bsz))
            span = bsz if fixed_width else int(cnt.max())
            partial = bool((cnt < span).any())
            b_idx = idx[rows_dev, t, :span]
            xb, yb = data_x[b_idx], data_y[b_idx]
            if pre is not None:
                xb = augment_from_uniforms(xb, u[rows_dev, t, :span].reshape(-1, 7) if u is not None else None, pre)
            elif transform is not None:
                xb = _transform_per_client(transform, xb, cnt, [aug_gens[int(r)] for r in rows], active)
            rmask = torch.arange(span, device=device).unsqueeze(0) < cnt_dev.unsqueeze(1)
            scale = span / cnt_dev.to(torch.float32)
            if partial not in grad_fns:
                grad_fns[partial] = _grad_fn(model, algorithm, partial, options, device_type)
            grads, value = grad_fns[partial]({k: p for k, p in zip(keys, params)}, other, gp, xb, yb, rmask, scale, ctx)
            with torch.no_grad():
                g_list = [grads[k] for k in keys]
                new_params, new_bufs = sgd_update(
                    params, g_list, bufs, lr=h0.lr, momentum=h0.momentum, weight_decay=h0.weight_decay
                )
                if algorithm.has_after_step:  # stacked params and ctx: the same elementwise ops per client
                    stepped = algorithm.after_step(dict(zip(keys, new_params)), ctx=ctx, lr=h0.lr)
                    new_params = [stepped[k] for k in keys]
                if compact:
                    params, bufs = new_params, new_bufs
                    losses = losses + value
                else:
                    act = active_dev
                    params = [
                        torch.where(act.view(-1, *[1] * (p.dim() - 1)), pn, p) for p, pn in zip(params, new_params)
                    ]
                    if new_bufs is not None:
                        bufs = (
                            new_bufs
                            if bufs is None
                            else [
                                torch.where(act.view(-1, *[1] * (b.dim() - 1)), bn, b) for b, bn in zip(bufs, new_bufs)
                            ]
                        )
                    losses = torch.where(act, losses + value, losses)
    finally:
        model.train(was_training)
    for j, r in enumerate(rows.tolist()):
        i = trained[r]
        if i not in final:
            final[i] = {k: p[j].clone() for k, p in zip(keys, params)}
            loss_sum[i] = losses[j].clone()
    return final, loss_sum


def _run_loop(
    model,
    algorithm,
    keys,
    gp,
    other,
    data_x,
    data_y,
    idx,
    count,
    u,
    tau_t,
    trained,
    ctxs,
    transform,
    pre,
    aug_gens,
    h0,
    options,
    device,
):
    """The "loop" kernel: per step one gather + augmentation for all clients, then per client exactly
    ``local_train``'s forward/backward on its real rows, then one ``_foreach`` SGD update over all clients'
    tensors (per-client parameter lists, nothing stacked). Finished clients are skipped (no masking needed)."""
    width, steps = idx.shape[0], idx.shape[1]
    params = [[gp[k].clone() for k in keys] for _ in range(width)]
    bufs: list = [None] * width
    losses: list = [None] * width
    amp, device_type = options.amp_dtype, device.type
    was_training = model.training
    model.train()
    act_dev = None
    try:
        for t in range(steps):
            act = (tau_t > t).nonzero().flatten()
            cnt = count[act, t]
            span = int(cnt.max())
            if act_dev is None or act_dev.shape[0] != act.shape[0]:  # copied when a client finishes, not per step
                act_dev = act.to(device)
            b_idx = idx[act_dev, t, :span]
            xb, yb = data_x[b_idx], data_y[b_idx]
            act = act.tolist()
            if pre is not None:
                xb = augment_from_uniforms(xb, u[act_dev, t, :span].reshape(-1, 7) if u is not None else None, pre)
            elif transform is not None:
                xb = _transform_per_client(transform, xb, cnt, [aug_gens[j] for j in act], [True] * len(act))
            all_p, all_g = [], []
            for pos, j in enumerate(act):
                c = int(cnt[pos])
                leaves = {k: p.requires_grad_(True) for k, p in zip(keys, params[j])}
                if amp is None:
                    logits = functional_call(model, {**leaves, **other}, (xb[pos, :c],))
                else:
                    with torch.autocast(device_type=device_type, dtype=amp):
                        logits = functional_call(model, {**leaves, **other}, (xb[pos, :c],))
                    logits = logits.float()
                loss = algorithm.loss(logits, yb[pos, :c], params=leaves, global_params=gp, ctx=ctxs[j])
                grads = torch.autograd.grad(loss, [leaves[k] for k in keys])
                grads = algorithm.correct_grads(dict(zip(keys, grads)), ctx=ctxs[j])
                all_p.extend(p.detach() for p in params[j])
                all_g.extend(grads[k] for k in keys)
                losses[j] = loss.detach() if losses[j] is None else losses[j] + loss.detach()
            with torch.no_grad():
                prev = None if t == 0 else [b for j in act for b in bufs[j]]
                new_p, new_b = sgd_update(
                    all_p, all_g, prev, lr=h0.lr, momentum=h0.momentum, weight_decay=h0.weight_decay
                )
            n = len(keys)
            for pos, j in enumerate(act):
                params[j] = list(new_p[pos * n : (pos + 1) * n])
                if algorithm.has_after_step:
                    with torch.no_grad():
                        stepped = algorithm.after_step(dict(zip(keys, params[j])), ctx=ctxs[j], lr=h0.lr)
                    params[j] = [stepped[k] for k in keys]
                if new_b is not None:
                    bufs[j] = list(new_b[pos * n : (pos + 1) * n])
    finally:
        model.train(was_training)
    final = {i: dict(zip(keys, params[j])) for j, i in enumerate(trained)}
    loss_sum = {i: losses[j] for j, i in enumerate(trained)}
    return final, loss_sum


def _transform_per_client(transform, xb, cnt, gens, active):
    """Generic transforms: call ``transform`` per client on its real rows, with its own generator."""
    outs = []
    for j in range(xb.shape[0]):
        c = int(cnt[j])
        if not bool(active[j]):  # finished client ("mask" mode): no draw from its generator
            outs.append(None)
            continue
        y = transform(xb[j, :c], gens[j])
        if c < xb.shape[1]:
            y = torch.cat([y, y[:1].expand(xb.shape[1] - c, *y.shape[1:])])
        outs.append(y)
    like = next(o for o in outs if o is not None)
    return torch.stack([o if o is not None else torch.zeros_like(like) for o in outs])


# ------------------------------------------------------------------------------------------------ evaluation
@torch.no_grad()
def evaluate(
    model: torch.nn.Module,
    params: Mapping[str, torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
    batch_size: int = 4096,
    amp_dtype: torch.dtype | None = None,
) -> tuple[float, float]:
    """Accuracy and mean cross-entropy of ``model`` with state ``params`` on ``(x, y)``, in large batches.

    ``transform`` is the test-time preprocessing (e.g. ``Preprocessor.test``); the model runs in eval mode.
    """
    check_int("batch_size", batch_size, low=1)
    was_training = model.training
    model.eval()
    correct = torch.zeros((), dtype=torch.long, device=x.device)
    loss_sum = torch.zeros((), dtype=torch.float64, device=x.device)
    try:
        for start in range(0, int(y.shape[0]), batch_size):
            xb = x[start : start + batch_size]
            yb = y[start : start + batch_size]
            if transform is not None:
                xb = transform(xb)
            if amp_dtype is None:
                logits = functional_call(model, dict(params), (xb,))
            else:
                with torch.autocast(device_type=x.device.type, dtype=amp_dtype):
                    logits = functional_call(model, dict(params), (xb,))
                logits = logits.float()
            correct += (logits.argmax(1) == yb).sum()
            loss_sum += F.cross_entropy(logits, yb, reduction="sum").double()
    finally:
        model.train(was_training)
    n = max(int(y.shape[0]), 1)
    return float(correct) / n, float(loss_sum) / n
