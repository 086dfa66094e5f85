"""The run's final outputs (metrics.json, history.json, reliability.png, calibration/ts_nll.pt, hparams) and the
epoch line.

Every file is written atomically (:mod:`metacal.atomic_io`); metrics.json comes last, so its
presence marks a finished run.
"""

from __future__ import annotations

import json
from typing import Any

from accelerate import Accelerator

from metacal.atomic_io import write_text_atomic
from metacal.meta import Stepper
from metacal.run.method import method_of_config
from metacal.metrics import BootstrapSpec, binning_free_summary, bootstrap_intervals
from metacal.plots.reliability import plot_reliability
from metacal.predictions import Predictions, load_predictions
from metacal.run.calibration import save_calibrator
from metacal.run.layout import RunPaths

from .train_state import TrainState
from .config import Config, flatten, to_dict
from .epoch_eval import after_temperature_scaling, run_temperature
from .regime import data_record, truth_metrics
from .run_summary import runtime_record
from .tb_logging import TBLogger


def finalize(cfg: Config, paths: RunPaths, state: TrainState, accelerator: Accelerator, tb: TBLogger,
             learner: Stepper, has_test: bool = True, bundle: Any = None) -> dict[str, Any]:
    """Write metrics.json (best epoch: val, test — with ``"ci"``, its bootstrap intervals, unless
    ``eval.bootstrap`` is 0 —, test after TS; ``runtime``: processes, threads, per-process batch sizes; ``data``,
    ``test_noisy_labels``, ``noise_detection`` and ``true_posterior``: the data regime's records,
    metacal/train/regime.py), reliability.png, history.json and calibration/ts_nll.pt (that TS, fitted on val, for :func:`metacal.load`).

    The per-epoch metrics lack the binning-free estimators (O(N²)); they are added here for the selected
    epoch, from its saved predictions — the same logits the epoch's metrics were computed from. Without a
    test set (``has_test=False``) ``test`` and ``test_after_ts`` are null and reliability.png shows val."""
    result: dict[str, Any] = {"epoch": state.best_epoch, "select_by": cfg.eval.select_by,
                              "val": state.best_metrics.get("val"), "test": state.best_metrics.get("test"),
                              "test_after_ts": None}
    if not accelerator.is_main_process:
        return result
    val = load_predictions(paths.predictions / "val.npz")
    test = load_predictions(paths.predictions / "test.npz") if has_test else None
    for split, pred in (("val", val), ("test", test)):  # SECE, KDE-ECE, smECE: only for the selected epoch
        if pred is not None and cfg.eval.binning_free:
            result[split] = {**(result[split] or {}), **binning_free_summary(pred.probs, pred.labels)}
    ts = run_temperature(val)
    save_calibrator(paths.root, "ts_nll", ts)
    if test is not None:
        if cfg.eval.bootstrap > 0:  # the same object as `python -m metacal.evaluate test.npz --json --ci`
            spec = BootstrapSpec(cfg.eval.bootstrap, cfg.eval.ci_level, cfg.eval.ci_seed, cfg.eval.ci_method)
            result["test"]["ci"] = bootstrap_intervals(test.probs, test.labels, cfg.eval.num_bins, spec)
        result["test_after_ts"] = after_temperature_scaling(val, test, cfg.eval.num_bins, ts, cfg.eval.binning_free)
        truth = truth_metrics(test, ts, cfg.eval.num_bins)
        if "true_posterior" in truth:
            result["test"]["true_posterior"] = truth["true_posterior"]["raw"]
            result["test_after_ts"]["true_posterior"] = truth["true_posterior"]["after_ts"]
        if "test_noisy_labels" in truth:
            result["test_noisy_labels"] = truth["test_noisy_labels"]
    if bundle is not None:
        result["data"] = data_record(bundle)
    if "noise_detection" in state.best_metrics:
        result["noise_detection"] = state.best_metrics["noise_detection"]
    result["method"] = method_of_config(to_dict(cfg)).record()  # what report and grid pick read, not file names
    result["runtime"] = runtime_record(cfg, accelerator.num_processes, accelerator.device)
    result.update(learner.summary(state.history, state.best_epoch))  # the learner's own sections ("auto")
    result["finished"] = True  # what sweeps look for: the run reached its last epoch and wrote its outputs
    write_text_atomic(paths.history, json.dumps(state.history, indent=2))
    import matplotlib.pyplot as plt

    shown, name = (test, "test") if test is not None else (val, "val")
    fig = plot_reliability(shown.probs, shown.labels, num_bins=cfg.eval.num_bins, path=paths.reliability,
                           title=f"{paths.root.name}: {name}, epoch {state.best_epoch}")
    plt.close(fig)
    final = {f"final/{split}_{k}": float(v) for split in ("val", "test") for k, v in (result[split] or {}).items()
             if k in ("error", "nll", "ece", "mce", "ace")}
    if result["test_after_ts"] is not None:
        final.update({f"final/test_ts_{k}": float(result["test_after_ts"][k]) for k in ("error", "nll", "ece")})
    tb.hparams({k: v for k, v in flatten(to_dict(cfg)).items() if not isinstance(v, (list, dict))}, final)
    write_text_atomic(paths.metrics, json.dumps(result, indent=2))  # last: its presence marks a finished run
    return result


def reliability_figure(pred: Predictions, num_bins: int, epoch: int):
    return plot_reliability(pred.probs, pred.labels, num_bins=num_bins, title=f"test, epoch {epoch}")


def epoch_line(epoch: int, epochs: int, train_m: dict, val_m: dict, test_m: dict | None, improved: bool,
               seconds: float) -> str:
    parts = [f"epoch {epoch:>3}/{epochs}", f"loss {train_m['loss']:.4f}", f"lr {train_m['lr']:.3g}"]
    if "meta_objective" in train_m:
        parts.append(f"meta {train_m['meta_objective']:.4f}")
    if "gamma_mean" in train_m:
        parts.append(f"γ {train_m['gamma_mean']:.2f}±{train_m['gamma_std']:.2f} (max {train_m['gamma_max']:.2f})")
    if "raise_gamma_frac" in train_m:  # share of meta steps whose hypergradient asked for a larger γ
        parts.append(f"↑γ {100 * train_m['raise_gamma_frac']:.0f}%")
    if "raise_level_frac" in train_m:  # the same share for the γ level through the whole trajectory
        parts.append(f"↑level {100 * train_m['raise_level_frac']:.0f}%")
    for name, m in (("val", val_m), ("test", test_m)):
        if m is not None:
            parts.append(f"{name} err {m['error']:.4f} nll {m['nll']:.4f} ece {m['ece']:.4f}")
    parts.append(f"{seconds:.1f}s" + (" *" if improved else ""))
    return " | ".join(parts)
