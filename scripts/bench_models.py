"""Training throughput of the small models (images/s for forward + backward + SGD step).

    python scripts/bench_models.py [--threads 2] [--batch 128] [--steps 30] [--repeats 5]
                                   [--models small_resnet,cnn1d,mlp] [--option small_resnet:widths=16,32,64]

Prints, per model, the images/s of each repeat and their median (the machine may be shared,
so the median of several repeats is the number to quote). Target for small_resnet:
≥ 1,500 images/s at batch 128 on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
from torch import nn

from metacal import models

# name -> (input shape without batch dim, num_classes, extra build options)
SETUPS: dict[str, tuple[tuple[int, ...], int, dict]] = {
    "small_resnet": ((1, 28, 28), 10, {}),
    "cnn1d": ((1, 40), 10, {}),
    "mlp": ((1, 28, 28), 10, {"input_shape": (1, 28, 28)}),
}


def images_per_second(model: nn.Module, shape: tuple[int, ...], num_classes: int, batch: int,
                      steps: int) -> float:
    """Median-free single measurement: `steps` SGD steps after 3 warm-up steps."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(batch, *shape)
    y = torch.randint(0, num_classes, (batch,))
    model.train()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    for _ in range(3):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return batch * steps / (time.perf_counter() - start)


def parse_option(text: str) -> tuple[str, str, object]:
    """'small_resnet:widths=16,32,64' -> ('small_resnet', 'widths', (16, 32, 64))."""
    try:
        name, rest = text.split(":", 1)
        key, value = rest.split("=", 1)
    except ValueError:
        raise ValueError(f"--option must look like model:key=value, got {text!r}") from None
    parts = [int(v) for v in value.split(",")] if value else []
    return name, key, tuple(parts) if "," in value else parts[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--models", default=",".join(SETUPS))
    parser.add_argument("--option", action="append", default=[])
    args = parser.parse_args(argv)
    try:
        names = [n for n in args.models.split(",") if n]
        unknown = [n for n in names if n not in SETUPS]
        if unknown:
            raise ValueError(f"unknown benchmark model(s) {unknown}; choose from {list(SETUPS)}")
        extra: dict[str, dict] = {n: {} for n in names}
        for text in args.option:
            name, key, value = parse_option(text)
            extra.setdefault(name, {})[key] = value
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, batch {args.batch}, "
          f"{args.steps} steps x {args.repeats} repeats")
    for name in names:
        shape, k, opts = SETUPS[name]
        model = models.build(name, k, shape[0], **{**opts, **extra.get(name, {})})
        n_params = sum(p.numel() for p in model.parameters())
        rates = [images_per_second(model, shape, k, args.batch, args.steps)
                 for _ in range(args.repeats)]
        runs = " ".join(f"{r:.0f}" for r in rates)
        print(f"{name:14s} params {n_params:>8d}  images/s median {statistics.median(rates):7.0f}"
              f"  (runs: {runs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
