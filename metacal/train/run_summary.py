"""What a run says about itself: the end-of-run summary, the ``runtime`` record of metrics.json, and the
one-line note for ``--resume`` on a run that is already finished."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import torch

from metacal.meta.learners import global_batch
from metacal.run.layout import RunPaths

from .checkpoint import STATE_JSON, find_latest
from .compat import resume_point
from .epoch_eval import TIE_BREAK

NAMES = {"error": "error", "nll": "NLL", "ece": "ECE"}


def runtime_record(cfg: Any, num_processes: int, device: Any) -> dict[str, Any]:
    """How the run was executed (metrics.json ``runtime``): processes, torch threads per process, and the
    per-process share of each global batch (``data.batch_size`` etc. are global, split across processes)."""
    record: dict[str, Any] = {
        "num_processes": int(num_processes),
        "torch_threads": int(torch.get_num_threads()),
        "device": str(device),
        "batch_size": int(cfg.data.batch_size),
        "batch_size_per_process": int(cfg.data.batch_size) // max(int(num_processes), 1),
        "eval_batch_size_per_process": int(cfg.data.eval_batch_size) // max(int(num_processes), 1),
    }
    if (own := global_batch(cfg)) is not None:  # the learner's own global batch: meta_batch_size_per_process
        record[f"{own[0].replace('.', '_')}_per_process"] = own[1] // max(int(num_processes), 1)
    return record


def _pct(values: dict[str, Any] | None, key: str) -> str:
    value = (values or {}).get(key)
    return f"{100 * float(value):.2f}%" if isinstance(value, (int, float)) else "n/a"


def end_of_run_summary(metrics: dict[str, Any], paths: RunPaths, epochs: int) -> str:
    """Three lines: the selected epoch and why (the select_by metric and its tie-break), test error/ECE before
    and after temperature scaling, where everything is."""
    select_by = str(metrics.get("select_by", "error"))
    why = f"lowest validation {NAMES.get(select_by, select_by)} (eval.select_by={select_by}"
    if select_by in TIE_BREAK:
        why += f"; on a tie, the lower validation {NAMES[TIE_BREAK[select_by]]}"
    test, ts = metrics.get("test"), metrics.get("test_after_ts")
    lines = [f"finished: selected epoch {metrics.get('epoch')} of {epochs} — {why}); "
             "in the epoch lines ' *' marks each new best, so the selected epoch is the last one marked"]
    if test is None:  # data without a test set: say so, and give the validation numbers instead
        line = (f"no test set; validation at that epoch: error {_pct(metrics.get('val'), 'error')}, "
                f"ECE {_pct(metrics.get('val'), 'ece')}")
    else:
        line = f"test at that epoch: error {_pct(test, 'error')}, ECE {_pct(test, 'ece')}"
    if ts:
        line += (f"; after temperature scaling (T = {float(ts.get('temperature', float('nan'))):.3f}, fitted by NLL "
                 f"on validation): error {_pct(ts, 'error')}, ECE {_pct(ts, 'ece')}")
    lines.append(line)
    if auto := metrics.get("auto"):  # metacal/meta/auto.py: the value the run settled on
        measured = " + ".join(s.replace("_", "-") for s in auto.get("measured_on") or ()) or "the measured sample"
        lines.append(f"automatic {auto['knob']}: {auto['selected']:.3g} at the selected epoch (gap "
                     f"{100 * auto['gap_selected']:+.2f} ± {100 * auto['gap_se_selected']:.2f} points on {measured}), "
                     f"{auto['final']:.3g} at the end")
        if auto.get("at_limit"):  # a finding, not a setting to raise: see docs/auto_gamma.md#at-the-limit
            lines.append(f"automatic {auto['knob']} reached its upper end {auto['limit']:.3g} (auto.max) at "
                         f"epoch {auto['limit_epoch']}: the held-out gap stayed over-confident while it rose, so "
                         f"this loss cannot close it here; compare with CE + temperature scaling "
                         f"(docs/auto_gamma.md#at-the-limit)")
    lines.append(f"all numbers: {paths.metrics}; predictions: {paths.predictions}/; "
                 f"reliability diagram: {paths.reliability}")
    return "\n".join(lines)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def finished_note(root: Path, resolve: Callable[[], Any]) -> str | None:
    """One line when ``--resume`` has nothing to do: metrics.json says finished and the newest checkpoint
    ended its last epoch at or after the ``schedule.epochs`` of ``resolve()`` — the config the resume would
    use, called only then and checked against the checkpoint (an incompatible one still raises
    :class:`CheckpointError`); a resume that raises the number of epochs continues. None when there is
    training left to do."""
    paths = RunPaths(Path(root))
    metrics = _read_json(paths.metrics)
    if not metrics or metrics.get("finished") is not True:
        return None
    selected = f"selected epoch {metrics.get('epoch')}; results in {paths.metrics}"
    latest = find_latest(paths.checkpoints)
    if latest is None:
        return f"{paths.root} is already finished ({selected}); it kept no checkpoint, so there is nothing to resume"
    state = _read_json(latest / STATE_JSON) or {}
    done = int(state.get("epoch", 0))
    if int(state.get("step_in_epoch", 0)) != 0:
        return None
    cfg = resolve()
    resume_point(paths, cfg)  # the same refusal as a real resume for a config that cannot continue the run
    if done < cfg.schedule.epochs:
        return None
    return (f"{paths.root} is already finished ({done} epochs, {selected}); nothing to do — to train longer, "
            f"resume with --set schedule.epochs=N (N > {done})")
