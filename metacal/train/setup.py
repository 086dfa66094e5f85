"""Everything a run holds before its first epoch: the accelerator, data, model, loss, optimiser, schedule,
the iteration (plain or meta), the checkpointed state and the TensorBoard writer (:class:`TrainingRun`)."""

from __future__ import annotations

import os
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, set_seed

from metacal.atomic_io import write_text_atomic
from metacal.distributed import sum_over_processes
from metacal.meta import Stepper
from metacal.run.layout import RunPaths
from metacal.run.predictor_info import predictor_info, write_predictor
from metacal.wording import current

from . import components, launch_info, preemption
from .finite_watch import TrainingDivergedError, labels_in_range
from .checkpoint import load_checkpoint, save_checkpoint
from .train_state import TrainState
from .compat import resume_point
from .config import Config, ConfigError, to_yaml
from .cuda_graphs import GraphedSteps, graph_problem, graphed
from .process_settings import configure_process
from .regime import NoiseProbe
from .tb_logging import TBLogger


@dataclass
class RunResult:
    """What :func:`metacal.train.train` returns: metrics.json's content and this process's trained modules."""

    metrics: dict[str, Any]
    model: torch.nn.Module  # unwrapped backbone
    gamma_net: torch.nn.Module | None
    state: TrainState
    run_dir: Path | None = None  # where config.yaml, checkpoints/, metrics.json … are
    stepper: Stepper | None = None  # the iteration (PlainStep, MetaLearner or metacal.meta.auto.AutoScalar), its state


def make_accelerator(cfg: Config) -> Accelerator:
    """Batches are GLOBAL and split across processes; the train sampler is re-seeded per epoch.

    Launched by torchrun on a machine without CUDA, accelerate (1.15) picks gloo/MULTI_CPU only when
    told ``cpu=True`` (otherwise every process silently trains alone), so that case forces it.
    """
    launched = int(os.environ.get("WORLD_SIZE", "1")) > 1
    return Accelerator(
        cpu=cfg.run.cpu or (launched and not torch.cuda.is_available()),
        mixed_precision=cfg.run.mixed_precision,
        # non_blocking: batches in pinned host memory (make_loader pins them on CUDA) overlap their copy
        dataloader_config=DataLoaderConfiguration(split_batches=True, use_seedable_sampler=True,
                                                  data_seed=cfg.run.seed, non_blocking=torch.cuda.is_available()),
        step_scheduler_with_optimizer=False,
    )


def check_finite(accelerator: Accelerator, values: dict[str, torch.Tensor | None], where: str) -> None:
    """Stop on NaN/inf (agreed across processes so that no rank waits for another forever)."""
    bad = [name for name, v in values.items() if v is not None and not bool(torch.isfinite(v).all())]
    if accelerator.num_processes > 1:
        flag = torch.tensor([float(len(bad))], device=accelerator.device)
        sum_over_processes([flag])
        if float(flag) > 0 and not bad:
            bad = ["(on another process)"]
    if bad:
        raise TrainingDivergedError(f"non-finite {', '.join(bad)} at {where}; training stopped")


@dataclass
class TrainingRun:
    """The built components of one run and its checkpointed state."""

    cfg: Config
    paths: RunPaths
    accelerator: Accelerator
    model: torch.nn.Module  # prepared (possibly DDP-wrapped)
    loss_fn: torch.nn.Module
    optimizer: Any
    scheduler: Any  # metacal.train.schedules.LRSchedule: iteration_done() / epoch_done()
    stepper: Stepper
    train_loader: Any
    val_loader: Any
    test_loader: Any
    steps_per_epoch: int
    config_yaml: str
    state: TrainState = field(default_factory=TrainState)
    progress: dict[str, Any] = field(default_factory=dict)  # the epoch's accumulators of a mid-epoch resume
    tb: TBLogger = field(default_factory=lambda: TBLogger(None))
    labels_checked: bool = False  # train / meta-val labels known in range: the steps skip the per-batch check
    graphs: GraphedSteps | None = None  # with run.cuda_graphs: what replays the iterations (inside ``stepper``)
    bundle: Any = None  # the data bundle: its test truth (noisy labels, posteriors) and regime records
    noise_probe: NoiseProbe | None = None  # with noisy training labels: flipped-vs-clean separation (regime.py)

    def save(self, where: str, epoch_progress: dict[str, Any], best: bool = False):
        """A checkpoint of the current state (None with run.save_checkpoints=false), never of non-finite weights."""
        if not self.cfg.run.save_checkpoints:
            return None
        modules = [self.model, self.stepper.per_sample_gamma(), self.loss_fn]
        finite = all(bool(torch.isfinite(p).all()) for m in modules if m is not None for p in m.parameters())
        check_finite(self.accelerator, {"weights": torch.tensor(0.0 if finite else float("nan"))}, where)
        return save_checkpoint(self.accelerator, self.paths.checkpoints, self.state, epoch_progress,
                               self.config_yaml, best)

    def preempted(self, where: str, saved) -> preemption.Preempted:
        """The stop after a signal, with the one line that says how to continue."""
        signum = preemption.requested_signal()
        what = f"checkpoint saved: {saved}" if saved is not None else "no checkpoint (run.save_checkpoints=false)"
        return preemption.Preempted(f"stopped by {preemption.signal_name(signum)} after {where}; {what}; "
                                    f"continue with {current().args(run_dir=self.paths.root, resume=True)}", signum)


def setup(cfg: Config, paths: RunPaths, resume: bool, accelerator: Accelerator,
          before_first_write: Callable[[], None] | None, bundle: Any = None,
          model: torch.nn.Module | None = None) -> TrainingRun:
    """Build every component (a config error raises before anything is written), load the checkpoint when
    resuming, then write the resolved config.yaml (and predictor.json: what inference needs,
    metacal/run/predictor_info.py) and open TensorBoard on the main process.

    ``bundle`` / ``model``: data and network built by the caller (:func:`metacal.fit`) instead of from
    ``cfg.data`` / ``cfg.model.name``; ``model.checkpoint`` and ``model.freeze`` still apply to the model."""
    set_seed(cfg.run.seed)
    launch = launch_info.start(accelerator)  # processes, device, backend: said before anything is built
    configure_process(cfg.run, accelerator.device)
    resume_from = resume_point(paths, cfg) if resume else None
    parts = components.build_parts(cfg, accelerator, bundle, model, load_checkpoint=resume_from is None)
    model, scheduler, stepper, loss_fn = parts.model, parts.scheduler, parts.stepper, parts.loss_fn
    run = TrainingRun(cfg, paths, accelerator, model, loss_fn, parts.optimizer, scheduler, stepper, *parts.loaders,
              steps_per_epoch=parts.steps_per_epoch, config_yaml=to_yaml(cfg),
              labels_checked=labels_in_range(parts.bundle), bundle=parts.bundle)
    if NoiseProbe.wanted(parts.bundle):  # the train split in order, for the probe at each selected epoch
        loader = components.make_loader_of(cfg, parts.bundle.train)
        run.noise_probe = NoiseProbe.of(parts.bundle, accelerator.prepare(loader))
    if cfg.run.cuda_graphs:
        problem = graph_problem(cfg, accelerator.device, accelerator.num_processes, accelerator.unwrap_model(model),
                                loss_fn, run.labels_checked)
        if problem is not None:
            raise ConfigError(problem)

    accelerator.register_for_checkpointing(scheduler, run.state)
    if len(loss_fn.state_dict()) > 0:
        accelerator.register_for_checkpointing(loss_fn)
    for obj in stepper.checkpointables():
        accelerator.register_for_checkpointing(obj)
    if resume_from is not None:
        run.progress = load_checkpoint(accelerator, resume_from, accelerator.unwrap_model(model))
        s = run.state
        where = f"epoch {s.epoch + 1}, step {s.step_in_epoch}" if s.step_in_epoch else f"epoch {s.epoch}"
        accelerator.print(f"resumed from {resume_from} after {where} (global step {s.global_step})")
    if cfg.run.cuda_graphs:  # after the checkpoint: a graph holds the optimiser state tensors it was captured with
        run.stepper, run.graphs = graphed(stepper, loss_fn, accelerator.device)

    if accelerator.is_main_process:  # after every component was built: a config error leaves the run directory as it was
        if before_first_write is not None:
            before_first_write()
        write_text_atomic(paths.config, run.config_yaml)
        if not cfg.model.name.startswith(components.PYTHON):  # metacal.load rebuilds the network from it
            write_predictor(paths.root, predictor_info(cfg, parts.bundle))
        launch_info.record(paths.runtime, launch, resumed=resume_from is not None)
        if cfg.logging.tensorboard:
            run.tb = TBLogger(paths.tensorboard)
    return run
