"""Evaluate saved predictions: calibration metrics before and after post-hoc calibration.

    python -m metacal.evaluate PRED.npz [--bins 15] [--calib VAL.npz [--calibrators NAMES]] [--json] [--plot OUT.png]
                               [--ci [--ci-level 0.9] [--bootstrap 1000] [--seed 0]] [--ood OOD.npz]
    python -m metacal.evaluate runs/<name>            # every .npz of the run's predictions/ (val, test)
    python -m metacal.evaluate PRED.npz --calib VAL.npz --conformal aps [--alpha 0.1] [--mondrian]
    python -m metacal.evaluate runs/<name> --conformal aps --shift corruptions

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

``--calib VAL.npz`` fits, on VAL, every post-hoc calibrator of ``metacal.posthoc.registry`` that VAL can fit (or those
named by ``--calibrators``, comma-separated, or ``all``; metacal.posthoc.choice): temperature scaling by NLL
(``ts_nll``) and by the ECE grid (``ts_ece``, 0.1…10.0), top-label histogram binning (``hb``, ``--bins`` bins), vector
scaling (``vector``), matrix scaling and Dirichlet calibration with ODIR (``matrix``, ``dirichlet``; λ = μ by 5-fold CV)
and one-vs-rest isotonic regression (``isotonic``). It applies each to PRED and adds ``after_<name>`` (nested
summaries), ``temperature_nll``, ``temperature_ece`` and ``calibrator_params`` (the fitted T, λ, μ by name). The scaling
methods need logits: a file with only ``probs`` is scaled through log-probabilities used as logits (softmax(log p / T) ∝
p^(1/T), the same family of maps for TS and Dirichlet calibration), and the JSON then says ``"calib_logits_from":
"log_probs"``. A VAL with fewer samples than a calibrator needs (vector: 2K, matrix and Dirichlet: K(K+1), isotonic: K)
is one line (exit code 2) before anything is fitted.
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

``--conformal SCORE`` (``thr``, ``aps``, ``raps``; metacal.conformal) adds ``"conformal"``: split-conformal
prediction sets at miscoverage ``--alpha`` (default 0.1), their quantile fitted on VAL through each calibrator column
(``uncalibrated`` and every fitted calibrator), with coverage, mean and median size, empty and singleton shares, the
worst class's and the worst size group's coverage per column (metacal.conformal.evaluation). ``--mondrian`` fits one
quantile per class; ``--k-reg`` and ``--lam`` set RAPS's regulariser; ``--deterministic`` drops the randomisation of
APS and RAPS; ``--weighted`` gives each evaluated input its own quantile, the calibration scores weighted by a
domain classifier's likelihood ratio (covariate shift; Tibshirani et al. 2019). With a run directory and
``--shift`` the run's validation predictions are the calibration split and every family × severity cell gains
``"sets"`` in each column. α outside (0, 1), an unknown score (with the closest names) or a calibration split
smaller than ⌈1/α⌉ − 1 is one line (exit code 2).

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

from metacal.conformal.evaluation import SetRequest
from metacal.metrics import BootstrapSpec
from metacal.metrics.bootstrap import METHODS
from metacal.plots.reliability import plot_reliability
from metacal.posthoc import registry as calibrators
from metacal.posthoc.choice import parse_choice
from metacal.predictions import load_predictions
from metacal.registry import UnknownNameError

from . import run_options
from .files import InputError, conformal_result, evaluate, fit_calibrators, fit_sets, format_table
from .ood import ood_result

PROG = "python -m metacal.evaluate"


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


def calibrator_choice(text: str | None, have_calib: bool) -> str | None:
    """The ``--calibrators`` choice (None: the default, every calibrator VAL can fit), checked before any file is
    read (metacal.posthoc.choice)."""
    if text is None:
        return None
    if not have_calib:
        raise InputError("--calibrators needs --calib VAL.npz")
    try:
        parse_choice(text, "evaluate")
    except ValueError as err:
        raise InputError(str(err)) from None
    return text


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
                             "(default: all that VAL can fit)")
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
    sets = parser.add_argument_group("prediction sets (split conformal; docs/conventions.md#conformal-prediction-sets)")
    sets.add_argument("--conformal", metavar="SCORE",
                      help="add prediction sets with this score: thr, aps or raps (needs --calib, or a run directory "
                           "with --shift, whose validation predictions calibrate)")
    sets.add_argument("--alpha", type=float, metavar="A",
                      help="with --conformal: miscoverage in (0, 1), the sets aim at coverage 1 - A (default 0.1)")
    sets.add_argument("--mondrian", action="store_true", help="with --conformal: one quantile per class")
    sets.add_argument("--deterministic", action="store_true",
                      help="with --conformal: APS and RAPS without the uniform randomisation")
    sets.add_argument("--weighted", action="store_true",
                      help="with --conformal: weighted quantiles for covariate shift (Tibshirani et al. 2019), the "
                           "likelihood ratio from a domain classifier between the calibration split and the "
                           "evaluated predictions")
    sets.add_argument("--k-reg", type=int, default=1, help="with --conformal raps: the set size left unpenalised "
                                                           "(default 1)")
    sets.add_argument("--lam", type=float, default=0.01, help="with --conformal raps: the penalty per label beyond "
                                                              "--k-reg (default 0.01)")
    run_options.add_arguments(parser)
    return parser


def set_request(args: argparse.Namespace) -> SetRequest | None:
    """The --conformal request, checked before any file is read (None without --conformal)."""
    if not args.conformal:
        extra = [flag for flag, given in (("--alpha", args.alpha is not None), ("--mondrian", args.mondrian),
                                          ("--deterministic", args.deterministic),
                                          ("--weighted", args.weighted)) if given]
        if extra:
            raise InputError(f"{extra[0]} needs --conformal SCORE (thr, aps or raps)")
        return None
    request = SetRequest(args.conformal, 0.1 if args.alpha is None else args.alpha, args.mondrian,
                         not args.deterministic, args.k_reg, args.lam, args.seed, args.weighted)
    try:
        return request.check()
    except (ValueError, UnknownNameError) as err:
        raise InputError(f"--conformal: {str(err).splitlines()[0]}") from None


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
        sets = set_request(args)
        if run_options.wants_run(args):  # a run's network on shifted or new data (metacal/evaluate/run_options.py)
            run_options.print_result(*run_options.run_request(args, InputError, sets), args.json)
            return 0
        if sets is not None and not args.calib:
            raise InputError("--conformal needs --calib VAL.npz (the calibration split; a run's is "
                             "RUN/predictions/val.npz), or a run directory with --shift")
        choice = calibrator_choice(args.calibrators, bool(args.calib))
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
        if sets is not None:
            sets.check_size(int(calib.labels.shape[0]), f"--calib file {args.calib}")
        fitted = fit_calibrators(calib, choice, args.bins) if calib is not None else None
        results = {name: evaluate(pred, args.bins, calib, fitted, ci=ci) for name, pred in preds.items()}
        if ood is not None:
            for name, pred in preds.items():
                results[name].update(ood_result(pred, ood))
        if sets is not None:
            fitted_sets = fit_sets(calib, fitted, sets)
            for name, pred in preds.items():
                results[name]["conformal"] = conformal_result(pred, fitted, fitted_sets, calib)
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
