"""GPU time of a federated run from a step model, or from measured throughputs where a benchmark record exists.

**Why steps, not samples.** A client step (batch B = 64) on a GPU costs the larger of two times:

* its *launch* time: every aten op of the step (forward, backward, loss, augmentation, gather, SGD update) is
  dispatched from Python and launched as a kernel, ``ops × t_op`` whatever the batch size. LeNet-5 on a GPU
  is bound by this: its 64-image step is ~0.2 GFLOP, microseconds of arithmetic;
* its *compute* time: 3 × forward FLOPs × B (forward + backward ≈ 3 forward passes) over the effective fp32
  rate of the model family (TF32 off, ``fedlib.training.numerics``).

``reference`` engine (one client after the other): ``t_step = max(ops · t_op, 3 F B / R)``.
``batched`` engine (``fedlib.training.batched``, vmap kernel on CUDA): one launch sequence serves all clients still
training, and a round lasts as many batched steps as its longest client (``compact`` shrinking), so per client
step ``t_step = max(ops · t_op · f / M, 3 F B / R)`` with f = E[max τ_i] / E[mean τ_i] over the M picked clients.
Models with BatchNorm (EfficientNet) and FedConcat fall back to the reference engine.

Evaluation (every round, whole test set, batches of ``eval_batch_size``): per test sample
``max(forward ops · t_op / eval_batch_size, F / R)``.

Steps of a run: rounds × M × (1 − dropout) × E_eff × (n_train / K / B + 1/2) (the expected number of batches of a
client, partial last batch included; checked against Dir(0.1) partitions of CIFAR-10, CINIC-10 and PathMNIST:
8.31 vs 8.31, 7.55 vs 7.53, 14.56 vs 14.56 batches per epoch).

Constants (``STEP_MODEL``; ``tests/test_gpu_check.py`` recounts the ops and FLOPs of LeNet-5 and VGG-11):

* ``ops``: aten ops of one training step of fedlib's reference path (``local_train`` with the paper's
  augmentation, FedAvg, ``_foreach`` SGD), counted by :func:`count_step_ops` (the ops of a 2-step client minus
  those of a 1-step one): LeNet-5 137 (180 before the SGD update became ``_foreach`` ops), VGG-11 159,
  EfficientNet-B0 1,010, B3 1,596 (the same at any image size); ``eval_ops``: aten ops of one evaluation forward
  (:func:`count_eval_ops`);
* ``flops``: forward FLOPs per sample at the paper's input size (32 × 32; the medical sets 224 × 224), counted
  with ``torch.utils.flop_counter`` (:func:`forward_flops`);
* ``t_op`` = 15 µs: eager PyTorch's host cost per op (Python, dispatcher, autograd, kernel launch) -- an
  ASSUMPTION of the usual 5-20 µs range, to be replaced by a measurement;
* ``rate``: ASSUMED effective fp32 rate on one H100 (TF32 off): 25 TFLOP/s for the plain convolutions of
  LeNet-5 and VGG-11 (~40 % of the 67 TFLOP/s fp32 peak), 3 TFLOP/s for EfficientNet (depthwise convolutions,
  squeeze-excitation and BatchNorm are memory-bound);
* ``max_over_mean`` = 2.5: measured on Dir(0.1) partitions (3 seeds, 2,000 random picks each) -- CIFAR-10 K=100
  M=10: 2.37, CINIC-10 K=200 M=20: 2.91, PathMNIST K=100 M=5: 2.13.

**Measured throughputs replace the model.** ``python -m fedlib gpu-check`` writes a record under
``benchmarks/results/`` with the seconds per client step of both engines and the evaluation seconds per sample
for LeNet-5 and VGG-11 (``benchmarks/bench_trainer.py``'s paper setting); :func:`measured_step_times` reads the
newest one and :func:`run_seconds` uses it for those models (EfficientNet stays on the step model).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from fedlib._validate import check_choice

__all__ = [
    "StepModel",
    "STEP_MODEL",
    "RECORDS_DIR",
    "run_steps",
    "run_seconds",
    "measured_step_times",
    "count_step_ops",
    "count_eval_ops",
    "forward_flops",
]

RECORDS_DIR = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
#: Models the batched engine trains (no BatchNorm buffers); the others fall back to the reference engine.
BATCHED_MODELS = ("lenet5", "vgg11")


@dataclass(frozen=True)
class StepModel:
    """The step model's constants (see the module docstring for where each comes from)."""

    t_op: float = 15e-6
    ops: dict = field(
        default_factory=lambda: {"lenet5": 137, "vgg11": 159, "efficientnet-b0": 1010, "efficientnet-b3": 1596}
    )
    eval_ops: dict = field(
        default_factory=lambda: {"lenet5": 16, "vgg11": 25, "efficientnet-b0": 290, "efficientnet-b3": 466}
    )
    flops: dict = field(
        default_factory=lambda: {
            "lenet5": 1.303e6,
            "vgg11": 3.055e8,
            "efficientnet-b0": 7.691e8,
            "efficientnet-b3": 1.922e9,
        }
    )
    rate: dict = field(
        default_factory=lambda: {"lenet5": 25e12, "vgg11": 25e12, "efficientnet-b0": 3e12, "efficientnet-b3": 3e12}
    )
    max_over_mean: float = 2.5
    gpu: str = "one H100 (fp32, TF32 off), ASSUMED rates"

    def step_seconds(self, model: str, engine: str, batch_size: int, clients_per_round: int) -> float:
        """Seconds per client step of ``model`` on ``engine`` ("reference" or "batched")."""
        check_choice("engine", engine, ("reference", "batched"))
        launch = self.ops[model] * self.t_op
        if engine == "batched" and model in BATCHED_MODELS:
            launch *= self.max_over_mean / clients_per_round
        return max(launch, 3 * self.flops[model] * batch_size / self.rate[model])

    def eval_seconds(self, model: str, eval_batch_size: int) -> float:
        """Seconds per evaluated test sample."""
        return max(self.eval_ops[model] * self.t_op / eval_batch_size, self.flops[model] / self.rate[model])


STEP_MODEL = StepModel()


def run_steps(config, n_train: int) -> float:
    """Expected client steps of a run (see the module docstring)."""
    c = config
    epochs = c.local_epochs * (1 - c.straggler_fraction) + c.straggler_fraction * (c.local_epochs + 1) / 2
    return (
        c.rounds * c.clients_per_round * (1 - c.dropout_prob) * epochs * (n_train / c.num_clients / c.batch_size + 0.5)
    )


def run_seconds(
    config, n_train: int, n_eval: float, engine: str, measured: dict | None = None, model: StepModel = STEP_MODEL
) -> tuple[float, float, str]:
    """(training seconds, evaluation seconds, "measured" or "step model") of one run on one GPU.

    ``n_eval``: test samples evaluated over the run; ``measured``: :func:`measured_step_times`' dict."""
    name = config.model
    steps = run_steps(config, n_train)
    got = (measured or {}).get("models", {}).get(name)
    from fedlib.training.batched import BATCHABLE_ALGORITHMS  # the rest fall back whatever the model

    eng = engine if name in BATCHED_MODELS and config.algorithm in BATCHABLE_ALGORITHMS else "reference"
    if got is not None and got.get(eng) is not None:
        return steps * got[eng], n_eval * got["eval"], "measured"
    return (
        steps * model.step_seconds(name, eng, config.batch_size, config.clients_per_round),
        n_eval * model.eval_seconds(name, config.eval_batch_size),
        "step model",
    )


def _shown(path: Path) -> str:
    """``path`` relative to the checkout when it lies in it (what a page prints), else as given."""
    try:
        return str(path.resolve().relative_to(RECORDS_DIR.resolve().parents[1]))
    except ValueError:
        return str(path)


def measured_step_times(records_dir=None) -> dict | None:
    """Per-model seconds per client step ("reference", "batched") and per evaluated sample ("eval") from the
    newest ``gpu-check-*.json`` record under ``records_dir`` (default ``benchmarks/results``) measured on CUDA, with
    its ``file`` and ``device``; None when there is none."""
    folder = Path(records_dir) if records_dir is not None else RECORDS_DIR
    records = sorted(folder.glob("gpu-check-*.json")) if folder.is_dir() else []
    for path in reversed(records):  # names carry a UTC time stamp: the last is the newest
        rec = json.loads(path.read_text())
        if rec.get("cuda") and rec.get("step_times"):
            return {"file": _shown(path), "device": rec.get("device"), "models": rec["step_times"]}
    return None


# --------------------------------------------------------------------------------------------- counting helpers
def _counting_mode():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.n += 1
            return func(*args, **(kwargs or {}))

    return Count()


def count_step_ops(model_name: str, num_classes: int = 10, image_size: int = 32) -> int:
    """aten ops of one training step of ``local_train`` (augmentation on, FedAvg, momentum, weight decay) on CPU:
    the ops of a client with 2 steps minus those of a client with 1 step, after a first client that fills the
    caches (batch 2: the count does not depend on the batch size; a ``_foreach`` op counts once, and the augmentation
    writes flipped and grayed images with ``torch.where``, as on CUDA)."""
    import torch

    from fedlib.algorithms import make_algorithm
    from fedlib.data.augment import Preprocessor
    from fedlib.training.local import LocalHyperParams, local_train, make_generator, model_state, trainable_keys
    from fedlib.training.models import make_model

    torch.manual_seed(0)
    net = make_model(model_name, num_classes, in_channels=3, image_size=image_size)
    alg = make_algorithm("fedavg").bind(trainable_keys(net))
    pre = Preprocessor(mean=(0.5,) * 3, std=(0.25,) * 3, sync_free=True)
    params = model_state(net)
    counts = []
    for n in (2, 2, 4):  # the first client fills the caches (luma weights, channel statistics): not counted
        x = torch.randint(0, 256, (n, 3, image_size, image_size), dtype=torch.uint8)
        y = torch.arange(n) % num_classes
        hp = LocalHyperParams(lr=0.01, batch_size=2, epochs=1)
        mode = _counting_mode()
        with mode:
            local_train(net, params, x, y, {}, alg, hp, make_generator(0), transform=pre.train)
        counts.append(mode.n)
    return counts[2] - counts[1]


def count_eval_ops(model_name: str, num_classes: int = 10, image_size: int = 32) -> int:
    """aten ops of one evaluation forward (eval mode, no grad), counted on the meta device."""
    import torch
    from torch.func import functional_call

    from fedlib.training.models import make_model

    with torch.device("meta"):
        net = make_model(model_name, num_classes, in_channels=3, image_size=image_size)
    net.eval()
    state = {**dict(net.named_parameters()), **dict(net.named_buffers())}
    mode = _counting_mode()
    with mode, torch.no_grad():
        functional_call(net, state, (torch.empty(8, 3, image_size, image_size, device="meta"),))
    return mode.n


def forward_flops(model_name: str, num_classes: int = 10, image_size: int = 32) -> float:
    """Forward FLOPs per sample (``torch.utils.flop_counter``, on the meta device)."""
    import torch
    from torch.func import functional_call
    from torch.utils.flop_counter import FlopCounterMode

    from fedlib.training.models import make_model

    with torch.device("meta"):
        net = make_model(model_name, num_classes, in_channels=3, image_size=image_size)
    state = {**dict(net.named_parameters()), **dict(net.named_buffers())}
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        functional_call(net, state, (torch.empty(8, 3, image_size, image_size, device="meta"),))
    return counter.get_total_flops() / 8
