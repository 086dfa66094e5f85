"""Cost of one meta step per backend, relative to a plain CE step and a focal step (no meta).

    python scripts/bench_meta_step.py [--reps 15] [--warmup 2] [--batch 128] [--meta-batch 128]
        [--model small_resnet] [--classes 10] [--size 28] [--objective sece] [--threads N]
        [--memory rss|saved] [--json] [--output docs/performance.md | --no-write]

All methods run in ONE process, interleaved: every repetition times one step of each method in a rotated
order, and the median seconds per step is reported (the machine may be shared: ratios measured this way
are what matter). Each method trains its own copy of the same initial model (SGD lr 0.1, momentum 0.9,
wd 5e-4; γ-Net; Adam 1e-3), on the same fixed train and meta-val batches.

Peak memory: on CUDA ``torch.cuda.max_memory_allocated`` during one step. On CPU there is no allocator
statistic, so a child process (same options) measures, per method, the increase of the resident set size
during one step: the RSS high-water mark is reset through /proc/self/clear_refs before the step and read
from VmHWM after it, with ``MALLOC_MMAP_THRESHOLD_=65536`` so that every activation-sized tensor is mmapped
and returned to the OS when freed (RSS then tracks live tensor memory). This counts everything a step
allocates (graphs, gradients, forward-mode tangents, the ``jvp`` backend's kept primal outputs). A second
column gives the peak of bytes held by autograd graphs (tensors saved for backward, once per storage while
alive, via ``torch.autograd.graph.saved_tensors_hooks``) — the part that differs most between backends
(``higher`` keeps the train graph, its second-order backward graph and the meta-val graph alive together).
Without /proc (non-Linux) only the second measure is available and is reported as peak memory.

``hypergrad_rel_diff``: from one identical state, max|g_jvp − g_higher| / max|g_higher| over the γ-Net's
hypergradient. With ``--json`` the last printed line is one JSON object. Unless ``--no-write``, the
table is written to docs/performance.md (numbers only ever come from this script).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from metacal import models, objectives
from metacal.losses import build as build_loss
from metacal.meta import GammaNet, MetaStep

BACKENDS = ("higher", "jvp", "head")
# Reference rows, timed in the same loop but not backends: "floor" = a focal step + the meta-val
# forward/backward w.r.t. the updated parameters (work every exact full-network hypergradient that takes
# the real step once must do, so higher / floor bounds any such backend's speed-up over `higher`);
# "higher_recompute" = higher used as in Bohdal et al.'s code and our first prototype: a lookahead on
# copied weights, then a separate real step (the step computed twice).
REFERENCES = ("floor", "higher_recompute")
TARGETS = "jvp ≤ 3.0× focal, head ≤ 1.4× focal, jvp ≥ 2× faster than higher, jvp peak memory < higher"


class SavedTensorMeter:
    """Live and peak bytes of tensors saved for backward (unique storages), via saved_tensors_hooks."""

    def __init__(self) -> None:
        self.live = 0
        self.peak = 0
        self.refs: dict[int, list[int]] = {}

    def reset(self) -> None:
        self.peak = self.live

    def pack(self, tensor: torch.Tensor):
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        entry = self.refs.get(key)
        if entry is None:
            self.refs[key] = [1, storage.nbytes()]
            self.live += storage.nbytes()
            self.peak = max(self.peak, self.live)
        else:
            entry[0] += 1
        return _Saved(self, key, tensor)

    @staticmethod
    def unpack(saved: "_Saved") -> torch.Tensor:
        return saved.tensor


class _Saved:
    __slots__ = ("meter", "key", "tensor")

    def __init__(self, meter: SavedTensorMeter, key: int, tensor: torch.Tensor) -> None:
        self.meter, self.key, self.tensor = meter, key, tensor

    def __del__(self) -> None:
        entry = self.meter.refs.get(self.key)
        if entry is None:
            return
        entry[0] -= 1
        if entry[0] == 0:
            self.meter.live -= entry[1]
            del self.meter.refs[self.key]


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


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
        if kind in BACKENDS:
            self.meta = MetaStep(self.model, self.opt, objective, gamma_net=self.gamma_net, backend=kind)

        self.objective = objective
        self.meta_opt = torch.optim.Adam(self.gamma_net.parameters(), lr=1e-3)

    def step(self) -> None:
        x, y, xm, ym = self.data
        if self.meta is not None:
            self.meta(x, y, xm, ym)
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
    for backend in BACKENDS:
        m = copy.deepcopy(model)
        g = copy.deepcopy(gamma_net)
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
        MetaStep(m, opt, objective, gamma_net=g, backend=backend)(*data)
        grads[backend] = torch.cat([p.grad.reshape(-1) for p in g.parameters()])
    ref = grads["higher"]
    rel = lambda a: float((a - ref).abs().max() / ref.abs().max())  # noqa: E731
    return rel(grads["jvp"]), rel(grads["head"])


def measure_memory(method: Method, cuda: bool) -> float:
    """Peak MB of one step (see module docstring for what is counted on CPU)."""
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


def _status_mb(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) / 1024
    raise OSError(f"{key} not in /proc/self/status")


def rss_peaks(names, model, gamma_net, objective, data) -> dict[str, float]:
    """Peak RSS increase of one step per method (Linux: VmHWM reset through /proc/self/clear_refs)."""
    peaks = {}
    for n in names:
        method = Method(n, model, gamma_net, objective, data)
        method.step()
        method.step()
        gc.collect()
        Path("/proc/self/clear_refs").write_text("5")  # reset the RSS high-water mark
        base = _status_mb("VmRSS:")
        method.step()
        peaks[n] = _status_mb("VmHWM:") - base
        del method
        gc.collect()
    return peaks


def measure_rss_in_child(argv: list[str]) -> dict[str, float] | None:
    """Run the RSS measurement in a fresh process with a fixed malloc mmap threshold (64 KiB), so every
    activation-sized tensor is mmapped and returned to the OS when freed and RSS tracks live memory."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    cmd = [sys.executable, str(Path(__file__).resolve()), *argv, "--memory-child"]
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, timeout=1800)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, OSError, ValueError, IndexError):
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--meta-batch", type=int, default=128)
    parser.add_argument("--model", default="small_resnet")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--size", type=int, default=28)
    parser.add_argument("--objective", default="sece")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--output", default="docs/performance.md")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--memory", choices=("rss", "saved"), default="rss",
                        help="CPU peak memory: RSS increase in a child process (default) or autograd-saved bytes")
    parser.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.reps < 1 or args.warmup < 0 or min(args.batch, args.meta_batch, args.classes, args.size) < 1:
        print("error: --reps, --batch, --meta-batch, --classes, --size must be positive", file=sys.stderr)
        return 2
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cuda = device.type == "cuda"

    model, gamma_net, objective, data = build_setup(args, device)
    names = ["plain", "focal", *BACKENDS, *REFERENCES]
    if args.memory_child:
        print(json.dumps(rss_peaks(names, model, gamma_net, objective, data)))
        return 0
    methods = {n: Method(n, model, gamma_net, objective, data) for n in names}
    for _ in range(args.warmup):
        for m in methods.values():
            m.step()
    times: dict[str, list[float]] = {n: [] for n in names}
    cpu_times: dict[str, list[float]] = {n: [] for n in names}
    for rep in range(args.reps):
        order = names[rep % len(names):] + names[: rep % len(names)]
        for n in order:
            if cuda:
                torch.cuda.synchronize()
            start, cpu_start = time.perf_counter(), time.process_time()
            methods[n].step()
            if cuda:
                torch.cuda.synchronize()
            times[n].append(time.perf_counter() - start)
            cpu_times[n].append(time.process_time() - cpu_start)
    median = {n: statistics.median(t) for n, t in times.items()}
    cpu_median = {n: statistics.median(t) for n, t in cpu_times.items()}
    saved = {n: measure_memory(methods[n], False) for n in names}
    memory, memory_kind = None, "autograd_saved_tensors"
    if cuda:
        memory, memory_kind = {n: measure_memory(methods[n], True) for n in names}, "cuda_max_memory_allocated"
    elif args.memory == "rss" and Path("/proc/self/clear_refs").exists():
        child_argv = [a for a in (argv if argv is not None else sys.argv[1:]) if a not in ("--json",)]
        memory = measure_rss_in_child(child_argv + ["--no-write"])
        memory_kind = "peak_rss_increase" if memory is not None else memory_kind
    if memory is None:
        memory = saved
    rel_jvp, rel_head = hypergradient_difference(model, gamma_net, objective, data)

    result = {
        "plain_s": median["plain"],
        "focal_s": median["focal"],
        "meta_s": {b: median[b] for b in BACKENDS},
        "ratio_to_focal": {b: median[b] / median["focal"] for b in BACKENDS},
        "cpu_s": cpu_median,
        "cpu_ratio_to_focal": {b: cpu_median[b] / cpu_median["focal"] for b in BACKENDS},
        "higher_over_jvp": median["higher"] / median["jvp"],
        "reference_s": {r: median[r] for r in REFERENCES},
        # the largest speed-up over `higher` that ANY exact backend computing the step once could reach
        "higher_over_floor": median["higher"] / median["floor"],
        "higher_recompute_over_jvp": median["higher_recompute"] / median["jvp"],
        "hypergrad_rel_diff": rel_jvp,
        "head_vs_full_rel_diff": rel_head,
        "peak_mem_mb": {n: memory[n] for n in names},
        "peak_mem_kind": memory_kind,
        "autograd_saved_peak_mb": saved,
        "reps": args.reps,
        "threads": torch.get_num_threads(),
        "device": str(device),
    }
    checks = {
        "jvp ≤ 3.0× focal": result["ratio_to_focal"]["jvp"] <= 3.0,
        "head ≤ 1.4× focal": result["ratio_to_focal"]["head"] <= 1.4,
        "jvp ≥ 2× faster than higher": result["higher_over_jvp"] >= 2.0,
        "jvp peak memory < higher": memory["jvp"] < memory["higher"],
    }
    result["targets_met"] = checks
    table = render_table(result, names, median, cpu_median, memory, saved)
    print(table)
    if not args.no_write:
        write_doc(Path(args.output), table, result, checks, argv, args)
    if args.json:
        print(json.dumps(result))
    return 0


def render_table(result, names, median, cpu_median, memory, saved) -> str:
    mem_label = {
        "cuda_max_memory_allocated": "peak MB (CUDA allocated)",
        "peak_rss_increase": "peak RSS increase MB",
        "autograd_saved_tensors": "peak autograd-saved MB",
    }[result["peak_mem_kind"]]
    label = {"plain": "plain CE step", "focal": "focal step (γ-Net, no meta)",
             "floor": "reference: focal step + meta-val fwd/bwd (floor)",
             "higher_recompute": "reference: `higher` lookahead + separate real step"}
    lines = [
        f"| method | median s/step (wall) | × focal | × plain | median CPU s/step | × focal (CPU) | {mem_label} "
        "| peak autograd-saved MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in names:
        lines.append(
            f"| {label.get(n, f'meta step, `{n}`')} | {median[n]:.4f} | {median[n] / median['focal']:.2f} | "
            f"{median[n] / median['plain']:.2f} | {cpu_median[n]:.4f} | "
            f"{cpu_median[n] / cpu_median['focal']:.2f} | {memory[n]:.1f} | {saved[n]:.1f} |"
        )
    lines.append("")
    lines.append(
        f"`higher` / `jvp` time (wall): {result['higher_over_jvp']:.2f}×; hypergradient relative difference "
        f"jvp vs higher: {result['hypergrad_rel_diff']:.2e} (head vs full network: "
        f"{result['head_vs_full_rel_diff']:.2e}, an approximation by design)."
    )
    lines.append("")
    lines.append(
        f"Bound: `higher` / floor = {result['higher_over_floor']:.2f}× is the most any exact full-network backend "
        f"that takes the real step once could gain over `higher`. Against `higher` used as in the reference "
        f"code (lookahead, then the step again): {result['higher_recompute_over_jvp']:.2f}× slower than `jvp`."
    )
    return "\n".join(lines)


def write_doc(path: Path, table: str, result: dict, checks: dict, argv, args) -> None:
    command = "python scripts/bench_meta_step.py " + " ".join(argv if argv is not None else sys.argv[1:])
    met = "\n".join(f"- {name}: {'met' if ok else 'NOT met'}" for name, ok in checks.items())
    text = f"""# Performance of the meta step

Generated by `scripts/bench_meta_step.py` — do not edit the numbers by hand; regenerate with:

    {command.strip()}

Machine: {cpu_name()}, {result['threads']} torch threads, device {result['device']}, torch {torch.__version__},
Python {platform.python_version()}; {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC.
Setup: `{args.model}` from metacal.models, {args.batch} train + {args.meta_batch} meta-val images of
{args.size}×{args.size}, {args.classes} classes, SGD lr 0.1 / momentum 0.9 / wd 5e-4, γ-Net + focal inner
loss, `{args.objective}` meta objective, Adam 1e-3 on the γ-Net. {result['reps']} interleaved repetitions (rotated order), median per step. The
machine may be shared with other jobs: the ratios, measured side by side, are the meaningful numbers.

{table}

Wall time is the target metric. The CPU column (process CPU time, all threads) is less sensitive to other
jobs on a shared machine; with more than one torch thread it also counts the workers' spin-waiting.

Peak memory ({result['peak_mem_kind']}): on CPU, the increase of the process's resident set size during
one step, measured in a child process with `MALLOC_MMAP_THRESHOLD_=65536` (so freed tensors return to the
OS) and the RSS high-water mark reset via /proc/self/clear_refs — it counts everything the step allocates.
The last column is the peak of bytes held by autograd graphs (tensors saved for backward, once per
storage), tracked with `saved_tensors_hooks`. On CUDA, `torch.cuda.max_memory_allocated` during one step.

Targets ({TARGETS}):
{met}

Why `jvp` costs what it does: the exact hypergradient needs the real step (forward + backward), the
meta-val forward + backward at θ' (w.r.t. parameters only) and one forward-mode JVP of the train batch at
the old θ. The JVP reuses the real forward's convolution/linear outputs as its primal values (two
convolutions per layer instead of three, one for the first layer) and uses a fused train-mode BatchNorm
tangent (`native_batch_norm_backward` — BN's input Jacobian is symmetric — plus a per-channel scale and
shift), so it costs less than the real step; on CPU BatchNorm is memory-bound and about as expensive as
the convolutions. The meta step is therefore a little under three focal steps, close to the floor of this
exact method (two forward+backward passes and a tangent pass). `head` adds only a no-grad meta-val
forward. `higher` additionally builds and traverses the second-order graph of the whole network; its
real step is taken from its fast weights (the step is computed once), which already makes it cheaper
than a lookahead that recomputes the step.

The two reference rows make the "≥ 2× faster than higher" target checkable against what is possible.
The floor row does only what every exact full-network hypergradient needs when the real step is taken
once — the real step and v = ∇θ' J (a meta-val forward and backward) — without any hypergradient; no
such backend can be faster than it. When `higher` / floor is below 2, the target cannot be met by any
exact backend that respects "the real step is not computed twice"; it was set against the reference
code's use of `higher` (second reference row), where the step is computed twice.
"""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


if __name__ == "__main__":
    sys.exit(main())
