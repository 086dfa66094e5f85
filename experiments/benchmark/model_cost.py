"""Training throughput of the small models (images/s for forward + backward + SGD step).

    python scripts/bench_models.py [--threads 2[,1]] [--batch 128] [--steps 30] [--repeats 5]
        [--models small_resnet,cnn1d,mlp] [--option small_resnet:widths=16,32,64]

Prints, per model and thread count, the wall-clock images/s of each repeat and their median
(the machine may be shared, so the median of several repeats is the number to quote), and the
images per CPU-second of the process. Target for small_resnet: ≥ 1,500 images/s at batch 128
on 2 CPU cores. When other jobs oversubscribe the cores, 2 intra-op threads collapse (they
wait on each other); ``--threads 1`` then gives the robust lower bound of one core.
"""

from __future__ import annotations

import argparse
import os
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
                      steps: int) -> tuple[float, float]:
    """One measurement of `steps` SGD steps after 3 warm-up steps: (images per wall-clock
    second, images per CPU-second of this process)."""
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
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return batch * steps / wall, batch * steps / max(cpu, 1e-9)


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
    parser.add_argument("--threads", default="2", help="comma-separated thread counts, e.g. 2,1")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--models", default=",".join(SETUPS))
    parser.add_argument("--option", action="append", default=[])
    args = parser.parse_args(argv)
    try:
        threads = [int(t) for t in args.threads.split(",") if t]
        if not threads or min(threads) < 1:
            raise ValueError(f"--threads needs positive ints, got {args.threads!r}")
        if min(args.batch, args.steps, args.repeats) < 1:
            raise ValueError("--batch, --steps and --repeats must be positive")
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
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, batch {args.batch}, {args.steps} steps x {args.repeats} "
          f"repeats, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for name in names:
        shape, k, opts = SETUPS[name]
        try:
            model = models.build(name, k, shape[0], **{**opts, **extra.get(name, {})})
        except (ValueError, TypeError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        n_params = sum(p.numel() for p in model.parameters())
        for n_threads in threads:
            torch.set_num_threads(n_threads)
            rates = [images_per_second(model, shape, k, args.batch, args.steps)
                     for _ in range(args.repeats)]
            wall = [r[0] for r in rates]
            cpu = statistics.median(r[1] for r in rates)
            runs = " ".join(f"{r:.0f}" for r in wall)
            print(f"{name:13s} params {n_params:>7d} threads {n_threads}  images/s median "
                  f"{statistics.median(wall):6.0f}  per CPU-s {cpu:6.0f}  (runs: {runs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
