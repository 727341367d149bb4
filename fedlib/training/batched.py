"""Batched local training: all picked clients of a round trained at once, as ``local_train`` trains each.

The results are those of ``fedlib.training.local.local_train`` per client (bit for bit on CPU).

Each client's batch order and augmentation uniforms are drawn from its own generators before the step loop, in
the order ``local_train`` draws them, and copied to the device once (a step reads nothing back). Kernels:
``"vmap"`` stacks the clients' parameters and contexts along a leading axis and runs one ``vmap(grad(loss))``
per step; ``"loop"`` batches the gather, augmentation and SGD update and runs the forward/backward per client;
``"sequential"`` is ``local_train`` one client after the other. Client i takes ``E_i · ceil(n_i / B)`` steps;
``shrink="compact"`` drops finished clients from the stacked state, ``"mask"`` keeps fixed shapes (for
``torch.compile``) and masks them. A partial batch of r < B samples is padded: its real rows carry a gradient scale
B/r and the padding repeats row 0 detached, which gives exactly the gradient and loss of the mean over the r real
samples for losses that are a mean of per-sample terms plus parameter-only terms (the
:data:`BATCHABLE_ALGORITHMS`; FedEntropy trains with FedAvg's loss and judges the trained clients afterwards).
Anything else falls back to ``local_train`` per client with a ``UserWarning`` (:func:`batching_unsupported_reason`).
"""

from __future__ import annotations

import contextlib
import os
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
    "train_clients_batched",
    "evaluate",
    "resolve_kernel",
    "options_from_config",
]

Params = dict[str, torch.Tensor]

#: Algorithms whose client hooks are vmappable and of the form the partial-batch identities need.
BATCHABLE_ALGORITHMS = ("fedavg", "fedprox", "fednova", "scaffold", "fedrs", "fedlc", "fedentropy")

_SHRINK = ("compact", "mask")
_KERNELS = ("auto", "vmap", "loop", "sequential")


@dataclass(frozen=True)
class BatchedOptions:
    """Settings of the batched engine (a run sets them in its configuration's ``engine_options``).

    ``shrink``: ``"compact"`` (default) or ``"mask"`` (fixed shapes, for ``compile``). ``compile``:
    ``torch.compile`` the vmapped step; ``cuda_graphs``: compile with ``mode="reduce-overhead"``. ``amp_dtype``:
    autocast dtype of the forward (loss, gradients and SGD stay fp32). ``chunk_size``: ``vmap``'s chunking.
    ``kernel``: ``"auto"`` is ``"vmap"`` on CUDA; on CPU, where grouped convolutions are slow, ``"loop"`` up to
    ``cpu_loop_max_params`` trainable parameters and ``"sequential"`` above (M parameter sets per step no longer
    fit the caches). Every kernel gives the reference path's numbers.
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


def options_from_config(engine_options: Mapping) -> BatchedOptions:
    """The ``BatchedOptions`` of a configuration's ``engine_options`` (the numerics keys ``tf32``/``deterministic``
    are not engine options and are skipped)."""
    kw = {k: v for k, v in dict(engine_options).items() if k not in ("tf32", "deterministic")}
    if "amp_dtype" in kw:
        kw["amp_dtype"] = _AMP_DTYPES[check_choice("amp_dtype", kw["amp_dtype"], _AMP_DTYPES)]
    return BatchedOptions(**kw)


def resolve_kernel(options: BatchedOptions, model: torch.nn.Module, device: torch.device) -> str:
    """The kernel ``options.kernel`` stands for on ``device`` (see :class:`BatchedOptions`)."""
    if options.kernel != "auto":
        return options.kernel
    if device.type == "cuda":
        return "vmap"
    size = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return "loop" if size <= options.cpu_loop_max_params else "sequential"


# --------------------------------------------------------------------------------------------- support checks
def batching_unsupported_reason(
    model: torch.nn.Module, algorithm, hps: Sequence[LocalHyperParams] = (), generators: Sequence[torch.Generator] = ()
) -> str | None:
    """Why these clients cannot be trained by the batched engine, or None: the model has buffers or random layers,
    the algorithm is not batchable, the clients differ in lr, momentum, weight decay or batch size, or two share a
    generator."""
    flag = getattr(algorithm, "supports_batched", None)
    name = str(getattr(algorithm, "name", type(algorithm).__name__))
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


# ------------------------------------------------------------------------------------------ compiled steps
_COMPILED: dict = {}


def cpu_compile_unsupported_reason() -> str | None:
    """Why ``compile=True`` cannot run on this CPU, or None: without a vector instruction set (no AVX2, or
    ``ATEN_CPU_CAPABILITY=default``) torch's C++ backend generates code that does not compile."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    if pick_vec_isa():
        return None
    cap = torch.backends.cpu.get_cpu_capability()
    return (
        f"torch.compile on this CPU (torch capability {cap}) has no vector instruction set, and torch "
        f"{torch.__version__}'s C++ backend then generates code that does not compile"
    )


def _compile_cache_per_capability() -> None:
    """Point torch's compile cache at a folder of this CPU capability, unless ``TORCHINDUCTOR_CACHE_DIR`` is set:
    the cache does not key kernels by the capability that chose their instructions."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    default = os.path.abspath(default_cache_dir())
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR", default) != default:  # torch writes its default in on first use
        return
    cap = torch.backends.cpu.get_cpu_capability().lower()
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(default, f"capability-{cap}")


def _forward(model, params, x, amp_dtype, device_type: str):
    """``functional_call`` of ``model``; under autocast to ``amp_dtype`` (logits back in fp32) unless it is None."""
    if amp_dtype is None:
        return functional_call(model, params, (x,))
    with torch.autocast(device_type=device_type, dtype=amp_dtype):
        logits = functional_call(model, params, (x,))
    return logits.float()


def _grad_fn(model, algorithm, partial: bool, options: BatchedOptions, device_type: str):
    """vmap over clients of ``(grads, loss_value)`` for one step, compiled with ``options.compile``; ``partial``
    adds the padding identities of the module docstring."""

    def full_loss(train, other, gp, x, y, rmask, scale, ctx):
        logits = _forward(model, {**train, **other}, x, options.amp_dtype, device_type)
        loss = algorithm.loss(logits, y, params=train, global_params=gp, ctx=ctx)
        return loss, loss.detach()

    def partial_loss(train, other, gp, x, y, rmask, scale, ctx):
        logits = _forward(model, {**train, **other}, x, options.amp_dtype, device_type)
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

    fn = vmap(per_client, in_dims=(0, None, None, 0, 0, 0, 0, 0), chunk_size=options.chunk_size)
    if not options.compile:
        return fn
    key = (id(model), id(algorithm), partial, options)
    if key not in _COMPILED:
        # every compiled step shares the code object of ``per_client``: raise dynamo's per-code cache limit so
        # (full, partial) x widths x algorithms do not silently fall back to eager
        from torch import _dynamo

        _dynamo.config.recompile_limit = max(_dynamo.config.recompile_limit, 64)
        _compile_cache_per_capability()
        mode = "reduce-overhead" if options.cuda_graphs else None
        _COMPILED[key] = torch.compile(fn, mode=mode, dynamic=False)
    return _COMPILED[key]


# ------------------------------------------------------------------------------------------------ entry point
def _as_list(value, m: int, name: str) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != m:
            raise ValueError(f"{name} has {len(value)} entries but there are {m} clients.")
        return list(value)
    return [value] * m


def _preprocessor_of(transform) -> Preprocessor | None:
    """The Preprocessor if ``transform`` is a bound ``Preprocessor.train`` (the vectorised augmentation)."""
    owner = getattr(transform, "__self__", None)
    if isinstance(owner, Preprocessor) and getattr(transform, "__func__", None) is Preprocessor.train:
        return owner
    return None


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
    """Train M clients from ``global_params`` at once; what ``local_train`` returns for each, in the order given.

    ``data_x``/``data_y`` hold the whole training set on the compute device; client i trains on the rows
    ``client_indices[i]`` with context ``ctxs[i]`` and generator ``generators[i]``. ``hp`` is one for all clients or
    one per client (epochs may differ; lr, momentum, weight decay and batch size must agree). ``transform``,
    ``aug_generators`` (default: ``generators``) and ``client_ids`` are ``local_train``'s, per client.
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
    if options.compile and device.type == "cpu" and (why := cpu_compile_unsupported_reason()) is not None:
        raise ValueError(f"BatchedOptions(compile=True): {why}; use compile=False on this machine.")
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
    pre = _preprocessor_of(transform)
    tables, tau, trained = _tables(client_indices, hps, gens, aug_gens, pre is not None and pre.augment, device)
    outs = {}
    if trained:
        ctxs_t, gens_t = [ctxs[i] for i in trained], [aug_gens[i] for i in trained]
        r = _Round(
            model, algorithm, keys, gp, other, data_x, data_y, ctxs_t, transform, pre, gens_t, h0, options, device
        )
        params, losses = _run_loop(r, *tables) if kernel == "loop" else _run_vmap(r, *tables)
        outs = {i: (params[j], losses[j]) for j, i in enumerate(trained)}
    return [
        _result(global_params, outs.get(i), tau[i], int(client_indices[i].shape[0]), hps[i].epochs, h0, ids[i])
        for i in range(m)
    ]


def _result(global_params, out, steps: int, num_samples: int, epochs: int, h0, client_id: int) -> LocalResult:
    """A client's ``LocalResult`` from its trained tensors and loss sum (``out`` None: it took no step)."""
    if out is None:
        params, loss = {k: v.detach().clone() for k, v in global_params.items()}, float("nan")
    else:
        trained, loss_sum = out
        params = {k: (trained[k] if k in trained else v.detach().clone()) for k, v in global_params.items()}
        loss = float(loss_sum / steps)
    return LocalResult(params, steps, num_samples, epochs, loss, h0.lr, h0.momentum, h0.weight_decay, client_id)


# ----------------------------------------------------------------------------------------------- the planner
def _tables(client_indices, hps, gens, aug_gens, draw_uniforms: bool, device):
    """Every client's batch order and (vectorised augmentation) uniforms, drawn in ``local_train``'s order, as the
    round's tables of the clients that train: (W, T, B) data indices, (W, T) real counts, (W, T, B, 7) uniforms (or
    None) and (W,) steps. A partial batch is padded with its first index (uniforms 0); the steps after a client's
    last repeat its first index with a full count (masked in "mask" mode). Also every client's steps and the
    positions of the clients that train."""
    bsz = hps[0].batch_size
    orders, draws = [], []  # per client
    for ci, hp, gen, aug in zip(client_indices, hps, gens, aug_gens):
        orders.append(client_batch_order(int(ci.shape[0]), bsz, hp.epochs, gen))
        if draw_uniforms:  # one (c, 7) draw per step, as local_train draws them
            draws.append([torch.rand((int(b.shape[0]), 7), generator=aug, device=aug.device) for b in orders[-1]])
    tau = [len(o) for o in orders]
    trained = [i for i, t in enumerate(tau) if t > 0]
    if not trained:
        return None, tau, trained
    width, steps = len(trained), max(tau)
    idx = torch.zeros(width, steps, bsz, dtype=torch.long, device=device)
    count = torch.full((width, steps), bsz, dtype=torch.long)
    u = torch.zeros(width, steps, bsz, 7, device=device) if draw_uniforms else None
    for j, i in enumerate(trained):
        # padded on the generators' devices, then one copy of each (τ, B) table
        padded = [torch.cat([b, b[:1].expand(bsz - b.shape[0])]) if b.shape[0] < bsz else b for b in orders[i]]
        rows = client_indices[i].to(device)[torch.stack(padded).to(device)]
        idx[j, : tau[i]] = rows
        idx[j, tau[i] :] = rows[0, 0]
        count[j, : tau[i]] = torch.tensor([int(b.shape[0]) for b in orders[i]])
        if u is not None:
            padded_u = [torch.cat([d, d.new_zeros(bsz - d.shape[0], 7)]) for d in draws[i]]
            u[j, : tau[i]] = torch.stack(padded_u).to(device)
    return (idx, count, u, torch.tensor([tau[i] for i in trained])), tau, trained


# ----------------------------------------------------------------------------------------------- the kernels
@dataclass
class _Round:
    """What the steps of a round share (``ctxs`` and ``aug_gens`` of the trained clients)."""

    model: torch.nn.Module
    algorithm: object
    keys: tuple
    gp: Params
    other: Params
    data_x: torch.Tensor
    data_y: torch.Tensor
    ctxs: list
    transform: Callable | None
    pre: Preprocessor | None
    aug_gens: list
    hp: LocalHyperParams
    options: BatchedOptions
    device: torch.device

    def batch(self, idx, u, sel, t, span, cnt, rows, active):
        """Step ``t``'s gathered and augmented ``(x, y)`` of the table rows ``sel`` (``rows`` on the host; only the
        ``active`` ones draw from their generators)."""
        b_idx = idx[sel, t, :span]
        xb, yb = self.data_x[b_idx], self.data_y[b_idx]
        if self.pre is not None:
            xb = self.pre.train_with_uniforms(xb, u[sel, t, :span].reshape(-1, 7) if u is not None else None)
        elif self.transform is not None:
            xb = _transform_per_client(self.transform, xb, cnt, [self.aug_gens[int(j)] for j in rows], active)
        return xb, yb

    def sgd(self, params, grads, bufs):
        hp = self.hp
        return sgd_update(params, grads, bufs, lr=hp.lr, momentum=hp.momentum, weight_decay=hp.weight_decay)


@contextlib.contextmanager
def _mode(model: torch.nn.Module, training: bool):
    """``model`` in train (or eval) mode within the block, its mode restored after."""
    was_training = model.training
    model.train(training)
    try:
        yield
    finally:
        model.train(was_training)


def _run_vmap(r: _Round, idx, count, u, tau_t):
    """The "vmap" kernel: stacked parameters, one ``vmap(grad)`` per step over the clients still training."""
    compact = r.options.shrink == "compact"
    fixed_width = not compact or r.options.compile
    width, steps, bsz = idx.shape
    keys, device = r.keys, r.device
    ctx = _stack_ctx(r.ctxs, device)
    params = [r.gp[k].unsqueeze(0).repeat(width, *([1] * r.gp[k].dim())) for k in keys]
    bufs = None
    losses = torch.zeros(width, device=device)
    rows = torch.arange(width)  # rows of the tables still in the stacked state (compact mode)
    rows_dev, count_dev, tau_dev = torch.arange(width, device=device), count.to(device), tau_t.to(device)
    final: list = [None] * width
    loss_sum: list = [None] * width
    grad_fns = {}
    with _mode(r.model, True):
        for t in range(steps):
            if compact and bool((done := tau_t[rows] <= t).any()):
                keep = (~done).nonzero().flatten()
                for j in done.nonzero().flatten().tolist():
                    final[int(rows[j])] = {k: p[j].clone() for k, p in zip(keys, params)}
                    loss_sum[int(rows[j])] = losses[j].clone()
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
            xb, yb = r.batch(idx, u, rows_dev, t, span, cnt, rows, active)
            rmask = torch.arange(span, device=device).unsqueeze(0) < cnt_dev.unsqueeze(1)
            scale = span / cnt_dev.to(torch.float32)
            if partial not in grad_fns:
                grad_fns[partial] = _grad_fn(r.model, r.algorithm, partial, r.options, device.type)
            grads, value = grad_fns[partial](dict(zip(keys, params)), r.other, r.gp, xb, yb, rmask, scale, ctx)
            with torch.no_grad():
                new_params, new_bufs = r.sgd(params, [grads[k] for k in keys], bufs)
                if r.algorithm.has_after_step:  # stacked params and ctx: the same elementwise ops per client
                    stepped = r.algorithm.after_step(dict(zip(keys, new_params)), ctx=ctx, lr=r.hp.lr)
                    new_params = [stepped[k] for k in keys]
                if compact:
                    params, bufs = new_params, new_bufs
                    losses = losses + value
                else:
                    params = _masked(active_dev, new_params, params)
                    if new_bufs is not None:
                        bufs = new_bufs if bufs is None else _masked(active_dev, new_bufs, bufs)
                    losses = torch.where(active_dev, losses + value, losses)
    for j, row in enumerate(rows.tolist()):
        if final[row] is None:
            final[row] = {k: p[j].clone() for k, p in zip(keys, params)}
            loss_sum[row] = losses[j].clone()
    return final, loss_sum


def _masked(active: torch.Tensor, new: list, old: list) -> list:
    """``new`` for the active clients, ``old`` for the others (client axis first)."""
    return [torch.where(active.view(-1, *[1] * (o.dim() - 1)), n, o) for o, n in zip(old, new)]


def _stack_ctx(ctxs: Sequence[Mapping[str, torch.Tensor]], device) -> Params:
    keys = list(ctxs[0].keys()) if ctxs else []
    for i, c in enumerate(ctxs):
        if list(c.keys()) != keys:
            raise ValueError(
                f"client context {i} has keys {sorted(c)}, client 0 has {sorted(keys)}; "
                "all clients of a round must share the context keys."
            )
    return {k: torch.stack([c[k].to(device) for c in ctxs]) for k in keys}


def _run_loop(r: _Round, idx, count, u, tau_t):
    """The "loop" kernel: per step one gather + augmentation for all clients, then ``local_train``'s
    forward/backward per client on its real rows, then one ``_foreach`` SGD update over all clients' tensors."""
    width, steps = idx.shape[0], idx.shape[1]
    keys, amp, device_type = r.keys, r.options.amp_dtype, r.device.type
    params = [[r.gp[k].clone() for k in keys] for _ in range(width)]
    bufs: list = [None] * width
    losses: list = [None] * width
    act_dev = None
    with _mode(r.model, True):
        for t in range(steps):
            act = (tau_t > t).nonzero().flatten()
            cnt = count[act, t]
            span = int(cnt.max())
            if act_dev is None or act_dev.shape[0] != act.shape[0]:  # copied when a client finishes, not per step
                act_dev = act.to(r.device)
            act = act.tolist()
            xb, yb = r.batch(idx, u, act_dev, t, span, cnt, act, [True] * len(act))
            all_p, all_g = [], []
            for pos, j in enumerate(act):
                c = int(cnt[pos])
                leaves = {k: p.requires_grad_(True) for k, p in zip(keys, params[j])}
                logits = _forward(r.model, {**leaves, **r.other}, xb[pos, :c], amp, device_type)
                loss = r.algorithm.loss(logits, yb[pos, :c], params=leaves, global_params=r.gp, ctx=r.ctxs[j])
                grads = torch.autograd.grad(loss, [leaves[k] for k in keys])
                grads = r.algorithm.correct_grads(dict(zip(keys, grads)), ctx=r.ctxs[j])
                all_p.extend(p.detach() for p in params[j])
                all_g.extend(grads[k] for k in keys)
                losses[j] = loss.detach() if losses[j] is None else losses[j] + loss.detach()
            with torch.no_grad():
                new_p, new_b = r.sgd(all_p, all_g, None if t == 0 else [b for j in act for b in bufs[j]])
            n = len(keys)
            for pos, j in enumerate(act):
                params[j] = list(new_p[pos * n : (pos + 1) * n])
                if r.algorithm.has_after_step:
                    with torch.no_grad():
                        stepped = r.algorithm.after_step(dict(zip(keys, params[j])), ctx=r.ctxs[j], lr=r.hp.lr)
                    params[j] = [stepped[k] for k in keys]
                if new_b is not None:
                    bufs[j] = list(new_b[pos * n : (pos + 1) * n])
    return [dict(zip(keys, p)) for p in params], losses


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
) -> tuple[float, float]:
    """Accuracy and mean cross-entropy of ``model`` with state ``params`` on ``(x, y)``, in large batches.

    ``transform`` is the test-time preprocessing (e.g. ``Preprocessor.test``); the model runs in eval mode.
    """
    check_int("batch_size", batch_size, low=1)
    correct = torch.zeros((), dtype=torch.long, device=x.device)
    loss_sum = torch.zeros((), dtype=torch.float64, device=x.device)
    with _mode(model, False):
        for start in range(0, int(y.shape[0]), batch_size):
            xb = x[start : start + batch_size]
            yb = y[start : start + batch_size]
            if transform is not None:
                xb = transform(xb)
            logits = functional_call(model, dict(params), (xb,))
            correct += (logits.argmax(1) == yb).sum()
            loss_sum += F.cross_entropy(logits, yb, reduction="sum").double()
    n = max(int(y.shape[0]), 1)
    return float(correct) / n, float(loss_sum) / n
