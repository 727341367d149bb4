"""The GPU path, tested on every device there is: CPU always, CUDA where present (``-m cuda`` selects those;
``python -m fedlib gpu-check`` runs them first thing on a GPU machine).

On CPU the engines agree bit for bit; on CUDA, with TF32 off and deterministic kernels (``fedlib.training.numerics``),
within 1e-5 (the batched engine's vmap kernel runs grouped convolutions, the reference engine separate ones).
"""

import warnings

import numpy as np
import pytest
import torch
from conftest import write_tiny_npz

from fedlib.algorithms import make_algorithm
from fedlib.data.augment import Preprocessor, augment_batch, augment_with_uniforms
from fedlib.selection import scoring
from fedlib.selection.selectors import FedEntOptSelector
from fedlib.training import numerics
from fedlib.training.batched import train_clients_batched
from fedlib.training.config import ExperimentConfig
from fedlib.training.local import LocalHyperParams, local_train, make_generator, model_state, train_step, trainable_keys
from fedlib.training.models import make_model
from fedlib.training.trainer import run_experiment
from repro import results, runner
from repro.tiers import PlannedRun

NO_CUDA = (
    f"no CUDA device on this machine (torch {torch.__version__}, CUDA build: {torch.version.cuda}); "
    "python -m fedlib gpu-check runs these tests on a GPU"
)
CUDA = pytest.param("cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)])
DEVICES = ["cpu", CUDA]


def _same(a: torch.Tensor, b: torch.Tensor, device: str) -> bool:
    """Bitwise on CPU; within 1e-5 (TF32 off) on CUDA."""
    a, b = a.detach().cpu(), b.detach().cpu()
    return torch.equal(a, b) if device == "cpu" else torch.allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.fixture(autouse=True)
def _numerics(request):
    """Each test sets the numerics of its device explicitly (TF32 off, deterministic), as the trainer does."""
    device = request.node.callspec.params.get("device", "cpu") if hasattr(request.node, "callspec") else "cpu"
    cuda, cudnn = torch.backends.cuda, torch.backends.cudnn
    before = (cuda.matmul.allow_tf32, cudnn.allow_tf32, cudnn.deterministic, cudnn.benchmark)
    mode = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    numerics.configure(device)
    yield
    # later tests in this process (CPU bit-for-bit ones) see PyTorch's defaults
    cuda.matmul.allow_tf32, cudnn.allow_tf32, cudnn.deterministic, cudnn.benchmark = before
    torch.use_deterministic_algorithms(mode[0], warn_only=mode[1])


@pytest.fixture(scope="module")
def tiny_npz(tmp_path_factory):
    return write_tiny_npz(tmp_path_factory.mktemp("data"), seed=0, num_samples=240, num_train=160, signal=True)


def _clients(device, sizes=(70, 130, 20), seed=0):
    g = torch.Generator().manual_seed(seed)
    n = sum(sizes)
    x = torch.randint(0, 256, (n, 3, 32, 32), dtype=torch.uint8, generator=g).to(device)
    y = torch.randint(0, 10, (n,), generator=g).to(device)
    cuts = np.cumsum((0,) + tuple(sizes))
    return x, y, [torch.arange(cuts[i], cuts[i + 1], device=device) for i in range(len(sizes))]


# ------------------------------------------------------------------------------------ batched vs reference
@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["fedavg", "fedprox"])
@pytest.mark.parametrize("device", DEVICES)
def test_batched_engine_equals_reference_engine(device, algorithm):
    torch.manual_seed(0)
    model = make_model("lenet5", 10).to(device)
    params = model_state(model)
    alg = make_algorithm(algorithm, **({"mu": 0.01} if algorithm == "fedprox" else {})).bind(trainable_keys(model))
    x, y, idx = _clients(device)
    pre = Preprocessor(mean=(0.5,) * 3, std=(0.25,) * 3)
    hp = LocalHyperParams(lr=0.05, batch_size=16, epochs=2)
    seeds = [(11 + i, 21 + i) for i in range(len(idx))]
    ref = [
        local_train(
            model,
            params,
            x[ix],
            y[ix],
            {},
            alg,
            hp,
            make_generator(s, device),
            transform=pre.train,
            aug_generator=make_generator(a, device),
        )
        for ix, (s, a) in zip(idx, seeds)
    ]
    got = train_clients_batched(
        model,
        params,
        x,
        y,
        idx,
        [{}] * len(idx),
        alg,
        hp,
        [make_generator(s, device) for s, _ in seeds],
        transform=pre.train,
        aug_generators=[make_generator(a, device) for _, a in seeds],
    )
    for r, b in zip(ref, got):
        assert r.num_steps == b.num_steps
        assert all(_same(r.params[k], b.params[k], device) for k in params)
        assert abs(r.train_loss - b.train_loss) <= (0 if device == "cpu" else 1e-5)
    moved = [float((ref[0].params[k] - params[k]).abs().max()) for k in trainable_keys(model)]
    assert max(moved) > 1e-3  # the clients trained: equality is not that of untouched tensors


# ------------------------------------------------------------------------------------------- augmentation
@pytest.mark.parametrize("device", DEVICES)
def test_augmentation_on_the_device_matches_the_cpu(device):
    x, _, _ = _clients(device, sizes=(64,))
    u = torch.rand((64, 7), generator=torch.Generator().manual_seed(3))
    on_device = augment_with_uniforms(x.float() / 255, u.to(device))
    on_cpu = augment_with_uniforms(x.cpu().float() / 255, u)
    assert _same(on_device, on_cpu, device)
    # augment_batch draws exactly those uniforms from a generator on the device
    gen = make_generator(5, device)
    expected_u = torch.rand((64, 7), generator=make_generator(5, device), device=device)
    assert torch.equal(
        augment_batch(x.float() / 255, generator=gen), augment_with_uniforms(x.float() / 255, expected_u)
    )


@pytest.mark.parametrize("device", DEVICES)
def test_one_grayscale_channel_gives_the_three_channel_numbers(device):
    """TissueMNIST is held as one channel on the device (3x less memory); batches are repeated to 3 channels
    first, so training and test inputs are the ones of the 3-channel data, bit for bit."""
    g = torch.Generator().manual_seed(0)
    gray = torch.randint(0, 256, (32, 1, 28, 28), dtype=torch.uint8, generator=g).to(device)
    rgb = gray.repeat(1, 3, 1, 1)
    plain = Preprocessor(mean=(0.4, 0.4, 0.4), std=(0.2, 0.2, 0.2), image_size=40)
    packed = Preprocessor(mean=(0.4, 0.4, 0.4), std=(0.2, 0.2, 0.2), image_size=40, gray_to_rgb=True)
    assert torch.equal(packed.test(gray), plain.test(rgb))
    assert torch.equal(packed.train(gray, make_generator(1, device)), plain.train(rgb, make_generator(1, device)))
    with pytest.raises(
        ValueError,
        match=r"^parameter 'x': got 1 channels; allowed: images with as many channels as mean/std have \(3\)\.$",
    ):
        plain.test(gray)  # without gray_to_rgb a 1-channel batch is still an error


@pytest.mark.parametrize("device", DEVICES)
def test_augmentation_builds_no_tensor_from_host_data_per_batch(device):
    """Host values copied to the device per batch are a blocking copy on CUDA; after the first batch (which
    caches the luma weights and the channel statistics) a batch creates no tensor from Python data."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Lifts(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket in (torch.ops.aten.lift_fresh, torch.ops.aten.lift_fresh_copy):
                Lifts.n += 1
            return func(*args, **(kwargs or {}))

    x, _, _ = _clients(device, sizes=(16,))
    pre = Preprocessor(mean=(0.5,) * 3, std=(0.25,) * 3)
    pre.train(x, make_generator(0, device))
    with Lifts():
        pre.train(x, make_generator(1, device))
    assert Lifts.n == 0


# ----------------------------------------------------------------------------------------- local training
@pytest.mark.parametrize("device", DEVICES)
def test_local_training_is_torch_optim_sgd(device):
    """``local_train`` (foreach SGD on all devices) gives ``torch.optim.SGD``'s parameters on the same batches."""
    torch.manual_seed(0)
    model = make_model("lenet5", 10).to(device)
    params = model_state(model)
    alg = make_algorithm("fedavg").bind(trainable_keys(model))
    x, y, (ix,) = _clients(device, sizes=(100,))
    xf = x.float() / 255
    hp = LocalHyperParams(lr=0.05, momentum=0.9, weight_decay=5e-4, batch_size=32, epochs=2)
    res = local_train(model, params, xf[ix], y[ix], {}, alg, hp, make_generator(7, device))
    net = make_model("lenet5", 10).to(device)
    net.load_state_dict(params)
    opt = torch.optim.SGD(net.parameters(), lr=hp.lr, momentum=hp.momentum, weight_decay=hp.weight_decay)
    gen = make_generator(7, device)
    for _ in range(hp.epochs):
        for b in torch.randperm(100, generator=gen, device=device).split(hp.batch_size):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(xf[b]), y[b]).backward()
            opt.step()
    assert res.num_steps == 8
    assert all(_same(res.params[k], v, device) for k, v in net.state_dict().items())


@pytest.mark.parametrize("device", [CUDA])
def test_a_training_step_does_not_synchronise(device):
    """One SGD step (forward, FedProx loss, backward, foreach SGD) and one augmentation with everything on the
    device: no host synchronisation at all (``set_sync_debug_mode("error")`` raises on any)."""
    torch.manual_seed(0)
    model = make_model("lenet5", 10).to(device)
    params = model_state(model)
    keys = trainable_keys(model)
    alg = make_algorithm("fedprox", mu=0.01).bind(keys)
    x, y, (ix,) = _clients(device, sizes=(64,))
    pre = Preprocessor(mean=(0.5,) * 3, std=(0.25,) * 3)
    hp = LocalHyperParams(lr=0.05, batch_size=64, epochs=1)
    gen = make_generator(0, device)
    warm = {k: params[k].clone() for k in keys}  # first calls: caches, cuBLAS/cuDNN handles (may synchronise)
    train_step(model, keys, warm, {}, params, pre.train(x[ix], gen), y[ix], {}, alg, hp, {})
    train = {k: params[k].clone() for k in keys}
    bufs = {}
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(2):  # the first step (no momentum buffers yet) and a later one
            xb = pre.train(x[ix], gen)
            train, bufs, loss = train_step(model, keys, train, {}, params, xb, y[ix], {}, alg, hp, bufs)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.isfinite(loss).item()


@pytest.mark.parametrize("device", [CUDA])
@pytest.mark.parametrize("kernel", ["vmap", "loop"])
def test_batched_round_synchronises_per_client_not_per_step(device, kernel):
    """The host syncs of a batched round (planning, one per finishing client) do not grow with the steps."""
    from fedlib.training.batched import BatchedOptions

    torch.manual_seed(0)
    model = make_model("lenet5", 10).to(device)
    params = model_state(model)
    alg = make_algorithm("fedavg").bind(trainable_keys(model))
    x, y, idx = _clients(device)
    pre = Preprocessor(mean=(0.5,) * 3, std=(0.25,) * 3)

    def syncs(epochs):
        hp = LocalHyperParams(lr=0.05, batch_size=16, epochs=epochs)
        gens = [make_generator(s, device) for s in range(len(idx))]
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                train_clients_batched(
                    model,
                    params,
                    x,
                    y,
                    idx,
                    [{}] * len(idx),
                    alg,
                    hp,
                    gens,
                    transform=pre.train,
                    options=BatchedOptions(kernel=kernel),
                )
            finally:
                torch.cuda.set_sync_debug_mode("default")
        return sum("synchroniz" in str(w.message) for w in seen)

    syncs(1)  # warm-up
    assert syncs(1) == syncs(4)


# -------------------------------------------------------------------------------------------- torch scorer
@pytest.mark.parametrize("device", DEVICES)
def test_torch_scorer_picks_what_the_cpu_engine_picks(device):
    from test_selection import reference_fedentopt

    rng = np.random.default_rng(0)
    counts = rng.integers(0, 30, size=(300, 10)) * (rng.random((300, 10)) < 0.3)
    selector = FedEntOptSelector(buffer_fraction=0.5)
    state_cpu, state_dev = (), ()
    for r in range(4):
        picked, state_cpu = selector.select(counts, 20, state_cpu, np.random.default_rng(r))
        with scoring.scorer_path("torch", device=device):
            on_dev, state_dev = selector.select(counts, 20, state_dev, np.random.default_rng(r))
        assert list(on_dev) == list(picked) and state_dev == state_cpu
    literal, _ = reference_fedentopt(counts, 20, (), 150, np.random.default_rng(9))
    with scoring.scorer_path("torch", device=device):
        first, _ = selector.select(counts, 20, (), np.random.default_rng(9))
    assert list(first) == literal


# ------------------------------------------------------------------------------------- checkpoint and resume
def _cfg(path, device, **kw):
    base = dict(
        dataset="npz",
        dataset_options={"path": path},
        num_clients=8,
        clients_per_round=3,
        rounds=4,
        local_epochs=1,
        batch_size=16,
        min_partition_size=2,
        beta=0.5,
        checkpoint_every=2,
        device=device,
    )
    return ExperimentConfig(**{**base, **kw})


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["reference", "batched"])
@pytest.mark.parametrize("device", DEVICES)
def test_resumed_run_equals_uninterrupted_run(tiny_npz, tmp_path, device, engine):
    """Bit for bit on every device: deterministic kernels (fedlib.training.numerics) make a CUDA run repeatable."""
    cfg = _cfg(tiny_npz, device, engine=engine)
    whole = run_experiment(cfg, progress=False)
    part = run_experiment(cfg, run_root=tmp_path, progress=False, stop_after=3)
    assert not part.finished
    resumed = run_experiment(cfg, run_root=tmp_path, progress=False)
    cols = [c for c in whole.table.columns if c != "seconds"]
    assert whole.table[cols].equals(resumed.table[cols])
    assert all(torch.equal(whole.global_params[k], resumed.global_params[k]) for k in whole.global_params)


# ---------------------------------------------------------------------------------------------- two workers
def test_worker_pool_spawns_for_cuda_runs_and_forks_for_cpu_runs(tiny_npz):
    cpu = _cfg(tiny_npz, "cpu")
    gpu = ExperimentConfig(**{**cpu.to_dict(), "device": "cuda"})  # not validated: no CUDA needed to ask
    assert runner._pool_context([cpu, gpu]).get_start_method() == "spawn"
    assert runner._pool_context([cpu]).get_start_method() != "spawn"


@pytest.mark.parametrize("device", [CUDA])
def test_two_workers_train_on_cuda(tiny_npz, tmp_path, device):
    """The parent touched CUDA (validate() asks torch.cuda.is_available()); the workers are spawned, so they can
    initialise CUDA, and store what one process computes."""
    runs = [PlannedRun("devices", {"seed": s}, _cfg(tiny_npz, device, rounds=2, seed=s).validate()) for s in (0, 1)]
    torch.zeros(1, device=device)  # CUDA initialised in the parent
    info = results.ensure_runs(
        runs, "quick", results_dir=tmp_path / "res", run_root=str(tmp_path / "runs"), workers=2, log=lambda s: None
    )
    assert info["trained"] == 2 and not info["skipped"]
    stored = results.load_group("quick", "devices", tmp_path / "res")
    alone = run_experiment(runs[0].config, progress=False).table
    mine = stored.frame[stored.frame["seed"] == 0].reset_index(drop=True)
    assert np.allclose(mine["test_accuracy"], alone["test_accuracy"].round(5))


def test_fedprox_flat_term_of_cuda_equals_the_per_tensor_sum_and_vmaps():
    """The CUDA form of FedProx's ‖w − w_g‖² (one flat vector) is the per-tensor sum up to rounding, and works
    inside the batched engine's vmap(grad(...))."""
    from torch.func import grad, vmap

    from fedlib.algorithms.fedprox import _flat_sq_distance

    g = torch.Generator().manual_seed(0)
    keys = ("a", "b")
    w = {"a": torch.randn(3, 4, 5, generator=g), "b": torch.randn(7, generator=g)}
    wg = {"a": torch.randn(3, 4, 5, generator=g), "b": torch.randn(7, generator=g)}
    loop = sum(((w[k] - wg[k]) ** 2).sum() for k in keys)
    assert torch.allclose(_flat_sq_distance(w, wg, keys), loop, rtol=1e-6)
    stacked = {k: torch.stack([v, 2 * v]) for k, v in w.items()}
    grads = vmap(grad(lambda p: _flat_sq_distance(p, wg, keys)))(stacked)
    assert all(torch.allclose(grads[k][1], 2 * (2 * w[k] - wg[k])) for k in keys)


@pytest.mark.parametrize("device", DEVICES)
def test_grayscale_sets_go_to_the_device_as_one_channel(device):
    from fedlib.data.datasets import ArrayDataset, _finish

    rng = np.random.default_rng(0)
    gray = ArrayDataset(
        rng.integers(0, 256, (12, 8, 8, 1), dtype=np.uint8),
        np.arange(12) % 3,
        rng.integers(0, 256, (6, 8, 8, 1), dtype=np.uint8),
        np.arange(6) % 3,
        num_classes=3,
    )
    ds = _finish(gray, None, rgb=True)  # the loaders' rgb=True: 3 equal channels on the host
    assert ds.gray_rgb and ds.image_shape == (8, 8, 3)
    full = ds.to_tensors(device, torch.uint8)
    packed = ds.to_tensors(device, torch.uint8, one_gray_channel=True)
    assert full.x_train.shape == (12, 3, 8, 8) and packed.x_train.shape == (12, 1, 8, 8)
    assert torch.equal(packed.x_train.expand(-1, 3, -1, -1), full.x_train)
    assert torch.equal(full.x_test.cpu(), torch.from_numpy(ds.x_test).permute(0, 3, 1, 2))
    assert not _finish(
        ArrayDataset(ds.x_train, ds.y_train, ds.x_test, ds.y_test, num_classes=3), None, rgb=False
    ).gray_rgb
