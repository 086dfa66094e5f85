"""The training loop, top to bottom: setup → (train epoch → evaluate → select → checkpoint)* → finish.

One iteration is ``run.stepper.step(x, y)`` (built by :mod:`metacal.train.components`): a plain step, or one
meta step of Wang & Golebiowski 2024, Alg. 1 (the real SGD step of the backbone at the current per-sample γ, then
the hypergradient update of the meta-parameters on a meta-validation batch). The lr follows
``schedule.name`` (metacal/train/schedules.py): MultiStepLR per epoch, or a per-iteration schedule. After
each epoch: val and test predictions are gathered, ``loss.update_from_validation`` sees the val logits, the
best epoch by validation ``eval.select_by`` (a tie broken by the lower validation NLL, by error for select_by
nll: :func:`~metacal.train.epoch_eval.improves`) keeps its predictions, and the state is saved. Data without a
test set (a user's ``image_folder``/``arrays``) skips every test entry.

Robustness (see :mod:`metacal.train.checkpoint` for the on-disk scheme):

* checkpoints at every epoch end and, with ``run.checkpoint_every_steps: N``, every N global steps;
  a resume mid-epoch skips the batches already done (``accelerator.skip_first_batches``) and restores
  the epoch's accumulators (loss sums, γ of every sample so far), so the epoch's numbers, the final
  metrics and the weights equal those of an uninterrupted run;
* SIGTERM or Ctrl-C (with :func:`metacal.train.preemption.handle_stop_signals` installed) → a checkpoint at the next
  step boundary, then :class:`~metacal.train.preemption.Preempted`;
* a non-finite loss / meta objective / γ, or non-finite weights at a checkpoint, raises
  :class:`TrainingDivergedError` naming the step; nothing is saved after a non-finite value. The iterations
  note finiteness on the device; it is read before every checkpoint and at the epoch's end
  (:mod:`metacal.train.finite_watch`);
* out of accelerator memory in a step or an evaluation raises
  :class:`~metacal.train.out_of_memory.OutOfDeviceMemory`, one line naming the batch sizes and what to lower.

No iteration reads a value back to the host (a GPU sync): the running sums, γ and the TensorBoard step values
stay on the device until those logging points (tests/train/test_host_reads.py counts the reads).
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable

import torch
from accelerate import Accelerator
from tqdm.auto import tqdm

from metacal.distributed import mean_over_processes
from metacal.meta import StepResult

from metacal.objectives._inputs import targets_in_range
from metacal.run.layout import RunPaths

from . import preemption
from .finite_watch import FiniteWatch, TrainingDivergedError
from .out_of_memory import naming_batch_sizes
from .train_state import EpochProgress, host_values
from .config import Config
from .epoch_eval import improves, predict, selection_score, summarize
from .outputs import epoch_line, finalize, reliability_figure
from .regime import with_truth
from .run_dir import clear_run_dir
from .run_summary import end_of_run_summary
from .setup import RunResult, TrainingRun, make_accelerator, setup

__all__ = ["train", "RunResult", "TrainingDivergedError", "make_accelerator"]

#: The progress bar shows the running loss every this many iterations (each refresh reads it to the host).
BAR_EVERY = 50


def train(cfg: Config, paths: RunPaths, resume: bool = False, accelerator: Accelerator | None = None,
          before_first_write: Callable[[], None] | None = None, bundle: Any = None,
          model: torch.nn.Module | None = None) -> RunResult:
    """Train per ``cfg`` into ``paths`` (resuming from its latest checkpoint if ``resume``).

    ``before_first_write`` runs on the main process after every component was built and the checkpoint
    (if any) loaded, before anything is written (the CLI clears an ``--overwrite`` directory there, so a
    bad config never costs earlier results). The caller ends the Accelerator. ``bundle``/``model``: data and
    network built by the caller instead of from the config (:func:`metacal.fit`; trained in place)."""
    run = setup(cfg, paths, resume, accelerator or make_accelerator(cfg), before_first_write, bundle, model)
    device, state = run.accelerator.device, run.state
    for epoch in range(state.epoch, cfg.schedule.epochs):
        with naming_batch_sizes(cfg, device, "training", lambda: f"epoch {epoch + 1}, step {state.step_in_epoch + 1}"):
            t0, train_m, epoch_gamma = train_epoch(run, epoch)
        with naming_batch_sizes(cfg, device, "evaluation", lambda: f"the end of epoch {epoch + 1}"):
            evaluate_epoch(run, epoch, t0, train_m, epoch_gamma)
    with naming_batch_sizes(cfg, device, "evaluation", lambda: "the final evaluation"):
        metrics = finalize(cfg, paths, state, run.accelerator, run.tb, run.stepper,
                           has_test=run.test_loader is not None, bundle=run.bundle)
    run.tb.close()
    run.accelerator.wait_for_everyone()
    return RunResult(metrics, run.accelerator.unwrap_model(run.model), run.stepper.per_sample_gamma(), run.state,
                     paths.root, run.stepper)


def train_in_dir(cfg: Config, paths: RunPaths, accelerator: Accelerator, resume: bool, overwrite: bool,
                 **given: Any) -> RunResult:
    """:func:`train` as the command line and :func:`metacal.fit` run it: once every component is built, an
    ``overwrite`` directory is emptied and the run directory named; at the end, the run's summary lines.
    ``given``: the datasets and model handed over from Python (``bundle=``, ``model=``)."""

    def started() -> None:  # main process, every component built: the run starts
        if overwrite:
            clear_run_dir(paths.root)
        print(f"run directory: {paths.root}", flush=True)

    result = train(cfg, paths, resume=resume, accelerator=accelerator, before_first_write=started, **given)
    if accelerator.is_main_process:
        print(end_of_run_summary(result.metrics, paths, cfg.schedule.epochs), flush=True)
    return result


def train_epoch(run: TrainingRun, epoch: int) -> tuple[float, dict[str, float], torch.Tensor | None]:
    """One epoch of iterations (resumed mid-epoch where a checkpoint left off); returns its start time,
    train metrics (mean loss, lr, mean meta objective, γ mean/std) and the γ of every training sample."""
    cfg, state, accelerator = run.cfg, run.state, run.accelerator
    skip = state.step_in_epoch if epoch == state.epoch else 0
    acc = EpochProgress.from_dict(run.progress) if skip and run.progress else EpochProgress()
    t0 = time.time() - acc.elapsed
    run.model.train()
    run.loss_fn.train()
    run.loss_fn.set_epoch(epoch)
    run.train_loader.set_epoch(epoch)
    if run.graphs is not None:  # the loss's epoch state is set: capture afresh
        run.graphs.new_epoch()
    batches = run.train_loader
    if skip >= run.steps_per_epoch:
        batches = []
    elif skip > 0:  # resumed mid-epoch: the same epoch permutation, without the batches already done
        batches = accelerator.skip_first_batches(run.train_loader, skip)
        batches.set_epoch(epoch)
    lr = run.optimizer.param_groups[0]["lr"]
    show_bar = accelerator.is_main_process and cfg.logging.progress_bar and sys.stderr.isatty()
    bar = tqdm(total=run.steps_per_epoch, initial=skip, desc=f"epoch {epoch + 1}/{cfg.schedule.epochs}",
               disable=not show_bar, leave=False, dynamic_ncols=True)
    every = cfg.run.checkpoint_every_steps
    base = state.global_step - skip  # global steps before this epoch
    watch = FiniteWatch()

    def where(global_step: int) -> str:  # the iteration of a (1-based) global step of this epoch
        return f"epoch {epoch + 1}, step {global_step - base} (global step {global_step})"

    def check() -> None:  # a logging point: read the iterations' finiteness flags
        watch.check(accelerator, where, where(state.global_step))

    run.stepper.set_read_check(check)  # the automatic scalar's update reads the network's output
    with targets_in_range(run.labels_checked):
        for step, (inputs, targets) in enumerate(batches, start=skip):
            if step >= run.steps_per_epoch:
                break
            out = run.stepper.step(inputs, targets)
            watch.note({"loss": out.loss, "meta_objective": out.meta_objective, "gamma": out.gamma},
                       state.global_step + 1)
            run.scheduler.iteration_done()  # per-iteration schedules (warm-up, cosine, constant); before any save
            _accumulate(acc, out)
            state.global_step += 1
            run.tb.step_scalars(out, state.global_step)
            state.step_in_epoch = step + 1
            bar.update(1)
            if show_bar and (step + 1) % BAR_EVERY == 0:  # the running loss: one host read per BAR_EVERY steps
                bar.set_postfix(loss=f"{float(acc.loss_sum) / acc.count:.4f}")
            stop = preemption.stop_requested(accelerator)
            periodic = every > 0 and state.global_step % every == 0 and step + 1 < run.steps_per_epoch
            if stop or periodic:
                check()
                run.tb.flush()
                saved = run.save(where(state.global_step), acc.to_dict(time.time() - t0))
                if stop:
                    bar.close()
                    raise run.preempted(where(state.global_step), saved)
    check()
    bar.close()
    run.scheduler.epoch_done()  # the epoch-level MultiStepLR of schedule.name=step

    def mean(value: float) -> float:
        return mean_over_processes(value, accelerator.device)

    train_m = {"loss": mean(float(acc.loss_sum) / max(acc.count, 1)), "lr": lr}
    if run.graphs is not None:  # this process's iterations of the epoch replayed from a CUDA graph
        train_m["replayed_steps"] = run.graphs.replays
    if acc.meta_count:
        train_m["meta_objective"] = mean(float(acc.meta_sum) / acc.meta_count)
    epoch_gamma = _gather_gamma(accelerator, acc)  # γ of every training sample of the epoch
    if epoch_gamma is not None:
        train_m.update(gamma_mean=float(epoch_gamma.mean()), gamma_std=float(epoch_gamma.std(unbiased=False)),
                       gamma_max=float(epoch_gamma.max()))
    # the learner's own numbers, from its per-step diagnostics of the epoch (one host read per name)
    train_m.update(run.stepper.epoch_metrics({name: host_values(v) for name, v in acc.diagnostics.items()}))
    return t0, train_m, epoch_gamma


def evaluate_epoch(run: TrainingRun, epoch: int, t0: float, train_m: dict[str, float],
                   epoch_gamma: torch.Tensor | None) -> None:
    """Val (and test) predictions, model selection, history, TensorBoard, the epoch's checkpoint."""
    cfg, state, accelerator, tb = run.cfg, run.state, run.accelerator, run.tb
    gamma_net = run.stepper.per_sample_gamma()
    val = predict(run.model, run.val_loader, accelerator, gamma_net)
    run.loss_fn.update_from_validation(val.logits.to(accelerator.device), val.labels.to(accelerator.device))
    train_m.update(run.loss_fn.epoch_metrics())  # what that update set (AdaFocal: its per-bin γ)
    # per epoch without the O(N²) binning-free estimators; finalize adds them for the selected epoch
    val_m = summarize(val, cfg.eval.num_bins, binning_free=False)
    score = selection_score(val_m, cfg.eval.select_by)
    improved = improves(val_m, state.best_metrics.get("val"), cfg.eval.select_by)  # a tie goes to the lower NLL
    test, test_m = None, None
    if run.test_loader is not None and (cfg.eval.test_every_epoch or improved):
        test = predict(run.model, run.test_loader, accelerator, gamma_net)
        test_m = summarize(test, cfg.eval.num_bins, binning_free=False)
        test = with_truth(test, run.bundle.test, run.bundle.noisy_test_labels)  # saved beside it in test.npz
    if improved:
        state.best_score, state.best_epoch = score, epoch + 1
        state.best_metrics = {"val": val_m, "test": test_m}
        if accelerator.is_main_process:
            val.save(run.paths.predictions / "val.npz")
            if test is not None:
                test.save(run.paths.predictions / "test.npz")
    state.history.append({"epoch": epoch + 1, "time_s": time.time() - t0, "lr": train_m["lr"],
                          "train": train_m, "val": val_m, "test": test_m})
    state.epoch, state.step_in_epoch = epoch + 1, 0
    if improved and run.noise_probe is not None:  # metrics.json "noise_detection"; outside the epoch's time_s
        state.best_metrics["noise_detection"] = run.noise_probe.measure(
            lambda loader: predict(run.model, loader, accelerator, gamma_net))

    tb.scalars("train", train_m, epoch + 1)
    if epoch_gamma is not None:
        tb.histogram("train/gamma_hist", epoch_gamma, epoch + 1)
    tb.scalars("val", val_m, epoch + 1)
    if test_m is not None:
        tb.scalars("test", test_m, epoch + 1)
        every_fig, last = cfg.logging.reliability_every, epoch + 1 == cfg.schedule.epochs
        if tb.writer is not None and every_fig > 0 and ((epoch + 1) % every_fig == 0 or last):
            tb.figure("test/reliability", reliability_figure(test, cfg.eval.num_bins, epoch + 1), epoch + 1)
    tb.flush()
    accelerator.print(epoch_line(epoch + 1, cfg.schedule.epochs, train_m, val_m, test_m, improved,
                                 time.time() - t0))
    saved = run.save(f"the end of epoch {epoch + 1}", {}, best=improved)
    if preemption.stop_requested(accelerator):
        tb.close()
        raise run.preempted(f"epoch {epoch + 1}", saved)


def _accumulate(acc: EpochProgress, out: StepResult) -> None:
    """Add one iteration's report to the epoch's running sums (γ per sample, the learner's diagnostics), on the
    device: the float64 sums equal the Python float sums of the values read one by one."""
    acc.loss_sum, acc.count = acc.loss_sum + _summand(out.loss), acc.count + 1
    if out.meta_objective is not None:
        acc.meta_sum, acc.meta_count = acc.meta_sum + _summand(out.meta_objective), acc.meta_count + 1
    if out.gamma is not None:
        acc.gammas.append(out.gamma.detach().float().reshape(-1))
    for name, value in out.diagnostics.items():
        acc.diagnostics.setdefault(name, []).append(value.detach().reshape(()))


def _summand(value: torch.Tensor) -> torch.Tensor | float:
    """A 0-dim value as a float64 device tensor (MPS has no float64: read it there)."""
    value = value.detach()
    return float(value) if value.device.type == "mps" else value.to(torch.float64)


def _gather_gamma(accelerator: Accelerator, acc: EpochProgress) -> torch.Tensor | None:
    """The epoch's per-sample γ from every process on the CPU (equal counts per rank: split, even batches)."""
    local = acc.gamma_values()
    if local is None:
        return None
    if accelerator.num_processes == 1:
        return local.cpu()
    return accelerator.gather(local.to(accelerator.device)).cpu()
