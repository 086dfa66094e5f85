"""The timed steps of scripts/bench_meta_step.py: a plain CE step, a focal step with the γ-Net (no meta
update), the meta step with each hypergradient backend, and two reference rows; each on its own copy of
one initial state and the same fixed batches. Plus the paired statistic every ratio of the benchmark uses.
"""

from __future__ import annotations

import copy
import gc
import statistics
from argparse import Namespace

import torch
import torch.nn.functional as F

from metacal import models, objectives
from metacal.losses import build as build_loss
from metacal.meta import BACKENDS, GammaNet, MetaLearner
from metacal.objectives._inputs import targets_in_range

from .memory import SavedTensorMeter, reset_rss_peak, rss_mb

# Comparison rows, timed in the same loop but not backends: "floor" = a focal step + the meta-val
# forward/backward w.r.t. the updated parameters (work every exact full-network hypergradient that takes
# the real step once must do, so higher / floor bounds any such backend's speed-up over `higher`);
# "higher_recompute" = higher used as in Bohdal et al.'s code and our first prototype: a lookahead on
# copied weights, then a separate real step (the step computed twice); "jvp_trajectory" = the `jvp` meta step
# with the γ level's hypergradient through the whole trajectory (meta.horizon=trajectory: + one forward and
# one double backward on the train batch and one meta-val forward/backward per step).
COMPARISON_ROWS = ("floor", "higher_recompute", "jvp_trajectory")


def step_label(kind: str) -> str:
    """The row label of a step kind in the benchmarks' tables."""
    return {"plain": "plain CE step", "focal": "focal step (γ-Net, no meta)",
            "floor": "reference: focal step + meta-val fwd/bwd (floor)",
            "higher_recompute": "reference: `higher` lookahead + separate real step",
            "jvp_trajectory": "meta step, `jvp` + trajectory level (`meta.horizon: trajectory`)"}.get(
                kind, f"meta step, `{kind}`")


class Method:
    """One benchmarked training step on its own copy of the initial state."""

    def __init__(self, kind: str, model, gamma_net, objective, data) -> None:
        self.kind = kind
        self.model = copy.deepcopy(model)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
        self.gamma_net = copy.deepcopy(gamma_net)
        self.data = data
        self.focal = build_loss("focal", reduction="none")
        self.meta = None
        if kind in BACKENDS or kind == "jvp_trajectory":
            self.meta = MetaLearner(self.model, self.opt, objective, gamma_net=self.gamma_net,
                                    backend=kind.removesuffix("_trajectory"),
                                    horizon="trajectory" if kind.endswith("_trajectory") else "step")

        self.objective = objective
        self.meta_opt = torch.optim.Adam(self.gamma_net.parameters(), lr=1e-3)

    def step(self) -> None:
        with targets_in_range():  # as the trainer: labels checked once, no host read per step
            self._step()

    def _step(self) -> None:
        x, y, xm, ym = self.data
        if self.meta is not None:
            self.meta.step(x, y, (xm, ym))
            return
        if self.kind == "higher_recompute":
            self.lookahead_hypergradient()
        self.model.train()
        self.opt.zero_grad(set_to_none=True)
        if self.kind == "plain":
            loss = F.cross_entropy(self.model(x), y)
        else:  # focal with per-sample γ from the γ-Net, no meta update
            logits, feats = self.model(x, return_features=True)
            with torch.no_grad():
                gamma = self.gamma_net(feats)
            loss = self.focal(logits, y, gamma=gamma).mean()
        loss.backward()
        self.opt.step()
        if self.kind == "floor":  # v = ∇θ' J on the meta-val batch, parameters only
            objective = self.objective(self.model(xm), ym)
            torch.autograd.grad(objective, [p for p in self.model.parameters()])

    def lookahead_hypergradient(self) -> None:
        """The γ-Net update as in the reference code: a differentiable SGD step on copied weights, the
        meta objective through it, Adam on the γ-Net (the real step follows separately in ``step``)."""
        import higher

        x, y, xm, ym = self.data
        self.model.train()
        self.meta_opt.zero_grad(set_to_none=True)
        with higher.innerloop_ctx(self.model, self.opt, copy_initial_weights=True) as (fmodel, diffopt):
            logits, feats = fmodel(x, return_features=True)
            diffopt.step(self.focal(logits, y, gamma=self.gamma_net(feats.detach())).mean())
            objective = self.objective(fmodel(xm), ym)
            grads = torch.autograd.grad(objective, list(self.gamma_net.parameters()))
        for p, g in zip(self.gamma_net.parameters(), grads):
            p.grad = g
        self.meta_opt.step()


def hypergradient_difference(model, gamma_net, objective, data) -> tuple[float, float]:
    """(jvp vs higher, head vs higher) relative max differences of the γ-Net hypergradient, same state."""
    grads = {}
    x, y, xm, ym = data
    for backend in BACKENDS:
        m = copy.deepcopy(model)
        g = copy.deepcopy(gamma_net)
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
        MetaLearner(m, opt, objective, gamma_net=g, backend=backend).step(x, y, (xm, ym))
        grads[backend] = torch.cat([p.grad.reshape(-1) for p in g.parameters()])
    ref = grads["higher"]
    rel = lambda a: float((a - ref).abs().max() / ref.abs().max())  # noqa: E731
    return rel(grads["jvp"]), rel(grads["head"])


def measure_memory(method: Method, cuda: bool) -> float:
    """Peak MB of one step: on CUDA the allocator's peak above the memory in use before it; otherwise the
    peak of bytes that autograd graphs hold for backward (:class:`SavedTensorMeter`)."""
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        method.step()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2**20
    meter = SavedTensorMeter()
    with torch.autograd.graph.saved_tensors_hooks(meter.pack, meter.unpack):
        method.step()
    return meter.peak / 2**20


def build_setup(args, device):
    """(model, γ-Net, meta objective, (x, y, x_meta, y_meta)) from ``args``' model, classes, size, batch,
    meta_batch and objective; seeded, random images (the cost does not depend on the pixels)."""
    torch.manual_seed(0)
    model = models.build(args.model, num_classes=args.classes, in_channels=1).to(device)
    gamma_net = GammaNet(model.feature_dim, args.classes).to(device)
    objective = objectives.build(args.objective)
    shape = (1, args.size, args.size)
    data = (
        torch.randn(args.batch, *shape, device=device),
        torch.randint(0, args.classes, (args.batch,), device=device),
        torch.randn(args.meta_batch, *shape, device=device),
        torch.randint(0, args.classes, (args.meta_batch,), device=device),
    )
    return model, gamma_net, objective, data


def default_setup(device):
    """:func:`build_setup` with scripts/bench_meta_step.py's defaults (small_resnet, 128 + 128 images of 28×28,
    10 classes, SECE)."""
    args = Namespace(model="small_resnet", classes=10, size=28, batch=128, meta_batch=128, objective="sece")
    return build_setup(args, device)


def rss_peaks(names, model, gamma_net, objective, data) -> dict[str, float]:
    """Peak RSS increase of one step per method (Linux: VmHWM reset through /proc/self/clear_refs)."""
    peaks = {}
    for n in names:
        method = Method(n, model, gamma_net, objective, data)
        method.step()
        method.step()
        gc.collect()
        base = reset_rss_peak()
        method.step()
        peaks[n] = rss_mb("VmHWM:") - base
        del method
        gc.collect()
    return peaks


def paired_statistic(times: dict[str, list[float]]):
    """``stat(f)`` = median over rounds r of f({name: times[name][r]}): ratios of methods timed in the same
    round (back to back), so drifts of the machine's speed between rounds cancel."""
    rounds = [{n: t[r] for n, t in times.items()} for r in range(len(next(iter(times.values()))))]
    return lambda f: statistics.median(f(r) for r in rounds)
