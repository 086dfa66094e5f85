"""A finished run, as it is, on shifted, unseen or new data: no retraining (docs/conventions.md#shift).

``evaluate_run(run_dir, shift="corruptions")`` rebuilds the run's selected network (:mod:`metacal.predict.network`) and
evaluates it on every family × severity of a shift suite of its test split (:mod:`metacal.data.shift_suites`).
Every cell holds the metrics of :func:`metacal.metrics.summary` (binned metrics and selective prediction; the
O(N²) binning-free estimators are left out) in columns:

* ``uncalibrated``: the network's softmax;
* ``ts_nll``: the run's own temperature scaling, fitted by NLL on its clean validation predictions
  (predictions/val.npz), computed as the trainer computes metrics.json's ``test_after_ts``;
* ``ts_perturbed``: temperature scaling fitted on the validation split together with its copy perturbed at mixed
  severities of the suite's *fit* families (Tomani et al., CVPR 2021); the other families are held out;
* ``ets``: ensemble temperature scaling fitted on the clean validation predictions (Zhang, Kailkhura & Han,
  ICML 2020).

Severity 0 is the clean test split itself: its ``uncalibrated`` and ``ts_nll`` cells reproduce metrics.json's
``test`` and ``test_after_ts`` (fp32 runs, same device). ``mean`` averages every metric over the families at
each severity, over all families and over the held-out ones. ``ood`` (a set name of
:data:`metacal.data.ood_sets.OOD_SETS` or an .npz) gives OOD detection against the clean test split
(:func:`metacal.metrics.ood.ood_detection`); ``inputs`` evaluates arrays a user supplies. Results are written to
``<run>/shift/<suite>.json``, ``<run>/shift/ood_<name>.json`` and ``<run>/shift/inputs_<stem>.json``; the
validation predictions with their perturbed copy go to ``<run>/shift/val_<suite>.npz`` (``--calib`` of the
evaluate CLI and the report's ``ts_perturbed`` column fit on them), and per-sample top labels at severities 0 and 3
to ``<run>/shift/<suite>_samples.npz`` (:mod:`metacal.shift.samples`).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from metacal.atomic_io import write_text_atomic
from metacal.conformal.evaluation import (SetRequest, fit_columns, quantile_of, result_head, set_columns,
                                         shift_weights)
from metacal.data import shift_suites
from metacal.data.ood_sets import OOD_SETS
from metacal.metrics import summary
from metacal.metrics.ood import ood_detection
from metacal.posthoc import TemperatureScaling
from metacal.posthoc import registry as calibrators
from metacal.posthoc.choice import parse_choice
from metacal.predict.inputs import input_arrays, ood_logits, read_npz
from metacal.predict.network import LoadedRun, RunError, load_run
from metacal.predictions import Predictions
from metacal.registry import unknown_name

from .samples import SampleCollector, samples_path

SEVERITIES = (1, 2, 3, 4, 5)
OUT_DIR = "shift"


def _plain(value: Any) -> Any:
    """JSON-ready: tensors and numpy numbers → floats, nested dicts kept."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (int, bool)) and not isinstance(value, float):
        return value
    return float(value)


def _summary(probs: torch.Tensor, labels: torch.Tensor, num_bins: int) -> dict[str, Any]:
    return _plain(summary(probs, labels, num_bins, binning_free=False))


def mean_of(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The mean of each metric over ``rows`` (same keys; nested dicts averaged entry by entry)."""
    out: dict[str, Any] = {}
    for key, first in rows[0].items():
        if isinstance(first, dict):
            out[key] = mean_of([r[key] for r in rows])
        else:
            out[key] = float(np.mean([r[key] for r in rows]))
    return out


class Columns:
    """The calibrators fitted once per run, applied to every cell's logits."""

    def __init__(self, run: LoadedRun, names: Sequence[str], perturbed: Predictions | None, num_bins: int) -> None:
        self.num_bins = num_bins
        self.ts = TemperatureScaling(method="nll").fit(run.val.logits.double(), run.val.labels)
        self.fitted: dict[str, Any] = {}
        for name in names:
            val = run.val
            if calibrators.spec(name).needs_perturbed:
                if perturbed is None:
                    continue
                val = replace(run.val, perturbed=perturbed)
            self.fitted[name] = calibrators.fit_calibrator(name, val, num_bins)
        self.sets: dict[str, Any] = {}
        self.set_calib: Predictions | None = None  # the calibration split of weighted sets
        self.weighted = False

    def fit_sets(self, request: SetRequest, val: Predictions) -> dict[str, Any]:
        """Conformal predictors for every column, fitted on ``val`` through the column's calibrator; every later
        cell gains ``"sets"`` (coverage and sizes) in each column. Returns the result's ``"conformal"`` head."""
        self.sets = fit_columns(request, self.probs(val), val.labels)
        self.set_calib, self.weighted = val, request.weighted
        return {**result_head(request, int(val.labels.shape[0])),
                "quantiles": {name: quantile_of(p) for name, p in self.sets.items()}}

    @property
    def names(self) -> list[str]:
        return ["uncalibrated", "ts_nll", *self.fitted]

    def params(self) -> dict[str, Any]:
        out = {"ts_nll": {"temperature": float(self.ts.temperature)}}
        out.update({name: calibrators.fitted_params(cal) for name, cal in self.fitted.items()})
        return out

    def probs(self, pred: Predictions) -> dict[str, torch.Tensor]:
        """The probabilities of every column."""
        out = {"uncalibrated": pred.probs, "ts_nll": self.ts.transform(pred.logits.double())}
        out.update({name: calibrators.apply_calibrator(name, cal, pred) for name, cal in self.fitted.items()})
        return out

    def cell(self, pred: Predictions, samples: SampleCollector | None = None, severity: int = 0) -> dict[str, Any]:
        """The metrics of every column; with ``samples``, their per-sample top labels are recorded too."""
        probs = self.probs(pred)
        if samples is not None:
            samples.add(severity, probs, pred.labels)
        out = {name: _summary(p, pred.labels, self.num_bins) for name, p in probs.items()}
        if self.sets:
            weights = shift_weights(self.weighted, self.set_calib.probs, pred.probs)
            for name, metrics in set_columns(self.sets, probs, pred.labels, cell=True, weights=weights).items():
                out[name]["sets"] = metrics
        return out

    def ood(self, inside: torch.Tensor, outside: torch.Tensor) -> dict[str, Any]:
        t = float(self.ts.temperature)
        return {"uncalibrated": _plain(ood_detection(inside, outside)),
                "ts_nll": _plain(ood_detection(inside / t, outside / t))}


@contextlib.contextmanager
def _threads(run_threads: int | None) -> Iterator[None]:
    """The run's torch thread count while its network computes (the same reductions as in training)."""
    before = torch.get_num_threads()
    if run_threads:
        torch.set_num_threads(int(run_threads))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _progress(total: int, desc: str, enabled: bool | None):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="cell", disable=None if enabled is None else not enabled, leave=False)


def evaluate_shift(run: LoadedRun, suite: str, severities: Sequence[int], columns: Columns, clean: dict[str, Any],
                   seed: int = 0, progress: bool | None = None, samples: SampleCollector | None = None
                   ) -> dict[str, Any]:
    """Every family × severity of ``suite`` in ``columns``; severity 0 is ``clean``, the clean test split's cell
    (every family's severity 0 is that split bit for bit: tests/data/test_shift_suites.py)."""
    bundle = run.bundle
    families = shift_suites.suite_families(bundle, suite)
    fit = shift_suites.fit_families(bundle, suite)
    held_out = shift_suites.held_out_families(bundle, suite)
    cells = []
    with _progress(len(families) * len(severities), f"{run.root.name}: {suite}", progress) as bar:
        for family in families:
            for severity in severities:
                x, y = shift_suites.shifted_split(bundle, suite, family, severity, "test", seed)
                kept = samples if family in held_out else None  # the per-sample file pools the held-out families
                cells.append({"family": family, "severity": severity,
                              "metrics": columns.cell(run.predictions(x, y), kept, severity)})
                bar.update()
    means = [{"severity": 0, "over": over, "metrics": clean} for over in ("all", "held_out")]
    for severity in severities:
        for over, names in (("all", families), ("held_out", held_out)):
            rows = [c["metrics"] for c in cells if c["severity"] == severity and c["family"] in names]
            if rows:
                means.append({"severity": severity, "over": over,
                              "metrics": {col: mean_of([r[col] for r in rows]) for col in rows[0]}})
    return {"suite": suite, "families": families, "fit_families": fit, "held_out_families": held_out,
            "severities": [0, *severities], "clean": clean, "cells": cells, "mean": means}


def evaluate_run(run_dir: str | Path, shift: str | None = None, severities: Sequence[int] = SEVERITIES,
                 ood: str | Path | None = None, inputs: str | Path | None = None,
                 calibrators_: Sequence[str] | None = None, device: str | torch.device | None = None,
                 seed: int = 0, num_bins: int | None = None, write: bool = True,
                 progress: bool | None = None, sets: SetRequest | None = None) -> dict[str, Any]:
    """Evaluate the run in ``run_dir`` as it is (module docstring), with the post-hoc calibrators ``calibrators_``
    (default: metacal.posthoc.choice.DEFAULTS["evaluate_run"]). Returns ``{"run", "clean", "calibrators"}``
    plus ``"shift"``, ``"ood"`` and ``"inputs"`` for what was asked; with ``write`` each part is also saved under
    ``<run>/shift/``. ``sets`` adds prediction sets (``"conformal"``, and ``"sets"`` in every cell's columns;
    metacal.conformal.evaluation), calibrated on the run's validation predictions. Every input is checked before
    anything is computed or written."""
    severities = check_severities(severities)
    chosen = parse_choice(None, "evaluate_run") if calibrators_ is None else calibrators_
    names = [name for name in chosen if name != "ts_nll"]  # the run's own TS is always a column
    run = load_run(run_dir, device)
    if sets is not None:
        sets.check()
        sets.check_size(int(run.val.labels.shape[0]), f"{run.root}/predictions/val.npz")
    if shift is not None:
        shift_suites.check_suite(run.bundle, shift)
    if ood is not None and Path(ood).suffix != ".npz" and str(ood) not in OOD_SETS:
        raise RunError(unknown_name("OOD set", str(ood), OOD_SETS.available()))
    user = input_arrays(run, Path(inputs)) if inputs is not None else None
    if ood is not None and Path(ood).suffix == ".npz":
        read_npz(Path(ood))
    bins = int(num_bins or run.cfg.eval.num_bins)
    if shift is not None:  # MNIST-1D's first evaluation generates the suite's sets once, with a bar on a terminal
        shift_suites.prepare(run.bundle, shift, progress=progress)
    with _threads(run.cfg.run.torch_threads):
        perturbed = None
        if shift is not None and any(calibrators.spec(name).needs_perturbed for name in names):
            xp, yp = shift_suites.perturbed_split(run.bundle, shift, "val", seed)
            perturbed = run.predictions(xp, yp)
        columns = Columns(run, names, perturbed, bins)
        head = columns.fit_sets(sets, run.val) if sets is not None else None
        x0, y0 = _clean_test(run)
        test_logits = run.logits(x0)
        samples = SampleCollector() if shift is not None else None
        result: dict[str, Any] = {"run": str(run.root), "num_bins": bins, "calibrators": columns.params(),
                                  "clean": columns.cell(Predictions.from_logits(test_logits, y0), samples)}
        if head is not None:
            result["conformal"] = head
        if shift is not None:
            result["shift"] = evaluate_shift(run, shift, severities, columns, result["clean"], seed,
                                             progress, samples)
        if ood is not None:
            name, logits = ood_logits(run, ood, seed)
            result["ood"] = {"set": name, "n_in": len(test_logits), "n_out": len(logits),
                             **columns.ood(test_logits, logits)}
        if user is not None:
            x, y, x_ood = user
            logits = run.logits(x)
            part: dict[str, Any] = {"file": str(inputs), "metrics": columns.cell(Predictions.from_logits(logits, y))}
            if x_ood is not None:
                part["ood"] = columns.ood(logits, run.logits(x_ood))
            result["inputs"] = part
    if write:
        save_parts(run.root, result, shift, ood, inputs)
        if perturbed is not None:  # what the report's perturbation-TS column is fitted on
            replace(run.val, perturbed=perturbed).save(run.root / OUT_DIR / f"val_{shift}.npz")
        if samples is not None and shift is not None:
            samples.save(samples_path(run.root, shift))
    return result


def _clean_test(run: LoadedRun) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole test split: one tensor index where its samples live in one tensor (bit-identical,
    metacal.data.batched), else sample by sample."""
    from metacal.data.batched import batched_view

    test = run.bundle.test
    if test is None:
        raise RunError(f"{run.root}'s data has no test split to evaluate against")
    view = batched_view(test)
    if view is not None:
        x, y = view.__getitems__(list(range(len(test))))
        return x, torch.as_tensor(y).long()
    items = [test[i] for i in range(len(test))]
    return torch.stack([x for x, _ in items]), torch.as_tensor([int(y) for _, y in items]).long()


def check_severities(severities: Sequence[int]) -> tuple[int, ...]:
    values = tuple(severities)
    if not values or any(isinstance(s, bool) or not isinstance(s, int) or not 1 <= s <= 5 for s in values):
        raise RunError(f"severities must be integers 1..5 (severity 0 is the clean test set, always evaluated), "
                       f"got {list(values)}")
    return tuple(dict.fromkeys(values))


def save_parts(root: Path, result: dict[str, Any], shift: str | None, ood: str | Path | None,
               inputs: str | Path | None) -> list[Path]:
    """Write each part of ``result`` to ``<root>/shift/`` (atomically); returns the files written."""
    out = root / OUT_DIR
    out.mkdir(exist_ok=True)
    head = {k: result[k] for k in ("run", "num_bins", "calibrators", "clean")}
    written = []
    for key, name in (("shift", shift), ("ood", ood), ("inputs", inputs)):
        if name is None:
            continue
        stem = {"shift": str(name), "ood": f"ood_{Path(str(name)).stem}",
                "inputs": f"inputs_{Path(str(name)).stem}"}[key]
        path = out / f"{stem}.json"
        write_text_atomic(path, json.dumps({**head, key: result[key]}, indent=1, allow_nan=False))
        written.append(path)
    return written
