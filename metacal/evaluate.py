"""Evaluate saved predictions: calibration metrics before and after post-hoc calibration.

    python -m metacal.evaluate PRED.npz [--bins 15] [--calib VAL.npz [--calibrators NAMES]] [--json] [--plot OUT.png]
                               [--ci [--ci-level 0.9] [--bootstrap 1000] [--seed 0]] [--ood OOD.npz]
    python -m metacal.evaluate runs/<name>            # every .npz of the run's predictions/ (val, test)

PRED.npz (read by ``metacal.predictions.load_predictions``) holds ``labels`` (N integers in [0, K)) and
either ``logits`` (N×K float) or ``probs`` (N×K, rows summing to 1 within 1e-3); if both are present,
``logits`` are used. Prints a table in percent, or with ``--json`` exactly one JSON object (fractions; keys
of ``metacal.metrics.summary`` at ``--bins`` bins), including selective prediction on the top-label confidence:
``aurc``, ``augrc``, ``risk_at_coverage`` ({"0.8", "0.9"}) and ``coverage_at_risk`` ({"0.01", "0.05"})
(``metacal.metrics.selective``; table rows AURC, AUGRC, Risk@80%cov, Risk@90%cov, Cov@1%risk, Cov@5%risk).

``--ood OOD.npz`` (the same model's predictions on out-of-distribution inputs, PRED's format; its labels are not
used) adds ``"ood"``: for each score ``msp``, ``max_logit``, ``energy``, ``entropy`` an object with ``auroc``,
``aupr_in``, ``aupr_out`` and ``fpr95``, PRED's samples being the in-distribution positives
(``metacal.metrics.ood``), and a small table. If PRED or OOD holds only ``probs``, log-probabilities stand for the
logits of both (energy is then 0 for every sample) and the JSON says ``"ood_logits_from": "log_probs"``. A K that
differs from PRED's is one line (exit code 2) before anything is computed; with PRED a folder, OOD is scored
against every file.

``--calib VAL.npz`` fits, on VAL, every post-hoc calibrator of ``metacal.posthoc.registry`` (or those named
by ``--calibrators``, comma-separated): temperature scaling by NLL (``ts_nll``) and by the ECE grid
(``ts_ece``, 0.1…10.0), top-label histogram binning (``hb``, ``--bins`` bins), vector scaling (``vector``),
matrix scaling and Dirichlet calibration with ODIR (``matrix``, ``dirichlet``; λ = μ by 5-fold CV) and
one-vs-rest isotonic regression (``isotonic``). It applies each to PRED and adds ``after_<name>`` (nested
summaries), ``temperature_nll``, ``temperature_ece`` and ``calibrator_params`` (the fitted T, λ, μ by
name). The scaling methods need logits: a file with only ``probs`` is scaled through log-probabilities used
as logits (softmax(log p / T) ∝ p^(1/T), the same family of maps for TS and Dirichlet calibration), and the
JSON then says ``"calib_logits_from": "log_probs"``. A VAL with fewer samples than a calibrator needs
(vector: 2K, matrix and Dirichlet: K(K+1), isotonic: K) is one line (exit code 2) before anything is fitted.
``--ci`` adds ``"ci"``: bootstrap intervals of the metrics of PRED (``--bootstrap`` B resamples, ``--ci-level``
level, ``--seed``, ``--ci-method`` basic (default) or percentile; ``metacal.metrics.bootstrap``):
``{"method": "basic", "level", "bootstrap",
"seed", "<metric>": [low, high], …, "skipped": ["sece", "kde_ece", "smece"]}`` (the binning-free estimators
are too slow to recompute B times); the table
gets an interval column, where ``†`` marks an estimate outside its own interval and a footnote says why
(``metacal.metrics.bootstrap.outside_note``). ``--plot OUT.png`` writes the reliability diagram of PRED (before post-hoc
calibration) with relplot's smooth reliability curve, and with ``--ci`` a bootstrap interval on each bin's
accuracy.

PRED may be a folder: every ``*.npz`` in it is evaluated (a run directory stands for its ``predictions/``);
``--json`` then prints one object keyed by file name, the table one block per file. A folder without
.npz files is one line saying so (exit code 2).

Bad input (missing file or key, unreadable file, wrong shapes, NaN/inf, labels outside [0, K), probability
rows not summing to 1, ``--bootstrap`` < 1, ``--ci-level`` outside (0, 1)) → one line on stderr and exit code 2,
before anything is computed or written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from metacal.metrics import BootstrapSpec, summary
from metacal.metrics.bootstrap import METHODS, estimates_outside, outside_note
from metacal.metrics.selective import flatten as flatten_selective
from metacal.plots.reliability import plot_reliability
from metacal.posthoc import registry as calibrators
from metacal import evaluate_run_cli as run_options
from metacal.evaluate_ood import format_ood_table, ood_result
from metacal.predictions import Predictions, load_predictions
from metacal.registry import UnknownNameError, unknown_name

PROG = "python -m metacal.evaluate"


class InputError(ValueError):
    """Bad command-line input (reported as one line, exit code 2)."""


def fit_calibrators(calib: Predictions, names: Sequence[str] | None = None, num_bins: int = 15) -> dict:
    """{name: calibrator fitted on ``calib``} for ``names`` (default: every registered one); every sample
    count is checked before the first fit."""
    names = calibrators.available(for_predictions=calib) if names is None else list(names)
    for name in names:
        try:
            calibrators.check_fit_size(name, calib.labels.shape[0], calib.num_classes)
        except ValueError as exc:
            raise InputError(f"--calib file: {exc} (choose others with --calibrators)") from None
    return {name: calibrators.fit_calibrator(name, calib, num_bins) for name in names}


def evaluate(pred: Predictions, num_bins: int = 15, calib: Predictions | None = None,
             fitted: dict | None = None, names: Sequence[str] | None = None,
             ci: BootstrapSpec | None = None) -> dict:
    """The CLI's result dict (see module docstring). ``fitted`` (from :func:`fit_calibrators` on ``calib``)
    saves refitting when several files are evaluated against one VAL; ``names`` selects the calibrators;
    ``ci`` adds the bootstrap intervals of PRED's metrics."""
    result: dict = dict(summary(pred.probs, pred.labels, num_bins, ci=ci))
    if calib is None:
        return result
    if calib.num_classes != pred.num_classes:
        raise InputError(
            f"--calib file has K = {calib.num_classes} classes but predictions have K = {pred.num_classes}"
        )
    if fitted is None:
        fitted = fit_calibrators(calib, names, num_bins)
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
    return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line instead of usage + message
        raise InputError(f"{message} (see {self.prog} --help)")


def prediction_files(path: str | Path) -> list[Path]:
    """The .npz files to evaluate: ``path`` itself, or every ``*.npz`` of a folder — a run directory stands for
    its ``predictions/`` folder. A folder without any raises :class:`InputError` saying why."""
    path = Path(path)
    if not path.is_dir():
        return [path]  # a missing or unreadable file is reported by load_predictions
    folder = path / "predictions" if (path / "predictions").is_dir() else path
    files = sorted(p for p in folder.glob("*.npz") if p.is_file())
    if not files:
        where = f"{folder} holds no .npz files" + ("" if folder != path else " and no predictions/ folder")
        raise InputError(f"{where}; pass a PRED.npz, a predictions folder (val.npz, test.npz) or a run directory")
    return files


def calibrator_names(text: str | None, have_calib: bool) -> list[str] | None:
    """The ``--calibrators`` list (None: all), each name checked against the registry."""
    if text is None:
        return None
    if not have_calib:
        raise InputError("--calibrators needs --calib VAL.npz")
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in calibrators.CALIBRATORS]
    if not names:
        raise InputError(f"--calibrators: no name given; choose from {', '.join(calibrators.available())}")
    if unknown:
        raise InputError(f"--calibrators: {unknown_name('post-hoc calibrator', unknown[0], calibrators.available())}")
    return list(dict.fromkeys(names))


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = _Parser(prog=prog, description="Calibration metrics of saved predictions (.npz).")
    parser.add_argument("predictions", metavar="PRED",
                        help="PRED.npz with 'labels' and 'logits' (or 'probs'), or a folder of them (a run's "
                             "predictions/ or the run directory itself): every .npz in it is evaluated")
    parser.add_argument("--bins", type=int, default=15, help="bins for the binned metrics and HB (default 15)")
    parser.add_argument("--calib", metavar="VAL.npz",
                        help="fit the post-hoc calibrators on these predictions and report PRED after each")
    parser.add_argument("--calibrators", metavar="NAMES",
                        help=f"with --calib: comma-separated subset of {','.join(calibrators.available())} "
                             "(default: all)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object (fractions) instead of a table; for a folder, one object "
                             "keyed by file name")
    parser.add_argument("--plot", metavar="OUT.png",
                        help="write the reliability diagram of PRED (binned and relplot's smooth curve; with --ci "
                             "a bootstrap interval per bin) to this PNG")
    parser.add_argument("--ci", action="store_true",
                        help="add bootstrap intervals of every metric but SECE, KDE-ECE and smECE (too slow to "
                             "recompute B times)")
    parser.add_argument("--ci-method", choices=METHODS, default="basic",
                        help="interval rule of --ci: basic (default; covers near calibration, where the binned "
                             "errors are biased) or percentile")
    parser.add_argument("--ci-level", type=float, default=0.9, metavar="LEVEL",
                        help="confidence level of --ci, strictly between 0 and 1 (default 0.9)")
    parser.add_argument("--bootstrap", type=int, default=1000, metavar="B",
                        help="bootstrap resamples for --ci, >= 1 (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap resamples (default 0)")
    parser.add_argument("--ood", metavar="OOD.npz",
                        help="the same model's predictions on out-of-distribution inputs: adds OOD detection "
                             "(AUROC, AUPR-In/Out, FPR95) for the msp, max_logit, energy and entropy scores; with a "
                             "run directory also a set name (digits, held_out_classes) or an .npz of inputs x")
    run_options.add_arguments(parser)
    return parser


def bootstrap_spec(args: argparse.Namespace) -> BootstrapSpec | None:
    """The --ci settings, checked (one-line InputError naming the flag) even without --ci."""
    if args.bootstrap < 1:
        raise InputError(f"--bootstrap must be an integer >= 1, got {args.bootstrap}")
    if not 0.0 < args.ci_level < 1.0:
        raise InputError(f"--ci-level must lie strictly between 0 and 1 (e.g. 0.9), got {args.ci_level:g}")
    return BootstrapSpec(args.bootstrap, args.ci_level, args.seed, args.ci_method) if args.ci else None


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    try:
        args = build_parser(prog).parse_args(argv)
        if args.bins < 1:
            raise InputError(f"--bins must be a positive integer, got {args.bins}")
        ci = bootstrap_spec(args)
        if run_options.wants_run(args):  # a run's network on shifted or new data (metacal/evaluate_run_cli.py)
            run_options.print_result(*run_options.run_request(args, InputError), args.json)
            return 0
        names = calibrator_names(args.calibrators, bool(args.calib))
        files = prediction_files(args.predictions)
        if args.plot and len(files) > 1:
            raise InputError(f"--plot needs one PRED.npz; {args.predictions} holds {len(files)} "
                             f"({', '.join(f.name for f in files)})")
        calib = load_predictions(args.calib) if args.calib else None
        ood = load_predictions(args.ood) if args.ood else None
        preds = {file.name: load_predictions(file) for file in files}
        for pred in preds.values():  # every file is checked before the (slower) fits
            if calib is not None and calib.num_classes != pred.num_classes:
                raise InputError(f"--calib file has K = {calib.num_classes} classes but predictions have "
                                 f"K = {pred.num_classes}")
            if ood is not None and ood.num_classes != pred.num_classes:
                raise InputError(f"--ood file has K = {ood.num_classes} classes but predictions have "
                                 f"K = {pred.num_classes}")
        fitted = fit_calibrators(calib, names, args.bins) if calib is not None else None
        results = {name: evaluate(pred, args.bins, calib, fitted, ci=ci) for name, pred in preds.items()}
        if ood is not None:
            for name, pred in preds.items():
                results[name].update(ood_result(pred, ood))
        if args.plot:
            pred = preds[files[0].name]
            plot_reliability(pred.probs, pred.labels, args.bins, path=args.plot, title=files[0].name, bands=ci,
                             smooth=True)
    except (InputError, ValueError, FileNotFoundError, OSError, UnknownNameError) as exc:
        print(f"{prog}: error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
        return 2
    single = not Path(args.predictions).is_dir()
    if args.json:
        print(json.dumps(results[files[0].name] if single else results, allow_nan=False))
    else:
        tables = [format_table(r, args.bins) if single else f"== {files[0].parent / name} ==\n"
                  f"{format_table(r, args.bins)}" for name, r in results.items()]
        print("\n\n".join(tables))
        if args.plot:
            print(f"reliability diagram written to {args.plot}")
    return 0


def console_main() -> int:
    """Entry point of the ``metacal-evaluate`` console script."""
    return main(prog="metacal-evaluate")


if __name__ == "__main__":
    sys.exit(main())
