"""Operations per training step, counted with torch.profiler: what a launch-bound step pays for.

    python -m experiments.benchmark.kernels [--steps 5] [--cpu] [--json]

At batch 128 the small ResNet's kernels are short, so a GPU step costs about (kernels launched) × (launch
overhead, microseconds) more than its arithmetic; fewer launches is what makes it cheaper. Counted per step:

* on CUDA, device activities (kernels, copies, memsets) seen by the profiler;
* on the CPU, ``aten::`` operator calls (nested calls included), the same code path's operation count.

Rows: the steps of scripts/bench_meta_step.py (plain CE, focal with the γ-Net, the meta step per backend;
its setup: small_resnet, 128 + 128 images of 28×28), after two untimed steps each; and the trainer's iterations
(:func:`metacal.train.loop.train_epoch` of the ResNet regime's configs, the loader included), counted over one
capped epoch after an untimed one. auto γ's once-per-epoch update falls inside the counted epoch. The trainer's
rows need Fashion-MNIST and are left out in one line without it.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Callable

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from .meta_step import Method, default_setup

STEPS = ("plain", "focal", "jvp", "higher", "head")
REGIME = "configs/fashion_mnist_resnet_overconfident"
TRAINER_METHODS = ("ce", "focal", "auto_gamma", "flgamma_sece")


def count(fn: Callable[[], None], calls: int, device: torch.device) -> float:
    """Operations per call of ``fn`` (device activities on CUDA, ``aten::`` calls on the CPU)."""
    cuda = device.type == "cuda"
    with profile(activities=[ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            fn()
        if cuda:
            torch.cuda.synchronize(device)
    if cuda:
        n = sum(e.device_type == DeviceType.CUDA for e in prof.events())
    else:
        n = sum(e.name.startswith("aten::") for e in prof.events())
    return n / calls


def bench_steps(device: torch.device, steps: int) -> dict[str, float]:
    """Operations per step of each of :data:`STEPS` (bench_meta_step's setup)."""
    model, gamma_net, objective, data = default_setup(device)
    found = {}
    for name in STEPS:
        method = Method(name, model, gamma_net, objective, data)
        for _ in range(2):
            method.step()
        found[name] = count(method.step, steps, device)
    return found


def trainer_steps(device: torch.device, steps: int, methods=TRAINER_METHODS,
                  counter: Callable[[Callable[[], None], int, torch.device], float] = count) -> dict[str, float]:
    """Operations per iteration of the trainer's loop, per method of the ResNet regime (``counter``: what is
    counted per call of its function; default :func:`count`)."""
    from metacal.train.loop import train_epoch

    from .epoch import build_run

    found = {}
    extra = [f"run.max_steps_per_epoch={steps}", *(["run.cpu=true"] if device.type == "cpu" else [])]
    for method in methods:
        with tempfile.TemporaryDirectory() as scratch:
            run = build_run(f"{REGIME}/{method}.yaml", extra, Path(scratch))
            train_epoch(run, 0)  # untimed: cuDNN's autotuner, the allocator, lazy state
            found[method] = counter(lambda: train_epoch(run, 1), 1, device) / run.steps_per_epoch
            run.tb.close()
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.benchmark.kernels",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=5, help="steps counted per row")
    p.add_argument("--cpu", action="store_true", help="count on the CPU even where CUDA is available")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = p.parse_args(argv)
    if args.steps < 1:
        p.error("--steps must be at least 1")
    from metacal.data import DataNotFoundError

    device = torch.device("cuda" if torch.cuda.is_available() and not args.cpu else "cpu")
    result = {"device": str(device), "unit": "device activities" if device.type == "cuda" else "aten calls",
              "bench": bench_steps(device, args.steps)}
    try:
        result["trainer"] = trainer_steps(device, args.steps)
    except DataNotFoundError as err:  # the trainer's rows read Fashion-MNIST
        result["trainer"] = {}
        print(f"the trainer's rows are left out: {str(err).splitlines()[0]}", flush=True)
    for group in ("bench", "trainer"):
        for name, n in result[group].items():
            print(f"{group} {name}: {n:.0f} {result['unit']} per step", flush=True)
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
