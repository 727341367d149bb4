"""Seconds per federated round: a DataLoader loop (a), fedlib's reference path (b), fedlib's batched path (c).

The paper's setting (§V-A5) on CIFAR-10-shaped random images: 50,000 x 3 x 32 x 32 uint8 (random pixels; the
labels are the real CIFAR-10 label vector when ``../shared/data/cifar10-labels.npz`` is found, else 5,000 per
class), K=100 clients, Dir(0.1), M=10 picked per round, E=5 local epochs, batch 64, SGD momentum 0.9, lr 0.01
decayed 0.98 per round, weight decay 5e-4 (LeNet-5) / 1e-3 (VGG-11), augmentation on, FedAvg aggregation.
Every path trains the same picked clients in the same rounds; a round's time covers local training and
aggregation (not evaluation). See ``benchmarks/README.md`` for the columns and the targets.

    python benchmarks/bench_trainer.py --quick                 # what fits on a 2-core CPU
    python benchmarks/bench_trainer.py --device cuda --rounds 20
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fedlib.algorithms import make_algorithm  # noqa: E402
from fedlib.algorithms.base import weighted_average  # noqa: E402
from fedlib.data._torchvision import import_torchvision  # noqa: E402
from fedlib.data.augment import Preprocessor  # noqa: E402
from fedlib.training.batched import BatchedOptions, resolve_kernel, train_clients_batched  # noqa: E402
from fedlib.training.local import (  # noqa: E402
    LocalHyperParams,
    client_seed,
    local_train,
    make_generator,
    model_state,
    trainable_keys,
)
from fedlib.training.models import make_model  # noqa: E402

LABELS = Path(__file__).resolve().parents[2] / "shared" / "data" / "cifar10-labels.npz"
MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)  # CIFAR-10 channel statistics
WEIGHT_DECAY = {"lenet5": 5e-4, "vgg11": 1e-3}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--rounds", type=int, default=2, help="timed rounds per path and model (default 2)")
    p.add_argument("--models", default="lenet5,vgg11", help="comma-separated: lenet5, vgg11")
    p.add_argument("--paths", default="a,b,c", help="comma-separated subset of a, b, c")
    p.add_argument("--epochs", type=int, default=5, help="local epochs E (paper: 5)")
    p.add_argument("--clients", type=int, default=100, help="client pool K (paper: 100)")
    p.add_argument("--clients-per-round", type=int, default=10, help="clients picked per round M (paper: 10)")
    p.add_argument(
        "--max-client-samples",
        type=int,
        default=None,
        help="keep at most this many samples of each picked client (CPU smoke runs only)",
    )
    p.add_argument("--workers", type=int, default=0, help="DataLoader workers of path (a) (default 0)")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    p.add_argument(
        "--kernel",
        default="auto",
        choices=["auto", "vmap", "loop", "sequential"],
        help="batched kernel (auto: vmap on CUDA; on CPU loop for small models, sequential for large)",
    )
    p.add_argument("--shrink", default="compact", choices=["compact", "mask"], help="batched shrink mode")
    p.add_argument("--compile", action="store_true", help="torch.compile the batched step (vmap kernel)")
    p.add_argument("--cuda-graphs", action="store_true", help="compile with mode='reduce-overhead'")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast in the batched path")
    p.add_argument(
        "--warmup",
        type=int,
        default=None,
        help="untimed warm-up rounds before the timed ones (default: 1 on CUDA, 0 on CPU)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--quick",
        action="store_true",
        help="2-core CPU preset: 1 round each; VGG-11 with E=1 and at most 64 samples per client",
    )
    return p.parse_args(argv)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def load_labels(seed: int) -> tuple[np.ndarray, str]:
    if LABELS.exists():
        return np.load(LABELS)["y_train"].astype(np.int64), f"real CIFAR-10 labels ({LABELS})"
    rng = np.random.default_rng(seed)
    return rng.permutation(np.repeat(np.arange(10), 5000)).astype(np.int64), "5,000 per class (labels file absent)"


def split(labels: np.ndarray, num_clients: int, seed: int) -> list[np.ndarray]:
    try:
        from fedlib.data.partition import dirichlet_partition

        return dirichlet_partition(labels, num_clients, 0.1, rng=np.random.default_rng(seed))
    except ImportError:  # a local Dir(0.1) split (no balance step)
        rng = np.random.default_rng(seed)
        owner = np.empty(labels.size, dtype=np.int64)
        for c in range(int(labels.max()) + 1):
            idx = rng.permutation(np.flatnonzero(labels == c))
            cuts = (np.cumsum(rng.dirichlet([0.1] * num_clients)) * idx.size).astype(int)[:-1]
            for k, part in enumerate(np.split(idx, cuts)):
                owner[part] = k
        return [np.flatnonzero(owner == k) for k in range(num_clients)]


# ------------------------------------------------------------------------ path (a): the usual FL code base
class CifarLike(torch.utils.data.Dataset):
    """HWC uint8 images through PIL and torchvision transforms, as the reference FL code bases do."""

    def __init__(self, images_hwc: np.ndarray, labels: np.ndarray, transform):
        self.images, self.labels, self.transform = images_hwc, labels, transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        from PIL import Image

        return self.transform(Image.fromarray(self.images[i])), int(self.labels[i])


def path_a_round(global_model, dataset, parts, picked, hp, device, workers, gen_seed):
    tv = import_torchvision()
    del tv
    states, sizes = [], []
    for k in picked:
        model = copy.deepcopy(global_model).to(device).train()
        opt = torch.optim.SGD(model.parameters(), lr=hp.lr, momentum=hp.momentum, weight_decay=hp.weight_decay)
        g = torch.Generator().manual_seed(gen_seed + int(k))
        loader = torch.utils.data.DataLoader(
            torch.utils.data.Subset(dataset, parts[k]),
            batch_size=hp.batch_size,
            shuffle=True,
            num_workers=workers,
            generator=g,
        )
        for _ in range(hp.epochs):
            for xb, yb in loader:
                xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
                opt.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(model(xb), yb).backward()
                opt.step()
        states.append({k2: v.detach() for k2, v in model.state_dict().items()})
        sizes.append(len(parts[k]))
    new = weighted_average(states, np.asarray(sizes, float) / sum(sizes))
    global_model.load_state_dict(new)


# --------------------------------------------------------------------------------------------- the runner
def run_model(name, args, device, x_np_hwc, x_dev, y_dev, labels, parts, log):
    tv = import_torchvision()
    epochs = args.epochs
    cap = args.max_client_samples
    if args.quick and name == "vgg11":
        epochs, cap = 1, 64 if cap is None else cap
    rounds = args.rounds if not args.quick else 1
    warm = args.warmup if args.warmup is not None else (1 if device.type == "cuda" else 0)
    rng = np.random.default_rng(args.seed + 1)
    picks = [rng.choice(len(parts), args.clients_per_round, replace=False) for _ in range(warm + rounds)]
    parts_used = [p if cap is None else p[:cap] for p in parts]
    torch.manual_seed(args.seed)
    model = make_model(name, 10).to(device)
    init = model_state(model)
    alg = make_algorithm("fedavg").bind(trainable_keys(model))
    pre = Preprocessor(mean=MEAN, std=STD)

    def hp_of(r):
        return LocalHyperParams(
            lr=0.01 * 0.98**r, momentum=0.9, weight_decay=WEIGHT_DECAY[name], batch_size=64, epochs=epochs
        )

    steps = [sum(epochs * -(-len(parts_used[k]) // 64) for k in picks[r]) for r in range(warm + rounds)]
    sizes = [[len(parts_used[k]) for k in picks[r]] for r in range(warm + rounds)]
    log(
        f"\n## {name}: timed rounds={rounds} after {warm} untimed warm-up round(s), M={args.clients_per_round}, "
        f"E={epochs}, B=64, cap per client={cap}, SGD steps per timed round={steps[warm:]}"
    )
    log(f"   client sizes per timed round: {sizes[warm:]}")
    idx_dev = [torch.as_tensor(p, device=device) for p in parts_used]
    times = {}

    def fl_rounds(path):
        params = {k: v.clone() for k, v in init.items()}
        gmodel = copy.deepcopy(model)
        out = []
        light = [(picks[0][:2], [p[:64] for p in parts_used], [t[:64] for t in idx_dev], 1)]
        schedule = light + [(picks[r], parts_used, idx_dev, epochs) for r in range(warm + rounds)]
        for r, (picked, parts_r, idx_r, ep) in enumerate(schedule, start=-1):
            # r == -1: a light untimed warm-up (2 clients, 1 epoch, 64 samples: lazy inits, allocator, threads);
            # then `warm` full untimed rounds (compile, CUDA graphs), then the timed rounds
            hp = hp_of(max(r, 0))
            hp = LocalHyperParams(
                lr=hp.lr, momentum=hp.momentum, weight_decay=hp.weight_decay, batch_size=64, epochs=ep
            )
            sync(device)
            t0 = time.perf_counter()
            if path == "a":
                path_a_round(gmodel, dataset_a, parts_r, picked, hp, device, args.workers, 1000 * (r + 1))
            elif path == "b":
                res = [
                    local_train(
                        model,
                        params,
                        x_dev[idx_r[k]],
                        y_dev[idx_r[k]],
                        {},
                        alg,
                        hp,
                        make_generator(client_seed(args.seed, r + 1, int(k)), device),
                        transform=pre.train,
                        client_id=int(k),
                    )
                    for k in picked
                ]
                params = alg.aggregate(
                    params, res, np.asarray([x.num_samples for x in res], float) / sum(x.num_samples for x in res), {}
                )[0]
            else:
                res = train_clients_batched(
                    model,
                    params,
                    x_dev,
                    y_dev,
                    [idx_r[k] for k in picked],
                    [{}] * len(picked),
                    alg,
                    hp,
                    [make_generator(client_seed(args.seed, r + 1, int(k)), device) for k in picked],
                    transform=pre.train,
                    client_ids=[int(k) for k in picked],
                    options=opts,
                )
                params = alg.aggregate(
                    params, res, np.asarray([x.num_samples for x in res], float) / sum(x.num_samples for x in res), {}
                )[0]
            sync(device)
            if r >= warm:
                out.append(time.perf_counter() - t0)
        return out

    opts = BatchedOptions(
        kernel=args.kernel,
        shrink=args.shrink,
        compile=args.compile,
        cuda_graphs=args.cuda_graphs,
        amp_dtype=torch.bfloat16 if args.bf16 else None,
    )
    log(f"   batched kernel for this model: {resolve_kernel(opts, model, torch.device(device))}")
    transform_a = tv.transforms.Compose(
        [
            tv.transforms.ColorJitter(0.4, 0.4, 0.4),
            tv.transforms.RandomHorizontalFlip(0.5),
            tv.transforms.RandomGrayscale(0.1),
            tv.transforms.ToTensor(),
            tv.transforms.Normalize(MEAN, STD),
        ]
    )
    dataset_a = CifarLike(x_np_hwc, labels, transform_a)
    for path in args.paths.split(","):
        per_round = fl_rounds(path)
        times[path] = float(np.mean(per_round))
        log(
            f"   ({path}) {LABEL[path]:<46s} s/round: {times[path]:9.3f}   rounds: "
            + ", ".join(f"{t:.3f}" for t in per_round)
        )
    for num in ("a", "b"):
        if num in times and "c" in times:
            log(f"   ratio ({num})/(c) = {times[num] / times['c']:.2f}x")
    if "c" in times and device.type == "cuda" and name == "lenet5":
        log(f"   LeNet-5 500 rounds at (c)'s pace: {500 * times['c']:.1f} s (target <= 10 s on one H100)")
    times["steps_per_round"] = float(np.mean(steps[warm:]))  # client steps: s/round over it is s per client step
    return times


LABEL = {
    "a": "sequential DataLoader + torchvision transforms",
    "b": "fedlib reference (local_train per client)",
    "c": "fedlib batched (train_clients_batched)",
}


def make_data(args, log):
    """The benchmark's data on the device: ``(device, x_np_hwc, x_dev, y_dev, labels, parts)``."""
    device = torch.device(args.device)
    labels, label_src = load_labels(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    x_nchw = torch.randint(0, 256, (labels.size, 3, 32, 32), dtype=torch.uint8, generator=gen)
    x_np_hwc = np.ascontiguousarray(x_nchw.permute(0, 2, 3, 1).numpy())
    parts = split(labels, args.clients, args.seed)
    what = torch.cuda.get_device_name(device) if device.type == "cuda" else os.cpu_count()
    log(
        f"# bench_trainer: device={device} ({what} "
        f"{'GPU' if device.type == 'cuda' else 'CPU cores'}), torch {torch.__version__}, threads "
        f"{torch.get_num_threads()}"
    )
    log(
        f"# data: {labels.size} random 3x32x32 uint8 images, labels: {label_src}; K={args.clients}, Dir(0.1), "
        f"client sizes min/median/max {min(map(len, parts))}/{int(np.median([len(p) for p in parts]))}/"
        f"{max(map(len, parts))}; batched options: kernel={args.kernel} (resolved per model below), "
        f"shrink={args.shrink}, "
        f"compile={args.compile}, cuda_graphs={args.cuda_graphs}, bf16={args.bf16}; DataLoader workers={args.workers}"
    )
    x_dev, y_dev = x_nchw.to(device), torch.as_tensor(labels, device=device)
    return device, x_np_hwc, x_dev, y_dev, labels, parts


def main(argv=None):
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    def log(s):
        print(s, flush=True)

    device, x_np_hwc, x_dev, y_dev, labels, parts = make_data(args, log)
    for name in args.models.split(","):
        run_model(name, args, device, x_np_hwc, x_dev, y_dev, labels, parts, log)


if __name__ == "__main__":
    main()
