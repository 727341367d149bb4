"""The training input pipeline (``Preprocessor.train_with_uniforms``: scale, colour jitter, flip, grayscale,
standardise) against the same arithmetic written out of place, one new tensor per operation, in the same process.

One batch the size of a subset-tier step (``--images``, default 640: 10 clients x 64 CIFAR-10-sized uint8 images),
``--repeats`` timed calls of each after ``--warmup`` untimed ones, best and median milliseconds per call, and the
ratio baseline / pipeline.  Both must give the same tensor bit for bit, or the script stops with status 1.

    nice python benchmarks/bench_augment.py --threads 1
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from benchmarks.timing import parse_args, per_call_ms, report  # noqa: E402
from fedlib.data.augment import LUMA_WEIGHTS, Preprocessor  # noqa: E402

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)  # CIFAR-10 channel statistics


def out_of_place(images: torch.Tensor, u: torch.Tensor, strength: float = 0.4) -> torch.Tensor:
    """The default augmentation (jitter 0.4, flip 0.5, grayscale 0.1, hue off) and standardisation, every step a
    new tensor."""
    luma = torch.tensor(LUMA_WEIGHTS).view(3, 1, 1)
    mean, std = torch.tensor(MEAN).view(3, 1, 1), torch.tensor(STD).view(3, 1, 1)
    low, high = 1.0 - strength, 1.0 + strength
    on = u[:, 0] < 1.0
    f = [torch.where(on, low + (high - low) * u[:, c], torch.ones_like(u[:, c])).view(-1, 1, 1, 1) for c in (1, 2, 3)]
    x = images.to(torch.float32).div(255.0)
    x = (x * f[0]).clamp(0.0, 1.0)
    x = (f[1] * x + (1 - f[1]) * (x * luma).sum(dim=1, keepdim=True).mean(dim=(1, 2, 3), keepdim=True)).clamp(0, 1)
    x = (f[2] * x + (1 - f[2]) * (x * luma).sum(dim=1, keepdim=True)).clamp(0.0, 1.0)
    x = torch.where((u[:, 5] < 0.5).view(-1, 1, 1, 1), x.flip(-1), x)
    x = torch.where((u[:, 6] < 0.1).view(-1, 1, 1, 1), (x * luma).sum(dim=1, keepdim=True).expand_as(x), x)
    return (x - mean) / std


def main(argv=None) -> int:
    args = parse_args(__doc__.splitlines()[0], "images", 640, argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(args.seed)
    images = torch.randint(0, 256, (args.images, 3, 32, 32), dtype=torch.uint8, generator=gen)
    u = torch.rand((args.images, 7), generator=gen)
    pre = Preprocessor(mean=MEAN, std=STD)
    if not torch.equal(pre.train_with_uniforms(images, u), out_of_place(images, u)):
        print("the pipeline and the written-out arithmetic differ: no timing")
        return 1
    base = per_call_ms(lambda: out_of_place(images, u), args.warmup, args.repeats)
    new = per_call_ms(lambda: pre.train_with_uniforms(images, u), args.warmup, args.repeats)
    print(f"{args.images} images of 3x32x32, torch threads {torch.get_num_threads()}, {args.repeats} calls each")
    rows = [("out of place (baseline)", base), ("Preprocessor.train_with_uniforms", new)]
    best, median = report(rows, "path")
    print(f"ratio baseline / pipeline: {best:.2f}x (best), {median:.2f}x (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
