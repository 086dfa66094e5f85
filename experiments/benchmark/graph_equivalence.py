"""Training iterations replayed from CUDA graphs against eager ones (``run.cuda_graphs``,
metacal/train/cuda_graphs.py), on CUDA only.

    python -m experiments.benchmark.graph_equivalence [--steps 12] [--json]

For each case — CE, focal, the ``jvp`` meta step at every iteration and at every second one — the small ResNet of
scripts/bench_meta_step.py trains ``--steps`` iterations on the same random batches twice from the same state:
eagerly, and through :class:`~metacal.train.cuda_graphs.GraphedSteps` with
:func:`~metacal.train.cuda_graphs.cuda_capture` (3 eager warm-ups per kind of iteration, then capture and replays). The γ-Net's Adam is capturable on both sides,
and cuDNN and cuBLAS are asked for deterministic kernels, so the two runs should end bit for bit equal; the page
gets, per case, the largest difference of any weight, buffer or γ-Net parameter relative to that tensor's largest
magnitude. tests/train/test_cuda_graphs.py checks the same scheme on CPU with an emulated graph.
"""

from __future__ import annotations

import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS; before CUDA starts

import argparse  # noqa: E402
import copy  # noqa: E402
import json  # noqa: E402

import torch  # noqa: E402

from metacal.losses import build as build_loss  # noqa: E402
from metacal.meta import MetaLearner, PlainStep  # noqa: E402
from metacal.objectives._inputs import targets_in_range  # noqa: E402
from metacal.train.cuda_graphs import GraphedSteps, cuda_capture  # noqa: E402

from .epoch import synchronize  # noqa: E402
from .meta_step import default_setup  # noqa: E402

CASES = ("ce", "focal", "jvp", "jvp_every_2")


def build(case: str, model, gamma_net, objective):
    """(stepper, the loss that keys its graphs, the modules whose state is compared) on copies of the state."""
    model, gamma_net = copy.deepcopy(model), copy.deepcopy(gamma_net)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    if case in ("ce", "focal"):
        loss = build_loss("ce") if case == "ce" else build_loss("focal", gamma=2.0)
        return PlainStep(model, loss, opt), loss, [model]
    loss = build_loss("focal")
    meta_opt = torch.optim.Adam(gamma_net.parameters(), lr=1e-3, capturable=True)
    learner = MetaLearner(model, opt, objective, gamma_net=gamma_net, loss=loss, meta_optimizer=meta_opt,
                          every=2 if case == "jvp_every_2" else 1)
    return learner, loss, [model, gamma_net]


def train(case: str, capture, setup, batches, meta_batches) -> tuple[list[torch.Tensor], int]:
    """The state after the iterations (graphed when ``capture`` is given), and how many were replayed."""
    stepper, loss, modules = build(case, *setup)
    if isinstance(stepper, MetaLearner):
        stepper.meta_val = iter(meta_batches)
    steps = GraphedSteps(stepper, loss, capture) if capture is not None else stepper
    with targets_in_range():  # as the trainer: labels checked once, no host read per step
        for x, y in batches:
            steps.step(x, y)
    synchronize(batches[0][0].device)
    state = [t.detach().clone() for m in modules for t in [*m.parameters(), *m.buffers()]]
    return state, steps.replays if capture is not None else 0


def compare(case: str, steps: int, device: torch.device, capture=cuda_capture) -> dict:
    """Eager against graphed training of ``case`` (``capture``: how the iterations are captured)."""
    model, gamma_net, objective, (x, y, xm, ym) = default_setup(device)
    g = torch.Generator(device=device).manual_seed(1)
    batches = [(torch.randn(x.shape, device=device, generator=g),
                torch.randint(0, 10, y.shape, device=device, generator=g)) for _ in range(steps)]
    meta = [(torch.randn(xm.shape, device=device, generator=g),
             torch.randint(0, 10, ym.shape, device=device, generator=g)) for _ in range(steps)]
    setup = (model, gamma_net, objective)
    eager, _ = train(case, None, setup, batches, meta)
    replayed, replays = train(case, capture, setup, batches, meta)
    diffs = [float((a.double() - b.double()).abs().max() / a.double().abs().max().clamp_min(1e-30))
             for a, b in zip(eager, replayed) if a.numel() and a.is_floating_point()]
    equal = all(torch.equal(a, b) for a, b in zip(eager, replayed))
    return {"steps": steps, "replayed": replays, "bitwise_equal": equal, "max_rel_diff": max(diffs)}


def table(cases: dict[str, dict]) -> str:
    """The comparison as a markdown table (docs/performance_gpu.md)."""
    lines = ["| case | iterations | replayed | bit for bit | largest relative difference |", "|---|---:|---:|---|---:|"]
    for name, row in cases.items():
        lines.append(f"| {name} | {row['steps']} | {row['replayed']} | {'yes' if row['bitwise_equal'] else 'no'} | "
                     f"{row['max_rel_diff']:.1e} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.benchmark.graph_equivalence",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("graph_equivalence: no CUDA device here; nothing compared")
        return 0
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    torch.use_deterministic_algorithms(True, warn_only=True)
    device = torch.device("cuda")
    result = {}
    for case in CASES:
        result[case] = compare(case, args.steps, device)
        print(case, result[case], flush=True)
    print(table(result))
    if args.json:
        print(json.dumps({"cases": result, "device": torch.cuda.get_device_name(), "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
