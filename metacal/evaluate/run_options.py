"""``python -m metacal.evaluate runs/<name> --shift SUITE | --ood SET | --inputs X.npz``: the command-line side of
:func:`metacal.shift.evaluate.evaluate_run` (a finished run's network on shifted, unseen or new data)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from metacal.conformal.evaluation import SetRequest
from metacal.posthoc.choice import parse_choice
from metacal.predict.network import resolve_device

DEFAULT_SEVERITIES = (1, 2, 3, 4, 5)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The run-directory options of the evaluate CLI."""
    group = parser.add_argument_group("a run directory on shifted or new data (no retraining)")
    group.add_argument("--shift", metavar="SUITE",
                       help="evaluate the run's network on every family x severity of a shift suite of its test "
                            "split: corruptions (images), mnist1d_natural (MNIST-1D); writes RUN/shift/SUITE.json")
    group.add_argument("--severities", type=int, nargs="+", default=list(DEFAULT_SEVERITIES), metavar="S",
                       help="with --shift: severities 1..5 (default all; 0, the clean test set, always runs)")
    group.add_argument("--inputs", metavar="X.npz",
                       help="arrays x (inputs, the dataset's raw format) and y (labels), optionally x_ood: the "
                            "run's network on them, with its own normalisation; writes RUN/shift/inputs_X.json")
    group.add_argument("--device", help="cpu, cuda, cuda:1 … (default: cuda when available)")


def wants_run(args: argparse.Namespace) -> bool:
    """Whether the request is for a run's network rather than for saved prediction files: ``--shift`` or
    ``--inputs``, or ``--ood`` naming a set instead of an .npz of predictions."""
    return bool(args.shift or args.inputs or (args.ood and not str(args.ood).endswith(".npz")))


def check_run_request(args: argparse.Namespace, error: type[Exception]) -> list[str]:
    """One-line ``error`` for options that apply only to prediction files; returns the calibrators to fit."""
    for flag, given in (("--calib", args.calib), ("--plot", args.plot), ("--ci", args.ci)):
        if given:
            raise error(f"{flag} applies to prediction files; with --shift, --inputs or an OOD set name the run's "
                        "own validation predictions are the calibration set")
    if not Path(args.predictions).is_dir():
        raise error(f"--shift, --inputs and OOD set names need a run directory (runs/<name>), got {args.predictions}")
    try:
        resolve_device(args.device, flag="--device")
    except ValueError as err:
        raise error(str(err)) from None
    try:
        names = parse_choice(args.calibrators, "evaluate_run")
    except ValueError as err:
        raise error(str(err)) from None
    return [n for n in names if n != "ts_nll"]  # the run's own TS is always a column


def run_request(args: argparse.Namespace, error: type[Exception], sets: SetRequest | None = None
                ) -> tuple[dict[str, Any], str]:
    """(result, text) of a run request, with prediction sets when ``sets`` is given; nothing is written unless every
    input checks out."""
    from metacal.shift.evaluate import evaluate_run
    from metacal.shift.table import format_result

    names = check_run_request(args, error)
    result = evaluate_run(args.predictions, shift=args.shift, severities=args.severities, ood=args.ood,
                          inputs=args.inputs, calibrators_=names, device=args.device, num_bins=args.bins,
                          sets=sets)
    return result, format_result(result)


def print_result(result: dict[str, Any], text: str, as_json: bool) -> None:
    print(json.dumps(result, allow_nan=False) if as_json else text)
