"""Training iterations replayed from CUDA graphs (``run.cuda_graphs: true``).

A small network's step at a modest batch is launch-bound on a GPU: the small ResNet's Fashion-MNIST step took
5.0 ms eagerly and 0.9 ms replayed from a CUDA graph on an H100, the ``jvp`` meta step 23.7 ms and 3.1 ms on an
H200 (docs/performance_gpu.md). A graph records the kernels of one iteration once and replays them with one launch
(PyTorch's whole-network capture, https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs).

A replay runs no Python: every Python number the captured iteration used is baked in, and its Python side
effects happened once, at capture. So :class:`GraphedSteps`

* copies each batch into static input tensors (the meta-validation batch too) and replays;
* keys each graph by what is baked in: plain or meta iteration, train or eval mode, the batch shapes and
  dtypes, every optimiser group's numbers (lr, momentum, …) and the Python numbers of the loss and its
  submodules (the automatic γ's value, an epoch counter); a new key runs eagerly ``warmup`` times (lazy state
  such as momentum buffers is made there, on a side stream as the recipe asks), then is captured;
* drops its graphs when an epoch starts (:meth:`GraphedSteps.new_epoch`): tensors a loss replaces between
  epochs (AdaFocal's validation update) then never meet a graph that holds the old ones;
* advances the meta learner's iteration count on each replay, and clones the outputs (the next replay
  overwrites the graph's own).

A batch of another shape (the last, partial one) runs eagerly. Eager iterations and replays update the same
weights, optimiser state and BatchNorm statistics in place, so they mix freely. The γ-Net's Adam becomes
capturable (its step count on the device): its bias correction is then computed in float32 on the device, not
in Python floats, a difference in the last bits of the meta update.

What cannot be captured is refused before the run starts (:func:`graph_problem`). The tests check the whole
scheme on CPU with an emulated graph (tests/train/graph_emulator.py); ``scripts/gpu_check.py`` checks on a GPU
that replayed training ends where eager training does.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Hashable, Iterator, Mapping

import torch
from torch import nn

from metacal.meta import MetaLearner, PlainStep, StepResult, Stepper, learner_spec
from metacal.meta.learners import settings_fact

#: eager iterations of a new key before it is captured
WARMUP = 3
_NUMBERS = (bool, int, float, str, type(None))


def capture_for(device: torch.device) -> Callable[[Callable[[], Any]], tuple[Any, Any]] | None:
    """How iterations on ``device`` are captured: :func:`cuda_capture` on CUDA; None where no graphs exist."""
    return cuda_capture if device.type == "cuda" else None


def graph_problem(cfg: Any, device: torch.device, processes: int, model: nn.Module, loss: nn.Module,
                  labels_checked: bool) -> str | None:
    """Why this run's iterations cannot be replayed from graphs (one line), or None."""
    if capture_for(device) is None:
        return f"run.cuda_graphs needs a CUDA device; this run is on {device.type}"
    if processes > 1:
        return (f"run.cuda_graphs runs in one process (this run has {processes}): the gradient all-reduce is not "
                "captured")
    if cfg.run.mixed_precision != "no":
        return "run.cuda_graphs needs run.mixed_precision=no (autocast's cache of cast weights is not graph-safe)"
    if cfg.schedule.name == "cosine":
        return ("run.cuda_graphs needs an lr that stays put for many iterations (schedule.name step or constant): "
                "a graph bakes the lr in, and the cosine schedule changes it every iteration")
    if getattr(loss, "draws_on_host", False):
        return f"run.cuda_graphs cannot replay loss {cfg.loss.name}: it draws random numbers on the host per batch"
    if not labels_checked:
        return ("run.cuda_graphs needs every train and meta-val label known in [0, K) before training (the "
                "per-batch range check reads the labels to the host); this data does not list its targets")
    if cfg.learner is not None:
        spec = learner_spec(cfg.learner)
        if not spec.capturable:
            return f"run.cuda_graphs does not replay the steps of learner {cfg.learner} (its spec is not capturable)"
        problem = settings_fact(getattr(cfg, spec.section), "graph_problem")
        return problem(model) if problem is not None else None
    return None


def cuda_capture(fn: Callable[[], Any]) -> tuple[Any, Any]:
    """``fn()`` captured into a CUDA graph and replayed once (capture only records): the graph and ``fn``'s
    result, whose tensors every later replay overwrites. Only this thread's CUDA calls are checked while capturing
    (``thread_local``): a loader's pin-memory thread may allocate meanwhile."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        result = fn()
    graph.replay()
    return graph, result


def baked_numbers(obj: Any) -> tuple:
    """The Python numbers (and strings) among ``obj``'s attributes: what a captured iteration bakes in."""
    out = []
    for name, value in sorted(vars(obj).items()):
        if isinstance(value, _NUMBERS):
            out.append((name, value))
        elif isinstance(value, (tuple, list)) and all(isinstance(v, _NUMBERS) for v in value):
            out.append((name, tuple(value)))
    return tuple(out)


def group_numbers(optimizer: Any) -> tuple:
    """Every parameter group's numbers (lr, momentum, betas, …) of a torch optimiser."""
    return tuple(tuple((k, tuple(v) if isinstance(v, (tuple, list)) and k != "params" else v)
                       for k, v in sorted(group.items()) if k != "params") for group in optimizer.param_groups)


def make_capturable(optimizer: torch.optim.Optimizer) -> None:
    """Adam-family optimisers keep their step count on the parameters' device (``capturable``), so that their
    step can be captured; a count already on the CPU (a resumed run) moves there."""
    for group in optimizer.param_groups:
        if "capturable" not in group:
            continue
        group["capturable"] = True
        for p in group["params"]:
            state = optimizer.state.get(p, {})
            if torch.is_tensor(state.get("step")) and state["step"].device != p.device:
                state["step"] = state["step"].to(p.device, torch.float32)


class _Captured:
    """One graph: its static inputs and the result of the captured call."""

    def __init__(self, graph: Any, inputs: list[torch.Tensor], result: StepResult) -> None:
        self.graph, self.inputs, self.result = graph, inputs, result


class GraphedSteps:
    """A :class:`~metacal.meta.PlainStep` or :class:`~metacal.meta.MetaLearner` whose iterations replay CUDA
    graphs (module docstring); every other part of the :class:`~metacal.meta.Stepper` is the wrapped one's.

    ``loss``: the module whose Python numbers key the graphs; ``capture``: :func:`cuda_capture` (the tests give
    an emulation). ``replays`` / ``eager`` count the epoch's iterations of each kind (a capture is a replay)."""

    def __init__(self, stepper: PlainStep | MetaLearner, loss: nn.Module,
                 capture: Callable[[Callable[[], Any]], tuple[Any, Any]], warmup: int = WARMUP) -> None:
        if not isinstance(stepper, (PlainStep, MetaLearner)):
            raise TypeError(f"graphed iterations need a PlainStep or a MetaLearner, got {type(stepper).__name__}")
        self.stepper, self.loss, self.capture, self.warmup = stepper, loss, capture, warmup
        self.meta = stepper if isinstance(stepper, MetaLearner) else None
        self.model = stepper.ctx.model if self.meta is not None else stepper.model
        self.optimizers = ([stepper.ctx.sgd, stepper.meta_optimizer] if self.meta is not None
                           else [_torch_optimizer(stepper.optimizer)])
        if self.meta is not None:
            make_capturable(self.meta.meta_optimizer)
        self.graphs: dict[Hashable, _Captured] = {}
        self.eager_runs: dict[Hashable, int] = {}
        self.replays = self.eager = 0

    def new_epoch(self) -> None:
        """Forget every graph (captured again after ``warmup`` eager iterations of the epoch); zero the counts."""
        self.graphs.clear()
        self.eager_runs.clear()
        self.replays = self.eager = 0

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> StepResult:
        batch = [inputs, targets]
        is_meta = self.meta is not None and self.meta.iteration % self.meta.every == 0
        if is_meta:
            if self.meta.meta_val is None:
                raise ValueError("a meta step needs the meta-validation batch: give the MetaLearner meta_val=")
            batch += [t.to(inputs.device) for t in next(self.meta.meta_val)]
        key = (is_meta, torch.is_grad_enabled(), self.model.training,
               tuple((tuple(t.shape), t.dtype, t.device, t.stride()) for t in batch),
               tuple(group_numbers(o) for o in self.optimizers),
               tuple(baked_numbers(m) for m in self.loss.modules()))
        captured = self.graphs.get(key)
        if captured is not None:
            torch._foreach_copy_(captured.inputs, batch)
            captured.graph.replay()
            if self.meta is not None:
                self.meta.iteration += 1  # what the captured Python did once
            self.replays += 1
            return _cloned(captured.result)
        runs = self.eager_runs.get(key, 0)
        if runs < self.warmup:
            self.eager_runs[key] = runs + 1
            self.eager += 1
            with _side_stream(inputs.device):
                return self._call(batch)
        static = [t.clone() for t in batch]
        graph, result = self.capture(lambda: self._call(static))
        self.graphs[key] = _Captured(graph, static, result)
        self.replays += 1
        return _cloned(result)

    def _call(self, batch: list[torch.Tensor]) -> StepResult:
        if self.meta is not None and len(batch) == 4:
            return self.meta.step(batch[0], batch[1], (batch[2], batch[3]))
        return self.stepper.step(batch[0], batch[1])

    # the rest of the Stepper is the wrapped one's
    def epoch_metrics(self, diagnostics: Mapping[str, torch.Tensor] | None = None) -> dict[str, float]:
        return self.stepper.epoch_metrics(diagnostics)

    def checkpointables(self) -> list[Any]:
        return self.stepper.checkpointables()

    def per_sample_gamma(self) -> nn.Module | None:
        return self.stepper.per_sample_gamma()

    def set_read_check(self, check: Callable[[], None]) -> None:
        self.stepper.set_read_check(check)

    def summary(self, history: list[dict[str, Any]], selected_epoch: int) -> dict[str, Any]:
        return self.stepper.summary(history, selected_epoch)


def _torch_optimizer(optimizer: Any) -> Any:
    """The torch optimiser inside accelerate's wrapper (its param groups hold the numbers)."""
    return getattr(optimizer, "optimizer", optimizer)


def _cloned(result: StepResult) -> StepResult:
    """``result`` with its tensors copied out of the graph's memory."""
    def c(value: Any) -> Any:
        return value.clone() if torch.is_tensor(value) else value

    return StepResult(c(result.loss), c(result.meta_objective), c(result.gamma), c(result.gamma_grad),
                      c(result.meta_grad_norm), c(result.level_grad), result.control,
                      {name: c(v) for name, v in result.diagnostics.items()})


@contextmanager
def _side_stream(device: torch.device) -> Iterator[None]:
    """On CUDA, the block runs on a side stream that waits for, and is waited for by, the current one (the
    warm-up iterations of the capture recipe); elsewhere, nothing."""
    if device.type != "cuda":
        yield
        return
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    try:
        with torch.cuda.stream(side):
            yield
    finally:  # the current stream waits for the side one even when the block raises
        torch.cuda.current_stream().wait_stream(side)


def graphed(stepper: Stepper, loss: nn.Module, device: torch.device) -> tuple[Stepper, GraphedSteps]:
    """``stepper`` with graphed iterations on ``device``, and the :class:`GraphedSteps` that replays them: a
    PlainStep or a MetaLearner is wrapped; the automatic scalar's plain iterations are (its updates stay eager)."""
    capture = capture_for(device)
    if capture is None:
        raise ValueError(f"no CUDA graphs on {device.type}")
    plain = getattr(stepper, "plain", None)
    if isinstance(plain, PlainStep):  # metacal.meta.auto.AutoScalar
        stepper.plain = GraphedSteps(plain, loss, capture)  # type: ignore[attr-defined]
        return stepper, stepper.plain  # type: ignore[attr-defined]
    steps = GraphedSteps(stepper, loss, capture)  # type: ignore[arg-type]
    return steps, steps
