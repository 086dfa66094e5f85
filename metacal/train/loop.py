"""The training loop, top to bottom: setup → (train epoch → evaluate → select → checkpoint)* → finish.

One iteration is either a plain step (``loss.prepare_batch`` → forward → ``loss`` → backward → SGD) or
one meta step (seed 003 Alg. 1: real SGD step of the backbone with the inner loss at per-sample γ from
the γ-Net — or with learnable-L2 CE —, then the hypergradient update of the meta-parameters on a
meta-validation batch; see :mod:`metacal.train.meta_setup`). The lr follows MultiStepLR per epoch.
After each epoch: val and test predictions are gathered, ``loss.update_from_validation`` sees the val
logits, the best epoch by validation ``eval.select_by`` keeps its predictions, and the state is saved.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, set_seed
from tqdm.auto import tqdm

from . import components
from .checkpoint import TrainState, load_checkpoint, save_checkpoint
from .config import Config, ConfigError, flatten, to_dict, to_yaml
from .evaluation import Predictions, after_temperature_scaling, predict, selection_score, summarize
from .run_dir import RunPaths
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


def train(cfg: Config, paths: RunPaths, resume: bool = False, accelerator: Accelerator | None = None) -> RunResult:
    """Train per ``cfg`` into ``paths`` (resuming from its latest checkpoint if ``resume``).

    The caller ends the Accelerator (``end_training`` destroys the process group)."""
    # ---- setup -----------------------------------------------------------------------------------
    accelerator = accelerator or make_accelerator(cfg)
    main = accelerator.is_main_process
    set_seed(cfg.run.seed)
    if cfg.run.torch_threads is not None:
        torch.set_num_threads(cfg.run.torch_threads)
    if cfg.run.deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)

    n = accelerator.num_processes
    if cfg.data.batch_size % n or cfg.data.eval_batch_size % n or (cfg.meta.enabled and cfg.meta.batch_size % n):
        raise ConfigError(f"data.batch_size ({cfg.data.batch_size}), data.eval_batch_size "
                          f"({cfg.data.eval_batch_size}) and meta.batch_size ({cfg.meta.batch_size}) are global "
                          f"batches and must be divisible by the number of processes ({n})")
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

    if main:  # after every component was built: a config error leaves the run directory empty
        paths.config.write_text(to_yaml(cfg))

    state = TrainState()
    accelerator.register_for_checkpointing(scheduler, state)
    if len(loss_fn.state_dict()) > 0:
        accelerator.register_for_checkpointing(loss_fn)
    if meta is not None:
        for obj in meta.checkpointables():
            accelerator.register_for_checkpointing(obj)
    if resume:
        load_checkpoint(accelerator, paths.latest)
        accelerator.print(f"resumed from {paths.latest} after epoch {state.epoch}")

    tb = TBLogger(paths.tensorboard if (main and cfg.logging.tensorboard) else None)
    steps_per_epoch = len(train_loader)
    if cfg.run.max_steps_per_epoch is not None:
        steps_per_epoch = min(steps_per_epoch, cfg.run.max_steps_per_epoch)

    # ---- epochs ----------------------------------------------------------------------------------
    for epoch in range(state.epoch, cfg.schedule.epochs):
        t0 = time.time()
        model.train()
        loss_fn.train()
        loss_fn.set_epoch(epoch)
        train_loader.set_epoch(epoch)
        lr = optimizer.param_groups[0]["lr"]
        loss_sum, meta_sum, count, meta_count = 0.0, 0.0, 0, 0
        gammas: list[torch.Tensor] = []
        show_bar = main and cfg.logging.progress_bar and sys.stderr.isatty()
        bar = tqdm(total=steps_per_epoch, desc=f"epoch {epoch + 1}/{cfg.schedule.epochs}", disable=not show_bar,
                   leave=False, dynamic_ncols=True)
        for step, (inputs, targets) in enumerate(train_loader):
            if step >= steps_per_epoch:
                break
            where = f"epoch {epoch + 1}, step {step + 1} (global step {state.global_step + 1})"
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
                out = {"loss": loss.detach()}
            else:
                out = meta.step(inputs, targets)
                check_finite(accelerator, {k: out.get(k) for k in ("loss", "meta_objective", "gamma")}, where)
                if out["meta_objective"] is not None:
                    meta_sum, meta_count = meta_sum + float(out["meta_objective"]), meta_count + 1
                if out.get("gamma") is not None:
                    gammas.append(out["gamma"].detach().float().cpu().reshape(-1))
            loss_sum += float(out["loss"])
            count += 1
            state.global_step += 1
            bar.update(1)
            bar.set_postfix(loss=f"{loss_sum / count:.4f}")
        bar.close()
        with warnings.catch_warnings():  # the higher backend updates θ without calling optimizer.step()
            warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step", category=UserWarning)
            scheduler.step()

        # ---- evaluate, select, log, checkpoint ---------------------------------------------------
        val = predict(model, val_loader, accelerator, gamma_net)
        loss_fn.update_from_validation(val.logits.to(accelerator.device), val.labels.to(accelerator.device))
        val_m = summarize(val, cfg.eval.num_bins)
        score = selection_score(val_m, cfg.eval.select_by)
        improved = score < state.best_score
        test, test_m = None, None
        if cfg.eval.test_every_epoch or improved:
            test = predict(model, test_loader, accelerator, gamma_net)
            test_m = summarize(test, cfg.eval.num_bins)
        train_m = {"loss": _mean_over_processes(accelerator, loss_sum / max(count, 1)), "lr": lr}
        if meta is not None:
            train_m["meta_objective"] = _mean_over_processes(accelerator, meta_sum / max(meta_count, 1))
        epoch_gamma = _gather_gamma(accelerator, gammas)  # γ of every training sample of the epoch
        if epoch_gamma is not None:
            train_m.update(gamma_mean=float(epoch_gamma.mean()), gamma_std=float(epoch_gamma.std(unbiased=False)))
        if improved:
            state.best_score, state.best_epoch = score, epoch + 1
            state.best_metrics = {"val": val_m, "test": test_m}
            if main:
                val.save_npz(paths.predictions / "val.npz")
                test.save_npz(paths.predictions / "test.npz")
        state.history.append({"epoch": epoch + 1, "time_s": time.time() - t0, "lr": lr,
                              "train": train_m, "val": val_m, "test": test_m})
        state.epoch = epoch + 1

        tb.scalars("train", train_m, epoch + 1)
        if epoch_gamma is not None:
            tb.histogram("train/gamma_hist", epoch_gamma, epoch + 1)
        tb.scalars("val", val_m, epoch + 1)
        if test_m is not None:
            tb.scalars("test", test_m, epoch + 1)
            every = cfg.logging.reliability_every
            if main and tb.writer is not None and every > 0 and (epoch + 1) % every == 0:
                tb.figure("test/reliability", _reliability_figure(test, cfg.eval.num_bins, epoch + 1), epoch + 1)
        tb.flush()
        accelerator.print(_epoch_line(epoch + 1, cfg.schedule.epochs, train_m, val_m, test_m, improved,
                                      time.time() - t0))
        if cfg.run.save_checkpoints:
            save_checkpoint(accelerator, paths.latest, state)
            if improved:
                save_checkpoint(accelerator, paths.best, state)

    # ---- finish: metrics.json of the selected epoch, reliability diagram, hparams ---------------
    metrics_json = finalize(cfg, paths, state, accelerator, tb)
    tb.close()
    accelerator.wait_for_everyone()
    return RunResult(metrics_json, accelerator.unwrap_model(model), gamma_net, state)


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


def finalize(cfg: Config, paths: RunPaths, state: TrainState, accelerator: Accelerator, tb: TBLogger) -> dict[str, Any]:
    """Write metrics.json (best epoch: val, test, test after TS), reliability.png and history.json."""
    result: dict[str, Any] = {"epoch": state.best_epoch, "select_by": cfg.eval.select_by,
                              "val": state.best_metrics.get("val"), "test": state.best_metrics.get("test"),
                              "test_after_ts": None}
    if not accelerator.is_main_process:
        return result
    val, test = load_predictions(paths.predictions / "val.npz"), load_predictions(paths.predictions / "test.npz")
    result["test_after_ts"] = after_temperature_scaling(val, test, cfg.eval.num_bins)
    result["finished"] = True  # what sweeps look for: the run reached its last epoch and wrote its outputs
    paths.history.write_text(json.dumps(state.history, indent=2))
    import matplotlib.pyplot as plt

    fig = _plot_reliability()(test.probs(), test.labels, num_bins=cfg.eval.num_bins, path=paths.reliability,
                           title=f"{paths.root.name}: test, epoch {state.best_epoch}")
    plt.close(fig)
    final = {f"final/{split}_{k}": float(v) for split in ("val", "test") for k, v in (result[split] or {}).items()
             if k in ("error", "nll", "ece", "mce", "ace")}
    final.update({f"final/test_ts_{k}": float(result["test_after_ts"][k]) for k in ("error", "nll", "ece")})
    tb.hparams({k: v for k, v in flatten(to_dict(cfg)).items() if not isinstance(v, (list, dict))}, final)
    paths.metrics.write_text(json.dumps(result, indent=2))  # last: its presence marks a finished run
    return result


def load_predictions(path: Path) -> Predictions:
    import numpy as np

    with np.load(path) as f:
        return Predictions(torch.from_numpy(f["logits"]), torch.from_numpy(f["labels"]).long())


def _reliability_figure(pred: Predictions, num_bins: int, epoch: int):
    return _plot_reliability()(pred.probs(), pred.labels, num_bins=num_bins, title=f"test, epoch {epoch}")


def _plot_reliability():
    from metacal.report.reliability import plot_reliability

    return plot_reliability


def _epoch_line(epoch: int, epochs: int, train_m: dict, val_m: dict, test_m: dict | None, improved: bool,
                seconds: float) -> str:
    parts = [f"epoch {epoch:>3}/{epochs}", f"loss {train_m['loss']:.4f}", f"lr {train_m['lr']:.3g}"]
    if "meta_objective" in train_m:
        parts.append(f"meta {train_m['meta_objective']:.4f}")
    if "gamma_mean" in train_m:
        parts.append(f"γ {train_m['gamma_mean']:.2f}±{train_m['gamma_std']:.2f}")
    for name, m in (("val", val_m), ("test", test_m)):
        if m is not None:
            parts.append(f"{name} err {m['error']:.4f} nll {m['nll']:.4f} ece {m['ece']:.4f}")
    parts.append(f"{seconds:.1f}s" + (" *" if improved else ""))
    return " | ".join(parts)

