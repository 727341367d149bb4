"""Tests of fedlib.training.batched: the batched engine gives the reference path's results
(fedlib.training.local.local_train).

Tolerances (fp32, CPU), and where they come from:
* ``kernel="loop"``: bitwise equal to the reference path (same per-client ops; augmentation and SGD update are
  elementwise on stacked tensors, so batching does not change a single rounding).
* ``kernel="vmap"``: ``atol 1e-5`` on the global model after 2 rounds (observed max |diff| ~1e-7: vmap turns the
  convolutions into grouped convolutions, whose summation order differs; partial batches add the B/r gradient
  rescaling, one more rounding).
* ``amp_dtype=torch.bfloat16``: the local update ``Δ = w_client − w_global`` of one step (batch 64) within 15 %
  relative L2 error of the fp32 update (observed 4-11 %: bf16 keeps 8 mantissa bits and the random-label
  gradient is a sum of cancelling terms), after one epoch of 2-7
  steps of batch 8 within 30 % (observed up to 14 %: the difference grows along the SGD path), and the mean
  training loss within 0.01 (observed < 1e-4).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fedlib.algorithms import make_algorithm  # noqa: E402
from fedlib.algorithms.base import Algorithm  # noqa: E402
from fedlib.data.augment import Preprocessor  # noqa: E402
from fedlib.training.batched import (  # noqa: E402
    BatchedOptions,
    batching_unsupported_reason,
    evaluate,
    train_clients_batched,
)
from fedlib.training.local import (  # noqa: E402
    LocalHyperParams,
    client_seed,
    local_train,
    make_generator,
    model_state,
    trainable_keys,
)
from fedlib.training.models import make_model  # noqa: E402

ALGORITHMS = ["fedavg", "fedprox", "scaffold", "scaffold/after_step", "fednova", "fedrs", "fedlc", "fedentropy"]
PARAMS = {
    "fedprox": {"mu": 0.1},  # a large mu so the proximal term matters in a 2-round test
    "scaffold/after_step": {"correction": "after_step"},
}  # NIID-Bench's SCAFFOLD (after_step hook)
SIZES = [37, 20, 9, 50]  # batch 8: partial last batches (5, 4, 1, 2) and 5..7 steps per epoch -> masks matter
BATCH, EPOCHS, ROUNDS, SEED = 8, 2, 2, 3
PRE = Preprocessor(mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny tensors: one intra-op thread is faster and keeps the module well under a minute on 2 cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


_REFERENCE: dict = {}


def _reference(name, data):
    """The reference path's result per algorithm, computed once for the module."""
    if name not in _REFERENCE:
        _REFERENCE[name] = _federate("reference", name, data)
    return _REFERENCE[name]


@pytest.fixture(scope="module")
def data():
    g = torch.Generator().manual_seed(0)
    n = 200
    x = torch.randint(0, 256, (n, 3, 16, 16), dtype=torch.uint8, generator=g)
    y = torch.randint(0, 5, (n,), generator=g)
    y[:40] = 0  # client 0 holds mostly class 0, so FedRS/FedLC contexts differ between clients
    perm = torch.randperm(n, generator=g)
    parts, start = [], 0
    for size in SIZES:
        parts.append(torch.sort(perm[start : start + size]).values)
        start += size
    return x, y, parts


def _model():
    torch.manual_seed(0)
    return make_model("lenet5", 5, image_size=16)


def _federate(engine, name, data, options=None, rounds=ROUNDS):
    """``rounds`` FL rounds of all clients with the algorithm's server-side hooks; returns the global model."""
    x, y, parts = data
    model = _model()
    alg = make_algorithm(name.split("/")[0], **PARAMS.get(name, {})).bind(trainable_keys(model))
    gp = model_state(model)
    server = alg.init_server_state(gp, num_clients=len(parts))
    clients = [alg.init_client_state(gp) for _ in parts]
    for r in range(rounds):
        hp = LocalHyperParams(lr=0.05 * 0.98**r, batch_size=BATCH, epochs=EPOCHS)
        counts = [torch.bincount(y[p], minlength=5).float() for p in parts]
        ctxs = [alg.client_context(k, counts[k], server, clients[k]) for k in range(len(parts))]
        gens = [make_generator(client_seed(SEED, r, k)) for k in range(len(parts))]
        if engine == "reference":
            results = [
                local_train(model, gp, x[p], y[p], ctxs[k], alg, hp, gens[k], transform=PRE.train, client_id=k)
                for k, p in enumerate(parts)
            ]
        else:
            results = train_clients_batched(
                model,
                gp,
                x,
                y,
                parts,
                ctxs,
                alg,
                hp,
                gens,
                transform=PRE.train,
                client_ids=list(range(len(parts))),
                options=options,
            )
        for k, res in enumerate(results):
            clients[k], res.state_delta = alg.update_client_state(
                clients[k], res, global_params=gp, server_state=server, ctx=ctxs[k], hp=hp
            )
        weights = np.array([res.num_samples for res in results], dtype=np.float64)
        gp, server = alg.aggregate(gp, results, weights / weights.sum(), server)
    return gp, results


def _max_diff(a, b):
    return max(float((a[k] - b[k]).abs().max()) for k in a)


# ------------------------------------------------------------------------------------ equivalence (the contract)
@pytest.mark.parametrize("name", ALGORITHMS)
def test_loop_kernel_is_bitwise_the_reference_path(data, name):
    ref, ref_res = _reference(name, data)
    out, out_res = _federate("batched", name, data, BatchedOptions(kernel="loop"))
    assert all(torch.equal(ref[k], out[k]) for k in ref)
    for a, b in zip(ref_res, out_res):
        assert (a.num_steps, a.num_samples, a.epochs, a.client_id) == (
            b.num_steps,
            b.num_samples,
            b.epochs,
            b.client_id,
        )
        assert a.train_loss == b.train_loss


# header: algorithm, shrink mode
@pytest.mark.parametrize(
    "name,shrink",
    [(n, "compact") for n in ALGORITHMS]
    + [("fedavg", "mask"), ("scaffold", "mask"), ("scaffold/after_step", "mask"), ("fedprox", "mask")],
)
def test_vmap_kernel_matches_reference_within_1e_5(data, name, shrink):
    ref, ref_res = _reference(name, data)
    out, out_res = _federate("batched", name, data, BatchedOptions(kernel="vmap", shrink=shrink))
    assert _max_diff(ref, out) <= 1e-5
    for a, b in zip(ref_res, out_res):
        assert a.num_steps == b.num_steps == EPOCHS * -(-a.num_samples // BATCH)
        assert b.train_loss == pytest.approx(a.train_loss, abs=1e-5)


def test_partial_batch_loss_value_is_the_mean_over_real_samples(data):
    """A client of 9 samples with batch 8: steps of 8 and 1 samples; the reported loss must be the reference's."""
    x, y, parts = data
    model = _model()
    alg = make_algorithm("fedprox", mu=0.5).bind(trainable_keys(model))
    gp = model_state(model)
    hp = LocalHyperParams(lr=0.05, batch_size=BATCH, epochs=3)
    ref = local_train(model, gp, x[parts[2]], y[parts[2]], {}, alg, hp, make_generator(1), transform=PRE.train)
    out = train_clients_batched(
        model,
        gp,
        x,
        y,
        [parts[2], parts[3]],
        [{}, {}],
        alg,
        hp,
        [make_generator(1), make_generator(2)],
        transform=PRE.train,
        options=BatchedOptions(kernel="vmap"),
    )[0]
    assert out.num_steps == ref.num_steps == 6
    assert out.train_loss == pytest.approx(ref.train_loss, abs=1e-5)
    assert _max_diff(ref.params, out.params) <= 1e-5


# ------------------------------------------------------------------------------------------ masks (mask mode)
@pytest.mark.parametrize("kernel,tol", [("loop", 0.0), ("vmap", 1e-6)])
def test_masked_client_is_unchanged_after_it_finishes(data, kernel, tol):
    """Client 2 (9 samples, 4 steps) trained beside client 3 (50 samples, 14 steps) in "mask" mode equals client 2
    trained alone: the 10 masked steps leave its parameters, buffers and loss untouched."""
    x, y, parts = data
    model = _model()
    alg = make_algorithm("fedavg").bind(trainable_keys(model))
    gp = model_state(model)
    hp = LocalHyperParams(lr=0.05, batch_size=BATCH, epochs=EPOCHS)
    opts = BatchedOptions(kernel=kernel, shrink="mask")
    pair = train_clients_batched(
        model,
        gp,
        x,
        y,
        [parts[2], parts[3]],
        [{}, {}],
        alg,
        hp,
        [make_generator(5), make_generator(6)],
        transform=PRE.train,
        options=opts,
    )
    alone = train_clients_batched(
        model, gp, x, y, [parts[2]], [{}], alg, hp, [make_generator(5)], transform=PRE.train, options=opts
    )[0]
    assert (pair[0].num_steps, pair[1].num_steps) == (4, 14)
    assert _max_diff(pair[0].params, alone.params) <= tol
    assert pair[0].train_loss == pytest.approx(alone.train_loss, abs=max(tol, 1e-7))


def test_stragglers_with_fewer_epochs(data):
    """Per-client hyper-parameters: a straggler with 1 epoch beside clients with 3 (paper §V-D)."""
    x, y, parts = data
    model = _model()
    alg = make_algorithm("fedavg").bind(trainable_keys(model))
    gp = model_state(model)
    hps = [LocalHyperParams(lr=0.05, batch_size=BATCH, epochs=e) for e in (3, 1, 2, 3)]
    ref = [
        local_train(model, gp, x[p], y[p], {}, alg, hps[k], make_generator(k), transform=PRE.train)
        for k, p in enumerate(parts)
    ]
    out = train_clients_batched(
        model,
        gp,
        x,
        y,
        parts,
        [{}] * 4,
        alg,
        hps,
        [make_generator(k) for k in range(4)],
        transform=PRE.train,
        options=BatchedOptions(kernel="loop"),
    )
    for a, b in zip(ref, out):
        assert (a.num_steps, a.epochs) == (b.num_steps, b.epochs)
        assert all(torch.equal(a.params[k], b.params[k]) for k in a.params)


def test_client_without_samples_keeps_the_global_model(data):
    x, y, parts = data
    model = _model()
    alg = make_algorithm("fedavg").bind(trainable_keys(model))
    gp = model_state(model)
    hp = LocalHyperParams(lr=0.05, batch_size=BATCH, epochs=1)
    out = train_clients_batched(
        model,
        gp,
        x,
        y,
        [parts[0], parts[0][:0]],
        [{}, {}],
        alg,
        hp,
        [make_generator(0), make_generator(1)],
        transform=PRE.train,
    )
    assert out[1].num_steps == 0 and np.isnan(out[1].train_loss)
    assert all(torch.equal(out[1].params[k], gp[k]) for k in gp)


# --------------------------------------------------------------------------------------------- augmentation
def test_train_with_uniforms_is_preprocessor_train_bitwise():
    x = torch.randint(0, 256, (12, 3, 16, 16), dtype=torch.uint8, generator=torch.Generator().manual_seed(4))
    pre = Preprocessor(mean=(0.4, 0.5, 0.6), std=(0.2, 0.3, 0.25), hue=0.1)
    expected = pre.train(x, torch.Generator().manual_seed(9))
    u = torch.rand((12, 7), generator=torch.Generator().manual_seed(9))  # the draw augment_batch makes
    assert torch.equal(pre.train_with_uniforms(x, u), expected)
    # a (clients, batch) layout gives the same images
    assert torch.equal(pre.train_with_uniforms(x.view(3, 4, 3, 16, 16), u), expected.view(3, 4, 3, 16, 16))


def test_generic_transform_is_called_per_client(data):
    """A transform that is not Preprocessor.train runs per client and step with the client's generator."""
    x, y, parts = data
    model = _model()
    alg = make_algorithm("fedavg").bind(trainable_keys(model))
    gp = model_state(model)
    hp = LocalHyperParams(lr=0.05, batch_size=BATCH, epochs=1)

    def transform(xb, gen):
        return PRE.train(xb, gen) * 1.0

    ref = [
        local_train(model, gp, x[p], y[p], {}, alg, hp, make_generator(k), transform=transform)
        for k, p in enumerate(parts)
    ]
    out = train_clients_batched(
        model,
        gp,
        x,
        y,
        parts,
        [{}] * 4,
        alg,
        hp,
        [make_generator(k) for k in range(4)],
        transform=transform,
        options=BatchedOptions(kernel="loop"),
    )
    assert all(torch.equal(a.params[k], b.params[k]) for a, b in zip(ref, out) for k in gp)


@pytest.mark.slow
def test_compiled_vmap_kernel_matches_reference(data):
    """``compile=True`` (torch.compile of the vmapped step, fixed shapes in "mask" mode) on CPU: same tolerance.
    On a CPU where torch's compiler has no vector instruction set the option is refused before any work."""
    from fedlib.training.batched import cpu_compile_unsupported_reason

    options = BatchedOptions(kernel="vmap", shrink="mask", compile=True)
    if cpu_compile_unsupported_reason() is not None:
        with pytest.raises(ValueError, match=r"BatchedOptions\(compile=True\): torch.compile on this CPU"):
            _federate("batched", "fedavg", data, options)
        return
    ref, _ = _reference("fedavg", data)
    out, _ = _federate("batched", "fedavg", data, options)
    assert _max_diff(ref, out) <= 1e-5


@pytest.mark.slow
def test_compile_is_refused_where_the_cpu_compiler_has_no_vector_instructions():
    """As on a CPU without AVX2: ATEN_CPU_CAPABILITY=default makes torch's compiler pick no vector ISA."""
    import os
    import subprocess
    import sys

    code = (
        "from fedlib.training.batched import cpu_compile_unsupported_reason as r; import sys; "
        "print(r()); sys.exit(0 if r() else 3)"
    )
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "torch capability DEFAULT" in out.stdout


# --------------------------------------------------------------------------------------------- bf16 autocast
# header: batch size, epochs, tolerance on the relative L2 error of the update (see the module docstring)
@pytest.mark.parametrize("batch_size,epochs,tol", [(64, 1, 0.15), (BATCH, 1, 0.30)])
def test_bf16_update_within_tolerance_of_fp32(data, batch_size, epochs, tol):
    x, y, parts = data
    model = _model()
    alg = make_algorithm("fedavg").bind(trainable_keys(model))
    gp = model_state(model)
    hp = LocalHyperParams(lr=0.05, batch_size=batch_size, epochs=epochs)

    def run(amp, kernel):
        return train_clients_batched(
            model,
            gp,
            x,
            y,
            parts,
            [{}] * 4,
            alg,
            hp,
            [make_generator(k) for k in range(4)],
            transform=PRE.train,
            options=BatchedOptions(amp_dtype=amp, kernel=kernel),
        )

    for kernel in ("loop", "vmap"):
        for a, b in zip(run(None, kernel), run(torch.bfloat16, kernel)):
            da = torch.cat([(a.params[k] - gp[k]).flatten() for k in gp])
            db = torch.cat([(b.params[k] - gp[k]).flatten() for k in gp])
            assert float((da - db).norm() / da.norm()) <= tol
            assert b.train_loss == pytest.approx(a.train_loss, abs=1e-2)
            assert not torch.equal(da, db)  # autocast did change the arithmetic


# ------------------------------------------------------------------------------------------------- fallback
def test_batchnorm_model_falls_back_with_a_warning(data):
    x, y, parts = data
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3),
        torch.nn.BatchNorm2d(4),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(4 * 14 * 14, 5),
    )
    alg = make_algorithm("fedavg").bind(trainable_keys(model))
    gp = model_state(model)
    hp = LocalHyperParams(lr=0.05, batch_size=BATCH, epochs=1)
    with pytest.warns(UserWarning, match=r"falling back to the reference path.*buffers.*BatchNorm"):
        out = train_clients_batched(
            model, gp, x, y, parts[:2], [{}, {}], alg, hp, [make_generator(0), make_generator(1)], transform=PRE.train
        )
    ref = local_train(model, gp, x[parts[0]], y[parts[0]], {}, alg, hp, make_generator(0), transform=PRE.train)
    assert all(torch.equal(ref.params[k], out[0].params[k]) for k in gp)  # running stats updated as reference


def test_unknown_algorithm_falls_back_with_a_warning(data):
    class Custom(Algorithm):
        name = "custom"

    x, y, parts = data
    model = _model()
    alg = Custom().bind(trainable_keys(model))
    hp = LocalHyperParams(lr=0.05, batch_size=BATCH, epochs=1)
    with pytest.warns(UserWarning, match="algorithm 'custom' is not batchable"):
        train_clients_batched(
            model, model_state(model), x, y, parts[:1], [{}], alg, hp, [make_generator(0)], transform=PRE.train
        )


# header: what differs, expected reason
@pytest.mark.parametrize(
    "change,match",
    [
        ("lr", "clients differ in lr"),
        ("generator", "share one torch.Generator"),
    ],
)
def test_unsupported_reason(change, match):
    model = _model()
    alg = make_algorithm("fedavg")
    hps = [LocalHyperParams(lr=0.1), LocalHyperParams(lr=0.1 if change != "lr" else 0.2)]
    g = make_generator(0)
    gens = [g, g] if change == "generator" else [g, make_generator(1)]
    assert match in batching_unsupported_reason(model, alg, hps, gens)
    assert batching_unsupported_reason(model, alg, hps[:1], gens[:1]) is None


def test_options_are_validated():
    with pytest.raises(ValueError, match=r"^parameter 'shrink': got 'drop'; allowed: 'compact', 'mask'\.$"):
        BatchedOptions(shrink="drop")
    with pytest.raises(
        ValueError,
        match=r"^parameter 'cuda_graphs': got True; allowed: False unless compile=True \(CUDA graphs come from ",
    ):
        BatchedOptions(cuda_graphs=True)
    with pytest.raises(
        ValueError, match=r"^parameter 'kernel': got 'grouped'; allowed: 'auto', 'vmap', 'loop', 'sequential'\.$"
    ):
        BatchedOptions(kernel="grouped")
    with pytest.raises(ValueError, match=r"^parameter 'chunk_size': got 0; allowed: None or an integer >= 1\.$"):
        BatchedOptions(chunk_size=0)
    with pytest.raises(
        ValueError, match=r"^parameter 'amp_dtype': got torch\.float64; allowed: None, torch\.bfloat16 "
    ):
        BatchedOptions(amp_dtype=torch.float64)


# ----------------------------------------------------------------------------------------------- evaluation
def test_evaluate_matches_a_plain_forward(data):
    x, y, _ = data
    model = _model()
    params = model_state(model)
    acc, loss = evaluate(model, params, x, y, transform=PRE.test, batch_size=64)
    with torch.no_grad():
        logits = model(PRE.test(x))
    assert acc == pytest.approx(float((logits.argmax(1) == y).float().mean()))
    assert loss == pytest.approx(float(torch.nn.functional.cross_entropy(logits, y)), rel=1e-5)


def test_auto_kernel_on_cpu_batches_small_models_and_runs_large_ones_client_by_client():
    from fedlib.training.batched import resolve_kernel
    from fedlib.training.models import make_model

    cpu = torch.device("cpu")
    lenet, vgg = make_model("lenet5", 10), make_model("vgg11", 10)  # 62,006 and 9,225,610 parameters
    assert resolve_kernel(BatchedOptions(), lenet, cpu) == "loop"
    assert resolve_kernel(BatchedOptions(), vgg, cpu) == "sequential"
    assert resolve_kernel(BatchedOptions(cpu_loop_max_params=10**8), vgg, cpu) == "loop"
    assert resolve_kernel(BatchedOptions(), vgg, torch.device("cuda")) == "vmap"
    assert resolve_kernel(BatchedOptions(kernel="vmap"), vgg, cpu) == "vmap"
    with pytest.raises(
        ValueError,
        match=r"^parameter 'kernel': got 'sequential'; allowed: 'vmap' or 'auto' with compile=True \(the loop ",
    ):
        BatchedOptions(kernel="sequential", compile=True)


def test_fedrs_reference_code_variant_falls_back_with_a_warning(data):
    # Its loss subtracts the classifier bias per sample, which the vmap kernel's partial-batch identities exclude.
    x, y, parts = data
    model = _model()
    alg = make_algorithm("fedrs", variant="reference-code").bind(trainable_keys(model))
    gp = model_state(model)
    hp = LocalHyperParams(lr=0.05, batch_size=BATCH, epochs=1)
    ctxs = [alg.client_context(k, torch.bincount(y[p], minlength=5).float(), {}, {}) for k, p in enumerate(parts[:2])]
    with pytest.warns(UserWarning, match="variant='reference-code'\\) sets supports_batched = False"):
        out = train_clients_batched(
            model,
            gp,
            x,
            y,
            parts[:2],
            ctxs,
            alg,
            hp,
            [make_generator(1), make_generator(2)],
            transform=PRE.train,
            options=BatchedOptions(kernel="loop"),
        )
    ref = local_train(model, gp, x[parts[0]], y[parts[0]], ctxs[0], alg, hp, make_generator(1), transform=PRE.train)
    assert all(torch.equal(ref.params[k], out[0].params[k]) for k in ref.params)
