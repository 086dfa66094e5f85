"""Saved predictions evaluated: their metrics before and after each post-hoc calibrator fitted on validation
predictions, as the result dict and the table of ``python -m metacal.evaluate`` (metacal/evaluate/cli.py)."""

from __future__ import annotations

from metacal.conformal.evaluation import (SetRequest, fit_columns, format_sets, result_head, set_columns,
                                         shift_weights)
from metacal.metrics import BootstrapSpec, summary
from metacal.metrics.bootstrap import estimates_outside, outside_note
from metacal.metrics.selective import flatten as flatten_selective
from metacal.posthoc import registry as calibrators
from metacal.posthoc.choice import parse_choice
from metacal.predictions import Predictions

from .ood import format_ood_table


class InputError(ValueError):
    """Bad command-line input (reported as one line, exit code 2)."""


def fit_calibrators(calib: Predictions, choice: str | None = None, num_bins: int = 15) -> dict:
    """{name: calibrator fitted on ``calib``} for the calibrators ``choice`` names (metacal.posthoc.choice; None and
    ``all``: every one ``calib`` can fit); every sample count is checked before the first fit."""
    names = parse_choice(choice, "evaluate", fits=lambda spec: not spec.needs_perturbed or calib.perturbed is not None)
    for name in names:
        try:
            calibrators.check_fit_size(name, calib.labels.shape[0], calib.num_classes)
        except ValueError as exc:
            raise InputError(f"--calib file: {exc} (choose others with --calibrators)") from None
    return {name: calibrators.fit_calibrator(name, calib, num_bins) for name in names}


def evaluate(pred: Predictions, num_bins: int = 15, calib: Predictions | None = None,
             fitted: dict | None = None, choice: str | None = None,
             ci: BootstrapSpec | None = None) -> dict:
    """The CLI's result dict (metacal/evaluate/cli.py). ``fitted`` (from :func:`fit_calibrators` on ``calib``)
    saves refitting when several files are evaluated against one VAL; ``choice`` names the calibrators;
    ``ci`` adds the bootstrap intervals of PRED's metrics."""
    result: dict = dict(summary(pred.probs, pred.labels, num_bins, ci=ci))
    if calib is None:
        return result
    if calib.num_classes != pred.num_classes:
        raise InputError(
            f"--calib file has K = {calib.num_classes} classes but predictions have K = {pred.num_classes}"
        )
    if fitted is None:
        fitted = fit_calibrators(calib, choice, num_bins)
    if "ts_nll" in fitted:
        result["temperature_nll"] = fitted["ts_nll"].temperature
    if "ts_ece" in fitted:
        result["temperature_ece"] = fitted["ts_ece"].temperature
    if pred.logits is None or calib.logits is None:
        result["calib_logits_from"] = "log_probs"
    result["calibrator_params"] = {name: p for name, cal in fitted.items() if (p := calibrators.fitted_params(cal))}
    for name, cal in fitted.items():
        result[f"after_{name}"] = summary(calibrators.apply_calibrator(name, cal, pred), pred.labels, num_bins)
    return result


def calibrated_columns(pred: Predictions, fitted: dict) -> dict:
    """The probabilities of ``pred`` raw and after each calibrator of ``fitted``."""
    return {"uncalibrated": pred.probs, **{n: calibrators.apply_calibrator(n, c, pred) for n, c in fitted.items()}}


def fit_sets(calib: Predictions, fitted: dict, request: SetRequest) -> tuple[dict, dict]:
    """(the result's head, a conformal predictor per column), each column's quantile fitted on ``calib`` through
    that column's calibrator (metacal.conformal.evaluation)."""
    return (result_head(request, int(calib.labels.shape[0])),
            fit_columns(request, calibrated_columns(calib, fitted), calib.labels))


def conformal_result(pred: Predictions, fitted: dict, sets: tuple[dict, dict], calib: Predictions) -> dict:
    """``"conformal"`` of the result: the sets of ``pred`` in every column of :func:`fit_sets` (weighted against
    ``calib`` when the request is)."""
    head, predictors = sets
    weights = shift_weights(head["weighted"], calib.probs, pred.probs)
    return {**head, "columns": set_columns(predictors, calibrated_columns(pred, fitted), pred.labels,
                                           weights=weights)}


TABLE_ROWS = (
    ("error", "Error (%)", True), ("nll", "NLL", False), ("brier", "Brier", False), ("ece", "ECE (%)", True),
    ("mce", "MCE (%)", True), ("ace", "ACE (%)", True), ("rmsce", "RMSCE (%)", True),
    ("ece_sweep", "ECE-sweep (%)", True), ("debiased_l2_ce", "Debiased L2 CE (%)", True),
    ("classwise_ece", "Classwise ECE (%)", True), ("sece", "SECE (%)", True), ("kde_ece", "KDE-ECE (%)", True),
    ("smece", "smECE (%)", True), ("aurc", "AURC (%)", True), ("augrc", "AUGRC (%)", True),
    ("risk_at_coverage@0.8", "Risk@80%cov (%)", True), ("risk_at_coverage@0.9", "Risk@90%cov (%)", True),
    ("coverage_at_risk@0.01", "Cov@1%risk (%)", True), ("coverage_at_risk@0.05", "Cov@5%risk (%)", True),
)  # fmt: skip

def format_table(result: dict, num_bins: int) -> str:
    """Human-readable table: one column per calibration state, fractions shown in percent."""
    columns = [("uncalibrated", result)]
    titles = {"ts_nll": f"TS-NLL T={result.get('temperature_nll', 0):.3f}",
              "ts_ece": f"TS-ECE T={result.get('temperature_ece', 0):.2f}"}
    columns += [(titles.get(name, calibrators.spec(name).label), result[f"after_{name}"])
                for name in calibrators.available() if f"after_{name}" in result]
    width = max(18, *(len(name) + 2 for name, _ in columns))
    ci = result.get("ci")
    ci_name = f"{100 * ci['level']:g}% CI (B={ci['bootstrap']})" if ci else ""
    ci_width = max(20, len(ci_name) + 2)
    outside = estimates_outside(ci, result) if ci else {}
    lines = [f"N = {result['n']}, K = {result['num_classes']}, {num_bins} bins"]
    lines.append(f"{'metric':<20}" + "".join(f"{name:>{width}}" for name, _ in columns[:1])
                 + (f"{ci_name:>{ci_width}}" if ci else "") + "".join(f"{name:>{width}}" for name, _ in columns[1:]))
    flat = [{**col, **flatten_selective(col)} for _, col in columns]  # "risk_at_coverage@0.8" etc.
    for key, label, percent in TABLE_ROWS:
        cells = [f"{(100 * col[key] if percent else col[key]):>{width}.{2 if percent else 4}f}" for col in flat]
        if ci:
            interval = "—" if key not in ci else "[{:.{d}f}, {:.{d}f}]".format(
                *((100 * v if percent else v) for v in ci[key]), d=2 if percent else 4)
            cells.insert(1, f"{interval + ('†' if key in outside else ' '):>{ci_width}}")
        lines.append(f"{label:<20}{''.join(cells)}")
    if outside:  # an estimate outside its own interval: a footnote says why
        names = {key: label.removesuffix(" (%)") for key, label, _ in TABLE_ROWS}
        lines.append(f"† {outside_note(ci, flat[0], names)}")
    if "ood" in result:
        lines += ["", format_ood_table(result["ood"])]
    if "conformal" in result:
        lines += ["", *format_sets(result["conformal"], result["conformal"]["columns"])]
    return "\n".join(lines)
