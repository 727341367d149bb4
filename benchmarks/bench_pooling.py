"""Evaluating LeNet-5 on the CPU: with fedlib's pooling (``MaxPool2x2``, elementwise maxima without gradients)
against the same model with ``nn.MaxPool2d(2)``, in the same process.

One test-set pass the size of the subset tier's (``--images``, default 1,017 CIFAR-10-sized images, one batch, no
gradients, eval mode), ``--repeats`` timed passes of each after ``--warmup`` untimed ones, best and median
milliseconds per pass, and the ratio baseline / fedlib.  Both must give the same logits bit for bit, or the script
stops with status 1.

    nice python benchmarks/bench_pooling.py --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from fedlib.training.models import LeNet5  # noqa: E402
from fedlib.training.pooling import MaxPool2x2  # noqa: E402


def with_torch_pooling(net: LeNet5) -> LeNet5:
    """A copy of ``net`` whose pooling layers are ``nn.MaxPool2d(2)``."""
    twin = LeNet5(net.num_classes).eval()
    twin.load_state_dict(net.state_dict())
    for name, module in list(twin.features.named_children()):
        if isinstance(module, MaxPool2x2):
            twin.features[int(name)] = nn.MaxPool2d(2)
    return twin


def per_call_ms(fn, warmup: int, repeats: int) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=1017)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for name in ("images", "repeats", "threads"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name}: got {value}; allowed: an integer >= 1")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    net = LeNet5(10).eval()
    base_net = with_torch_pooling(net)
    x = torch.randn(args.images, 3, 32, 32)
    with torch.no_grad():
        if not torch.equal(net(x), base_net(x)):
            print("the two models' logits differ: no timing")
            return 1
        base = per_call_ms(lambda: base_net(x), args.warmup, args.repeats)
        new = per_call_ms(lambda: net(x), args.warmup, args.repeats)
    print(
        f"LeNet-5 forward of {args.images} images of 3x32x32, torch threads {torch.get_num_threads()}, "
        f"{args.repeats} passes each"
    )
    print(f"{'pooling':<36}{'best ms':>10}{'median ms':>12}")
    for name, t in (("nn.MaxPool2d (baseline)", base), ("fedlib MaxPool2x2", new)):
        print(f"{name:<36}{min(t):>10.2f}{statistics.median(t):>12.2f}")
    best, median = min(base) / min(new), statistics.median(base) / statistics.median(new)
    print(f"ratio baseline / fedlib: {best:.2f}x (best), {median:.2f}x (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
