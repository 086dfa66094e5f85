"""The training loop, top to bottom: setup → (train epoch → evaluate → select → checkpoint)* → finish.

One iteration is either a plain step (``loss.prepare_batch`` → forward → ``loss`` → backward → SGD) or
one meta step (seed 003 Alg. 1: real SGD step of the backbone with the inner loss at per-sample γ from
the γ-Net — or with learnable-L2 CE —, then the hypergradient update of the meta-parameters on a
meta-validation batch; see :mod:`metacal.train.meta_setup`). The lr follows MultiStepLR per epoch.
After each epoch: val and test predictions are gathered, ``loss.update_from_validation`` sees the val
logits, the best epoch by validation ``eval.select_by`` keeps its predictions, and the state is saved.

Robustness (see :mod:`metacal.train.checkpoint` for the on-disk scheme):

* checkpoints at every epoch end and, with ``run.checkpoint_every_steps: N``, every N global steps;
  a resume mid-epoch skips the batches already done (``accelerator.skip_first_batches``) and restores
  the epoch's accumulators (loss sums, γ of every sample so far), so the epoch's numbers, the final
  metrics and the weights equal those of an uninterrupted run;
* SIGTERM (with :func:`metacal.train.preemption.handle_sigterm` installed) → a checkpoint at the next
  step boundary, then :class:`~metacal.train.preemption.Preempted`;
* a non-finite loss / meta objective / γ, or non-finite weights at a checkpoint, raises
  :class:`TrainingDivergedError` naming the step; nothing is saved after a non-finite value.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, set_seed
from tqdm.auto import tqdm

from . import components, preemption
from .atomic_io import write_text_atomic
from .checkpoint import EpochProgress, TrainState, load_checkpoint, save_checkpoint
from .compat import resume_point
from .config import Config, ConfigError, to_yaml
from .evaluation import predict, selection_score, summarize
from .outputs import epoch_line, finalize, reliability_figure
from .run_dir import RunPaths
from .runtime import configure_process
from .tb_logging import TBLogger


class TrainingDivergedError(RuntimeError):
    """A non-finite loss, meta objective or γ: the run stops, the last good checkpoint stays."""


@dataclass
class RunResult:
    """What :func:`train` returns: metrics.json's content and this process's trained modules."""

    metrics: dict[str, Any]
    model: torch.nn.Module  # unwrapped backbone
    gamma_net: torch.nn.Module | None
    state: TrainState


def make_accelerator(cfg: Config) -> Accelerator:
    """Batches are GLOBAL and split across processes; the train sampler is re-seeded per epoch.

    Launched by torchrun on a machine without CUDA, accelerate (1.15) picks gloo/MULTI_CPU only when
    told ``cpu=True`` (otherwise every process silently trains alone), so that case forces it.
    """
    launched = int(os.environ.get("WORLD_SIZE", "1")) > 1
    return Accelerator(
        cpu=cfg.run.cpu or (launched and not torch.cuda.is_available()),
        mixed_precision=cfg.run.mixed_precision,
        dataloader_config=DataLoaderConfiguration(split_batches=True, use_seedable_sampler=True,
                                                  data_seed=cfg.run.seed),
        step_scheduler_with_optimizer=False,
    )


def check_finite(accelerator: Accelerator, values: dict[str, torch.Tensor], where: str) -> None:
    """Stop on NaN/inf (agreed across processes so that no rank waits for another forever)."""
    bad = [name for name, v in values.items() if v is not None and not bool(torch.isfinite(v).all())]
    if accelerator.num_processes > 1:
        flag = torch.tensor([float(len(bad))], device=accelerator.device)
        if float(accelerator.reduce(flag, "sum")) > 0 and not bad:
            bad = ["(on another process)"]
    if bad:
        raise TrainingDivergedError(f"non-finite {', '.join(bad)} at {where}; training stopped")


def _all_finite(modules: list[torch.nn.Module | None]) -> torch.Tensor:
    ok = all(bool(torch.isfinite(p).all()) for m in modules if m is not None for p in m.parameters())
    return torch.tensor(0.0 if ok else float("nan"))


def train(cfg: Config, paths: RunPaths, resume: bool = False, accelerator: Accelerator | None = None,
          before_first_write: Callable[[], None] | None = None) -> RunResult:
    """Train per ``cfg`` into ``paths`` (resuming from its latest checkpoint if ``resume``).

    ``before_first_write`` runs on the main process after every component was built and the checkpoint
    (if any) loaded, before anything is written (the CLI clears an ``--overwrite`` directory there, so a
    bad config never costs earlier results). The caller ends the Accelerator."""
    # ---- setup -----------------------------------------------------------------------------------
    accelerator = accelerator or make_accelerator(cfg)
    main = accelerator.is_main_process
    set_seed(cfg.run.seed)
    configure_process(cfg.run, accelerator.device)

    n = accelerator.num_processes
    if cfg.data.batch_size % n or cfg.data.eval_batch_size % n or (cfg.meta.enabled and cfg.meta.batch_size % n):
        raise ConfigError(f"data.batch_size ({cfg.data.batch_size}), data.eval_batch_size "
                          f"({cfg.data.eval_batch_size}) and meta.batch_size ({cfg.meta.batch_size}) are global "
                          f"batches and must be divisible by the number of processes ({n})")
    resume_from = resume_point(paths, cfg) if resume else None
    bundle = components.build_data(cfg)
    model = components.build_model(cfg, bundle)
    loss_fn = components.build_loss(cfg, model, bundle.num_classes).to(accelerator.device)
    optimizer = components.build_optimizer(cfg, model)
    scheduler = components.build_scheduler(cfg, optimizer)
    train_loader, val_loader, test_loader = components.make_loaders(cfg, bundle)
    model, optimizer, train_loader, val_loader, test_loader = accelerator.prepare(
        model, optimizer, train_loader, val_loader, test_loader)

    meta = None
    if cfg.meta.enabled:
        from .meta_setup import MetaSetup

        meta = MetaSetup(cfg, accelerator, model, loss_fn, optimizer, bundle)
    gamma_net = meta.gamma_net if meta is not None else None

    state = TrainState()
    accelerator.register_for_checkpointing(scheduler, state)
    if len(loss_fn.state_dict()) > 0:
        accelerator.register_for_checkpointing(loss_fn)
    if meta is not None:
        for obj in meta.checkpointables():
            accelerator.register_for_checkpointing(obj)
    progress: dict[str, Any] = {}
    if resume_from is not None:
        progress = load_checkpoint(accelerator, resume_from, accelerator.unwrap_model(model))
        where = (f"epoch {state.epoch + 1}, step {state.step_in_epoch}" if state.step_in_epoch
                 else f"epoch {state.epoch}")
        accelerator.print(f"resumed from {resume_from} after {where} (global step {state.global_step})")

    config_yaml = to_yaml(cfg)
    if main:  # after every component was built: a config error leaves the run directory as it was
        if before_first_write is not None:
            before_first_write()
        write_text_atomic(paths.config, config_yaml)

    tb = TBLogger(paths.tensorboard if (main and cfg.logging.tensorboard) else None)
    steps_per_epoch = len(train_loader)
    if cfg.run.max_steps_per_epoch is not None:
        steps_per_epoch = min(steps_per_epoch, cfg.run.max_steps_per_epoch)
    every = cfg.run.checkpoint_every_steps

    def save(where: str, epoch_progress: dict[str, Any], best: bool = False):
        """A checkpoint of the current state, never of non-finite weights."""
        check_finite(accelerator, {"weights": _all_finite([model, gamma_net, loss_fn])}, where)
        return save_checkpoint(accelerator, paths.checkpoints, state, epoch_progress, config_yaml, best)

    def preempted(where: str, saved) -> preemption.Preempted:
        what = f"checkpoint saved: {saved}" if saved is not None else "no checkpoint (run.save_checkpoints=false)"
        return preemption.Preempted(f"stopped by SIGTERM after {where}; {what}; continue with --resume")

    # ---- epochs ----------------------------------------------------------------------------------
    for epoch in range(state.epoch, cfg.schedule.epochs):
        skip = state.step_in_epoch if epoch == state.epoch else 0
        acc = EpochProgress.from_dict(progress) if skip and progress else EpochProgress()
        t0 = time.time() - acc.elapsed
        model.train()
        loss_fn.train()
        loss_fn.set_epoch(epoch)
        train_loader.set_epoch(epoch)
        batches = train_loader
        if skip >= steps_per_epoch:
            batches = []
        elif skip > 0:  # resumed mid-epoch: the same epoch permutation, without the batches already done
            batches = accelerator.skip_first_batches(train_loader, skip)
            batches.set_epoch(epoch)
        lr = optimizer.param_groups[0]["lr"]
        show_bar = main and cfg.logging.progress_bar and sys.stderr.isatty()
        bar = tqdm(total=steps_per_epoch, initial=skip, desc=f"epoch {epoch + 1}/{cfg.schedule.epochs}",
                   disable=not show_bar, leave=False, dynamic_ncols=True)
        for step, (inputs, targets) in enumerate(batches, start=skip):
            if step >= steps_per_epoch:
                break
            where = f"epoch {epoch + 1}, step {step + 1} (global step {state.global_step + 1})"
            out = _train_step(accelerator, model, loss_fn, optimizer, meta, inputs, targets, where)
            if meta is not None:
                if out["meta_objective"] is not None:
                    acc.meta_sum, acc.meta_count = acc.meta_sum + float(out["meta_objective"]), acc.meta_count + 1
                if out.get("gamma") is not None:
                    acc.gammas.append(out["gamma"].detach().float().cpu().reshape(-1))
            acc.loss_sum += float(out["loss"])
            acc.count += 1
            state.global_step += 1
            state.step_in_epoch = step + 1
            bar.update(1)
            bar.set_postfix(loss=f"{acc.loss_sum / acc.count:.4f}")
            preemption.after_step(state.global_step)
            stop = preemption.stop_requested(accelerator)
            periodic = every > 0 and state.global_step % every == 0 and step + 1 < steps_per_epoch
            saved = None
            if cfg.run.save_checkpoints and (stop or periodic):
                saved = save(where, acc.to_dict(time.time() - t0))
            if stop:
                bar.close()
                raise preempted(where, saved)
        bar.close()
        with warnings.catch_warnings():  # the higher backend updates θ without calling optimizer.step()
            warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step", category=UserWarning)
            scheduler.step()

        # ---- evaluate, select, log, checkpoint ---------------------------------------------------
        val = predict(model, val_loader, accelerator, gamma_net)
        loss_fn.update_from_validation(val.logits.to(accelerator.device), val.labels.to(accelerator.device))
        # per epoch without the O(N²) binning-free estimators; finalize adds them for the selected epoch
        val_m = summarize(val, cfg.eval.num_bins, binning_free=False)
        score = selection_score(val_m, cfg.eval.select_by)
        improved = score < state.best_score
        test, test_m = None, None
        if cfg.eval.test_every_epoch or improved:
            test = predict(model, test_loader, accelerator, gamma_net)
            test_m = summarize(test, cfg.eval.num_bins, binning_free=False)
        train_m = {"loss": _mean_over_processes(accelerator, acc.loss_sum / max(acc.count, 1)), "lr": lr}
        if meta is not None:
            train_m["meta_objective"] = _mean_over_processes(accelerator, acc.meta_sum / max(acc.meta_count, 1))
        epoch_gamma = _gather_gamma(accelerator, acc.gammas)  # γ of every training sample of the epoch
        if epoch_gamma is not None:
            train_m.update(gamma_mean=float(epoch_gamma.mean()), gamma_std=float(epoch_gamma.std(unbiased=False)))
        if improved:
            state.best_score, state.best_epoch = score, epoch + 1
            state.best_metrics = {"val": val_m, "test": test_m}
            if main:
                val.save(paths.predictions / "val.npz")
                test.save(paths.predictions / "test.npz")
        state.history.append({"epoch": epoch + 1, "time_s": time.time() - t0, "lr": lr,
                              "train": train_m, "val": val_m, "test": test_m})
        state.epoch, state.step_in_epoch = epoch + 1, 0

        tb.scalars("train", train_m, epoch + 1)
        if epoch_gamma is not None:
            tb.histogram("train/gamma_hist", epoch_gamma, epoch + 1)
        tb.scalars("val", val_m, epoch + 1)
        if test_m is not None:
            tb.scalars("test", test_m, epoch + 1)
            every_fig = cfg.logging.reliability_every
            if main and tb.writer is not None and every_fig > 0 and (epoch + 1) % every_fig == 0:
                tb.figure("test/reliability", reliability_figure(test, cfg.eval.num_bins, epoch + 1), epoch + 1)
        tb.flush()
        accelerator.print(epoch_line(epoch + 1, cfg.schedule.epochs, train_m, val_m, test_m, improved,
                                     time.time() - t0))
        saved = None
        if cfg.run.save_checkpoints:
            saved = save(f"the end of epoch {epoch + 1}", {}, best=improved)
        if preemption.stop_requested(accelerator):
            tb.close()
            raise preempted(f"epoch {epoch + 1}", saved)

    # ---- finish: metrics.json of the selected epoch, reliability diagram, hparams ---------------
    metrics_json = finalize(cfg, paths, state, accelerator, tb)
    tb.close()
    accelerator.wait_for_everyone()
    return RunResult(metrics_json, accelerator.unwrap_model(model), gamma_net, state)


def _train_step(accelerator: Accelerator, model, loss_fn, optimizer, meta, inputs: torch.Tensor,
                targets: torch.Tensor, where: str) -> dict[str, Any]:
    """One plain or meta iteration; raises TrainingDivergedError before a non-finite loss is used."""
    if meta is None:
        inputs, extra = loss_fn.prepare_batch(inputs, targets)
        if hasattr(loss_fn, "penalty"):  # ce_learnable_l2 without meta-learning: fixed coefficients
            head = accelerator.unwrap_model(model).classifier
            extra.update(head_weight=head.weight, head_bias=head.bias)
        loss = loss_fn(model(inputs), targets, **extra)
        check_finite(accelerator, {"loss": loss.detach()}, where)
        optimizer.zero_grad(set_to_none=True)
        accelerator.backward(loss)
        optimizer.step()
        return {"loss": loss.detach()}
    out = meta.step(inputs, targets)
    check_finite(accelerator, {k: out.get(k) for k in ("loss", "meta_objective", "gamma")}, where)
    return out


def _mean_over_processes(accelerator: Accelerator, value: float) -> float:
    if accelerator.num_processes == 1:
        return value
    return float(accelerator.reduce(torch.tensor([value], device=accelerator.device), reduction="mean"))


def _gather_gamma(accelerator: Accelerator, gammas: list[torch.Tensor]) -> torch.Tensor | None:
    """The epoch's per-sample γ from every process (equal counts per rank: split, even batches)."""
    if not gammas:
        return None
    local = torch.cat(gammas)
    if accelerator.num_processes == 1:
        return local
    return accelerator.gather(local.to(accelerator.device)).cpu()
