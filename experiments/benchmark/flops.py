"""Arithmetic per step: the floating-point operations of the matrix products and convolutions each step computes.

    python -m experiments.benchmark.flops [--cpu] [--json] [--output docs/performance.md | --no-write]

Counted, not timed. :class:`FlopCount` adds torch's FLOP formulas (``torch.utils.flop_counter.flop_registry``:
2·m·n·k for an (m×k)(k×n) product, the same rule for a convolution and for each gradient its backward computes)
over every aten call one step dispatches: forward, backward, forward-mode tangents and double backward alike.
Elementwise work (activations, BatchNorm, the optimiser) is left out; it moves memory rather than multiplying.

The count belongs to the algorithm, not to the device, so it separates what a step must compute from how fast a
machine computes it. A wall-time ratio above the arithmetic ratio is overhead (launches, memory-bound kernels,
slow backward kernels); one below it means that the extra work runs on faster kernels than the focal step does.

Rows: the steps of scripts/bench_meta_step.py on its setup (small_resnet, 128 train + 128 meta-val images of
28×28), one step each after an uncounted one. Also: F, the forward pass of the train batch, and f₁, its first
layer (its input, the images, has neither a gradient nor a tangent). And the trainer's iterations
(:func:`metacal.train.loop.train_epoch`) of the ResNet regime's CE, focal and FLγ-SECE configs, per iteration of
a capped epoch after an uncounted one; they need Fashion-MNIST and are left out in one line without it.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import sys
from collections import Counter
from pathlib import Path

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from .epoch_report import output_problem, write
from .meta_step import Method, default_setup, step_label

BEGIN, END = "<!-- flops: begin -->", "<!-- flops: end -->"
STEPS = ("plain", "focal", "floor", "jvp", "head", "higher", "higher_recompute", "jvp_trajectory")
TRAINER = ("ce", "focal", "flgamma_sece")


class FlopCount(TorchDispatchMode):
    """FLOPs of the aten calls dispatched inside the block, in total and per operator, from ``flop_registry``.

    torch's ``FlopCounterMode`` counts the same and also attributes FLOPs to modules; its module hooks make
    ``torch.autograd.grad`` on leaf tensors raise, which every meta step calls, so this mode tracks no modules.

    A product with an argument that is a single 0 expanded (every stride 0) is not counted: that is how
    forward AD's zero tangent of an input without one (an efficient zero tensor) reaches a Python mode, while
    torch outside the mode returns zeros for such a product without computing it. (A backward's expanded
    ones, ``sum().backward()``, are counted.)"""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0
        self.by_op: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        formula = flop_registry.get(func._overloadpacket)
        if formula is not None and not any(_expanded_zero(a) for a in args):
            n = int(formula(*args, **kwargs, out_val=out))
            self.total += n
            self.by_op[str(func._overloadpacket)] += n
        return out


def _expanded_zero(value) -> bool:
    return (torch.is_tensor(value) and value.numel() > 1 and not any(value.stride())
            and value.as_strided((), ()).item() == 0)


def count(fn, *args) -> int:
    """FLOPs of one call ``fn(*args)``."""
    with FlopCount() as counter:
        fn(*args)
    return counter.total


def first_layer(model: nn.Module, x: torch.Tensor) -> nn.Module:
    """The first convolution or linear layer that ``model(x)`` calls (the one that sees the inputs)."""
    order: list[nn.Module] = []
    hooks = [m.register_forward_hook(lambda m, *_: order.append(m)) for m in model.modules()
             if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear))]
    try:
        with torch.no_grad():
            model(x[:2])
    finally:
        for h in hooks:
            h.remove()
    return order[0]


def measure(device: torch.device, setup: tuple | None = None) -> dict:
    """FLOPs per step of every row of :data:`STEPS`, F and f₁, on ``setup`` (model, γ-Net, objective, batches;
    default bench_meta_step's on ``device``)."""
    model, gamma_net, objective, data = setup if setup is not None else default_setup(device)
    x = data[0]
    flops = {}
    for name in STEPS:
        method = Method(name, model, gamma_net, objective, data)
        method.step()
        flops[name] = count(method.step)
    net = copy.deepcopy(model).train()
    with torch.no_grad():
        forward = count(net, x)
        first = count(first_layer(net, x), x)
    focal = flops["focal"]
    return {"device": str(device), "torch": torch.__version__, "flops": flops,
            "ratio_to_focal": {n: f / focal for n, f in flops.items()},
            "forward": forward, "first_layer": first, "batch": int(x.shape[0]), "meta_batch": int(data[2].shape[0])}


def trainer_flops(device: torch.device, steps: int = 2) -> dict[str, float] | str:
    """FLOPs per iteration of the trainer's loop for :data:`TRAINER` (the ResNet regime), or, without
    Fashion-MNIST, the one-line reason they are left out."""
    from metacal.data import DataNotFoundError

    from .kernels import trainer_steps

    try:
        return trainer_steps(device, steps, TRAINER, counter=lambda fn, calls, _device: count(fn) / calls)
    except DataNotFoundError as err:
        return f"the trainer's rows are left out: {str(err).splitlines()[0]}"


def table(result: dict) -> str:
    f = result["flops"]
    lines = ["| step | GFLOP | × focal |", "|---|---:|---:|"]
    lines += [f"| {step_label(n)} | {f[n] / 1e9:.3f} | {result['ratio_to_focal'][n]:.2f} |" for n in STEPS]
    trainer = result.get("trainer")
    if isinstance(trainer, dict):
        lines += ["", "| trainer iteration (ResNet regime) | GFLOP | × CE |", "|---|---:|---:|"]
        lines += [f"| {n} | {v / 1e9:.3f} | {v / trainer['ce']:.2f} |" for n, v in trainer.items()]
    elif trainer:
        lines += ["", trainer]
    return "\n".join(lines)


def section(result: dict, command: str) -> str:
    f, big_f, f1 = result["flops"], result["forward"], result["first_layer"]
    g = lambda n: f"{n / 1e9:.3f}"  # noqa: E731
    tangent = f["jvp"] - f["floor"]
    when = f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"
    trainer, trainer_line = result.get("trainer"), ""
    if isinstance(trainer, dict):
        trainer_line = (f"\n- The trainer's iterations (second table; configs/fashion_mnist_resnet_overconfident, a "
                        f"capped epoch):\n  CE's computes {trainer['ce'] / f['plain']:.3f}× the plain step above, "
                        f"FLγ-SECE's {trainer['flgamma_sece'] / trainer['ce']:.2f}× CE's.")
    return f"""{BEGIN}
## Arithmetic per step

Generated by `python -m experiments.benchmark.flops` — do not edit the numbers by hand; regenerate with:

    {command}

Counted on {result['device']} with torch {result['torch']}, {when}: the floating-point operations of the
matrix products and convolutions of one step (torch's FLOP formulas; forward, backward, tangents), for the
steps of the table above on its setup ({result['batch']} train + {result['meta_batch']} meta-val images). The
count is the algorithm's, the same on every device.

{table(result)}

- The forward pass of the train batch is F = {g(big_f)} GFLOP; its first layer f₁ = {g(f1)} GFLOP (its input, the
  images, has no gradient and no tangent). A step with backward is 3F − f₁ = {g(3 * big_f - f1)} GFLOP plus the
  loss's and the γ-Net's small products.
- floor − focal = {g(f['floor'] - f['focal'])} GFLOP: the meta-val forward and backward, the arithmetic of a
  plain step ({g(f['plain'])}), as the two batches have the same size.
- jvp − floor = {g(tangent)} GFLOP = {tangent / f['focal']:.2f} focal steps: the tangent pass, 2F − f₁ =
  {g(2 * big_f - f1)} GFLOP (two convolutions per layer, one for the first), and the contraction with
  ∂²ℓ/∂z∂γ ({(tangent - 2 * big_f + f1) / 1e6:.2f} MFLOP).{trainer_line}

So every exact full-network hypergradient that takes the real step once computes {result['ratio_to_focal']['floor']:.2f}
focal steps with a meta-val batch as large as the train batch, and `jvp` computes
{result['ratio_to_focal']['jvp']:.2f}. Its wall time can come in under that ratio only where its extra passes run
faster per FLOP than the focal step does (the tangent pass convolves with forward kernels, a backward pass
with backward ones); a target below the ratio asks for exactly that. `higher`'s double backward computes
{result['ratio_to_focal']['higher']:.2f} focal steps, {f['higher'] / f['jvp']:.2f}× what `jvp` computes.
What computes less changes the method's settings: `meta.every: 2` (a meta step every second iteration) computes
(jvp + focal) / 2 = {(result['ratio_to_focal']['jvp'] + 1) / 2:.2f} focal steps per iteration, and the `head` backend
{result['ratio_to_focal']['head']:.2f}.
{END}"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.benchmark.flops", description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu", action="store_true", help="count on the CPU even where CUDA is available")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--output", default="docs/performance.md", help="the page whose arithmetic section is replaced")
    p.add_argument("--no-write", action="store_true", help="print only")
    args = p.parse_args(argv)
    if not args.no_write and (problem := output_problem(args.output)):
        p.error(problem)
    device = torch.device("cuda" if torch.cuda.is_available() and not args.cpu else "cpu")
    result = measure(device)
    result["trainer"] = trainer_flops(device)
    print(table(result), flush=True)
    if not args.no_write:
        command = "python -m experiments.benchmark.flops " + " ".join(sys.argv[1:] if argv is None else argv)
        write(Path(args.output), section(result, command.strip()), BEGIN, END)
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
