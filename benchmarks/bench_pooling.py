"""Evaluating LeNet-5 on the CPU: with fedlib's pooling (``MaxPool2x2``, elementwise maxima without gradients)
against the same model with ``nn.MaxPool2d(2)``, in the same process.

One test-set pass the size of the subset tier's (``--images``, default 1,017 CIFAR-10-sized images, one batch, no
gradients, eval mode), ``--repeats`` timed passes of each after ``--warmup`` untimed ones, best and median
milliseconds per pass, and the ratio baseline / fedlib.  Both must give the same logits bit for bit, or the script
stops with status 1.

    nice python benchmarks/bench_pooling.py --threads 1
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from benchmarks.timing import parse_args, per_call_ms, report  # noqa: E402
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


def main(argv=None) -> int:
    args = parse_args(__doc__.splitlines()[0], "images", 1017, argv)
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
    best, median = report([("nn.MaxPool2d (baseline)", base), ("fedlib MaxPool2x2", new)], "pooling")
    print(f"ratio baseline / fedlib: {best:.2f}x (best), {median:.2f}x (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
