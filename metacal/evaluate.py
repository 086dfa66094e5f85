"""Evaluate saved predictions: calibration metrics before and after post-hoc calibration.

    python -m metacal.evaluate PRED.npz [--bins 15] [--calib VAL.npz] [--json] [--plot OUT.png]

PRED.npz (read by ``metacal.predictions.load_predictions``) holds ``labels`` (N integers in [0, K)) and
either ``logits`` (N×K float) or ``probs`` (N×K, rows summing to 1 within 1e-3); if both are present,
``logits`` are used. Prints a table in percent, or with ``--json`` exactly one JSON object (fractions; keys
of ``metacal.metrics.summary`` at ``--bins`` bins).

``--calib VAL.npz`` fits, on VAL, temperature scaling by NLL and by the ECE grid (0.1…10.0) and top-label
histogram binning (``--bins`` bins), applies them to PRED and adds ``after_ts_nll``, ``after_ts_ece``,
``after_hb`` (nested summaries) and ``temperature_nll``, ``temperature_ece``. Temperature scaling needs
logits: a file with only ``probs`` is scaled through log-probabilities used as logits
(softmax(log p / T) ∝ p^(1/T), the same family of maps), and the JSON then says
``"calib_logits_from": "log_probs"``.
``--plot OUT.png`` writes the reliability diagram of PRED (before post-hoc calibration).

Bad input (missing file or key, unreadable file, wrong shapes, NaN/inf, labels outside [0, K), probability
rows not summing to 1) → one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from metacal.metrics import summary
from metacal.posthoc import HistogramBinning, TemperatureScaling
from metacal.predictions import Predictions, load_predictions

PROG = "python -m metacal.evaluate"


class InputError(ValueError):
    """Bad command-line input (reported as one line, exit code 2)."""


def evaluate(pred: Predictions, num_bins: int = 15, calib: Predictions | None = None) -> dict:
    """The CLI's result dict (see module docstring)."""
    result: dict = dict(summary(pred.probs, pred.labels, num_bins))
    if calib is None:
        return result
    if calib.num_classes != pred.num_classes:
        raise InputError(
            f"--calib file has K = {calib.num_classes} classes but predictions have K = {pred.num_classes}"
        )
    val_logits, test_logits = calib.logits_for_scaling(), pred.logits_for_scaling()
    ts_nll = TemperatureScaling("nll").fit(val_logits, calib.labels)
    ts_ece = TemperatureScaling("ece_grid", num_bins=num_bins).fit(val_logits, calib.labels)
    hb = HistogramBinning(num_bins, mode="top").fit(calib.probs, calib.labels)
    result["temperature_nll"] = ts_nll.temperature
    result["temperature_ece"] = ts_ece.temperature
    if pred.logits is None or calib.logits is None:
        result["calib_logits_from"] = "log_probs"
    result["after_ts_nll"] = summary(ts_nll.transform(test_logits), pred.labels, num_bins)
    result["after_ts_ece"] = summary(ts_ece.transform(test_logits), pred.labels, num_bins)
    result["after_hb"] = summary(hb.transform(pred.probs), pred.labels, num_bins)
    return result


TABLE_ROWS = (
    ("error", "Error (%)", True), ("nll", "NLL", False), ("brier", "Brier", False), ("ece", "ECE (%)", True),
    ("mce", "MCE (%)", True), ("ace", "ACE (%)", True), ("rmsce", "RMSCE (%)", True),
    ("classwise_ece", "Classwise ECE (%)", True), ("sece", "SECE (%)", True), ("kde_ece", "KDE-ECE (%)", True),
    ("smece", "smECE (%)", True),
)  # fmt: skip


def format_table(result: dict, num_bins: int) -> str:
    """Human-readable table: one column per calibration state, fractions shown in percent."""
    columns = [("uncalibrated", result)]
    if "after_ts_nll" in result:
        columns += [
            (f"TS-NLL T={result['temperature_nll']:.3f}", result["after_ts_nll"]),
            (f"TS-ECE T={result['temperature_ece']:.2f}", result["after_ts_ece"]),
            ("HB", result["after_hb"]),
        ]
    width = max(18, *(len(name) + 2 for name, _ in columns))
    lines = [f"N = {result['n']}, K = {result['num_classes']}, {num_bins} bins"]
    lines.append(f"{'metric':<20}" + "".join(f"{name:>{width}}" for name, _ in columns))
    for key, label, percent in TABLE_ROWS:
        values = [100 * col[key] if percent else col[key] for _, col in columns]
        cells = "".join(f"{v:>{width}.{2 if percent else 4}f}" for v in values)
        lines.append(f"{label:<20}{cells}")
    return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line instead of usage + message
        raise InputError(f"{message} (see {self.prog} --help)")


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = _Parser(prog=prog, description="Calibration metrics of saved predictions (.npz).")
    parser.add_argument("predictions", help="PRED.npz with 'labels' and 'logits' (or 'probs')")
    parser.add_argument("--bins", type=int, default=15, help="bins for the binned metrics and HB (default 15)")
    parser.add_argument("--calib", metavar="VAL.npz", help="fit TS (NLL), TS (ECE grid) and HB on these predictions")
    parser.add_argument("--json", action="store_true", help="print one JSON object (fractions) instead of a table")
    parser.add_argument("--plot", metavar="OUT.png", help="write the reliability diagram of PRED to this PNG")
    return parser


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    try:
        args = build_parser(prog).parse_args(argv)
        if args.bins < 1:
            raise InputError(f"--bins must be a positive integer, got {args.bins}")
        pred = load_predictions(args.predictions)
        calib = load_predictions(args.calib) if args.calib else None
        result = evaluate(pred, args.bins, calib)
        if args.plot:
            from metacal.report.reliability import plot_reliability

            plot_reliability(pred.probs, pred.labels, args.bins, path=args.plot, title=Path(args.predictions).name)
    except (InputError, ValueError, FileNotFoundError, OSError) as exc:
        print(f"{prog}: error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, allow_nan=False))
    else:
        print(format_table(result, args.bins))
        if args.plot:
            print(f"reliability diagram written to {args.plot}")
    return 0


def console_main() -> int:
    """Entry point of the ``metacal-evaluate`` console script."""
    return main(prog="metacal-evaluate")


if __name__ == "__main__":
    sys.exit(main())
