"""Calibrated predictions of a finished run on new inputs, or its export to one file (torch.export or ONNX).

    python -m metacal.predict RUN INPUTS.npz --out PROBS.npz [--calibrator ts_nll|none|NAME] [--device cpu]
    python -m metacal.predict RUN --export MODEL.pt2|MODEL.onnx [--calibrator ts_nll|none|NAME]

INPUTS.npz holds ``x``, the dataset's raw inputs (:mod:`metacal.predict.model`: images (N, C, H, W), (N, H, W, C)
or (N, H, W) as uint8 0..255 or float in [0, 1]; other data (N, *input_shape)), and optionally ``y`` (N integer
labels). PROBS.npz gets ``probs`` (N×K float64), ``labels_pred`` (N int64), ``classes`` (when the run knows
them) and ``calibrator`` (its name, or "none"), written atomically; one line says what was written, with the
error and ECE (15 bins) when ``y`` is given. ``--calibrator`` is a name of :mod:`metacal.posthoc.registry`
(default ts_nll, the run's temperature scaling) or ``none``; one not yet in the run's ``calibration/`` is
fitted on its validation predictions and saved there. ``--export`` writes one file mapping raw float32 inputs
to calibrated probabilities, the calibrator folded in: ``.pt2`` (``torch.export.load``) or ``.onnx`` (ONNX;
writing it needs ``pip install 'metacal[export]'``) (:mod:`metacal.predict.export`).

Bad input (missing run or checkpoint, missing or unreadable INPUTS, no ``x``, wrong shape or channels, bad
``y``, unknown calibrator, unusable device, unwritable output, an --export file that is neither .pt2 nor .onnx,
ONNX without its packages) → one line on stderr, exit code 2, nothing written.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from metacal.atomic_io import write_with_atomic
from metacal.registry import UnknownNameError

from .network import resolve_device

PROG = "python -m metacal.predict"


class InputError(ValueError):
    """Bad command-line input (one line, exit code 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line instead of usage + message
        raise InputError(f"{message} (see {self.prog} --help)")


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = _Parser(prog=prog, description="Calibrated probabilities of a finished run on new inputs, or its "
                                            "export to one file (torch.export .pt2 or ONNX).")
    parser.add_argument("run", metavar="RUN", help="a finished run directory (runs/<name>)")
    parser.add_argument("inputs", metavar="INPUTS.npz", nargs="?",
                        help="x: raw inputs in the dataset's format; optionally y: labels (adds error and ECE)")
    parser.add_argument("--out", metavar="PROBS.npz", help="where to write probs, labels_pred, classes, calibrator")
    parser.add_argument("--export", metavar="MODEL.pt2|MODEL.onnx",
                        help="write raw float32 inputs → calibrated probabilities as one file: .pt2 (torch.export) "
                             "or .onnx (needs pip install 'metacal[export]')")
    parser.add_argument("--calibrator", metavar="NAME", help="post-hoc calibrator: any name of metacal.posthoc, "
                        "or none (default: ts_nll, the run's temperature scaling; metacal/posthoc/choice.py)")
    parser.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda when available)")
    return parser


def check_writable(path: str, flag: str) -> Path:
    """``path`` as a file that can be written: its folder exists and is writable, it is not a folder."""
    out = Path(path)
    folder = out.parent
    if out.is_dir():
        raise InputError(f"{flag} {out} is a directory; name a file")
    if not folder.is_dir():
        raise InputError(f"{flag} {out}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise InputError(f"{flag} {out} cannot be written (no permission)")
    return out


def check_device(text: str | None) -> torch.device | None:
    if text is None:
        return None
    try:
        return resolve_device(text, flag="--device")
    except ValueError as err:
        raise InputError(str(err)) from None


def check_request(args: argparse.Namespace) -> tuple[str | None, Path | None, Path | None]:
    """(calibrator or None, --out, --export), every flag checked before anything is loaded."""
    from metacal.posthoc.choice import parse_choice

    from .export import check_exportable, export_format

    if args.inputs is None and args.export is None:
        raise InputError("nothing to do: pass INPUTS.npz --out PROBS.npz, or --export MODEL.pt2|MODEL.onnx")
    if (args.inputs is None) != (args.out is None):
        raise InputError("INPUTS.npz and --out PROBS.npz go together" if args.inputs else
                         "--out needs INPUTS.npz (the inputs to predict)")
    if args.inputs is not None and not Path(args.inputs).is_file():
        raise InputError(f"INPUTS.npz {args.inputs}: no such file")
    name = next(iter(parse_choice(args.calibrator, "predict", flag="--calibrator", single=True)), None)
    if args.export is not None:
        check_exportable(name)
        export_format(args.export)
    out = check_writable(args.out, "--out") if args.out else None
    export = check_writable(args.export, "--export") if args.export else None
    return name, out, export


def read_inputs(path: str, num_classes: int) -> tuple[Any, np.ndarray | None]:
    """``x`` and the optional labels ``y`` of INPUTS.npz, checked."""
    from .inputs import read_npz

    arrays = read_npz(Path(path))
    if "x" not in arrays:
        raise InputError(f"{path} has no 'x' (found: {', '.join(sorted(arrays)) or 'nothing'}); store the inputs "
                         "as x (np.savez(path, x=...))")
    y = arrays.get("y")
    if y is not None:
        if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer) or len(y) != len(arrays["x"]):
            raise InputError(f"{path}: y must be {len(arrays['x'])} integer labels (one per x), got {y.dtype} {y.shape}")
        if len(y) and (y.min() < 0 or y.max() >= num_classes):
            raise InputError(f"{path}: y must lie in 0..{num_classes - 1}, got {y.min()}..{y.max()}")
    return arrays["x"], y


def write_predictions(out: Path, probs: torch.Tensor, classes: list[str] | None, calibrator: str | None) -> None:
    arrays = {"probs": probs.numpy().astype(np.float64), "labels_pred": probs.argmax(dim=1).numpy().astype(np.int64),
              "calibrator": np.array(calibrator or "none")}
    if classes is not None:
        arrays["classes"] = np.array(classes)
    write_with_atomic(out, lambda buffer: np.savez(buffer, **arrays))


def predict(args: argparse.Namespace) -> list[str]:
    """Do what ``args`` ask; returns the lines to print."""
    from metacal.metrics import ece, error_rate

    from .export import export_format
    from .model import load

    name, out, export = check_request(args)
    device = check_device(args.device)
    model = load(args.run, calibrator=None, device=device)
    lines = []
    if out is not None:
        raw, y = read_inputs(args.inputs, model.num_classes)
        x = model.inputs(raw)  # shape and dtype checked before any calibrator is fitted
        probs = model.use_calibrator(name).calibrate(model.network_logits(x))
        write_predictions(out, probs, model.classes, name)
        line = f"wrote {tuple(probs.shape)} probabilities ({name or 'uncalibrated'}) and labels_pred to {out}"
        if y is not None:
            labels = torch.as_tensor(y, dtype=torch.int64)
            line += (f"; error {100 * float(error_rate(probs, labels)):.2f}%, "
                     f"ECE {100 * float(ece(probs, labels)):.2f}% (15 bins)")
        lines.append(line)
    if export is not None:
        model.use_calibrator(name).export(export)
        shape = ", ".join(str(v) for v in model.input_spec.input_shape)
        kind = "float32 in [0, 1], channels first" if model.input_spec.kind == "image" else "float32"
        lines.append(f"wrote {export_format(export)} model ({name or 'uncalibrated'}) to {export}: inputs "
                     f"(N, {shape}) {kind} → N×{model.num_classes} float64 probabilities")
    return lines


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    try:
        lines = predict(build_parser(prog).parse_args(argv))
    except (InputError, ValueError, FileNotFoundError, OSError, UnknownNameError) as exc:
        print(f"{prog}: error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


def console_main() -> int:
    """Entry point of the ``metacal-predict`` console script."""
    return main(prog="metacal-predict")


if __name__ == "__main__":
    sys.exit(main())
