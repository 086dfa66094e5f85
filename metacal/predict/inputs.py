"""What a user hands to a finished run besides the run (:func:`metacal.evaluate_run`, ``python -m metacal.predict``):
an .npz of inputs ``x`` and labels ``y`` (optionally ``x_ood``), or an OOD set (a name of
:data:`metacal.data.ood_sets.OOD_SETS`, or an .npz of the run's predictions on OOD inputs or of the inputs
themselves), read and checked before anything is computed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from metacal.data.model_inputs import model_inputs
from metacal.data.ood_sets import ood_inputs
from metacal.predictions import LOG_EPS

from .network import LoadedRun, RunError


def ood_logits(run: LoadedRun, ood: str | Path, seed: int) -> tuple[str, torch.Tensor]:
    """(name, logits) of an OOD set: a name of ``OOD_SETS`` run through the network, or an .npz holding the
    network's predictions on OOD inputs (``logits``/``probs``) or the inputs themselves (``x``)."""
    path = Path(ood)
    if path.suffix == ".npz":
        arrays = read_npz(path)
        if "x" in arrays:
            return path.stem, run.logits(model_inputs(run.bundle, arrays["x"]))
        if "logits" in arrays or "probs" in arrays:  # probabilities only: ln p stands for the logits
            logits = torch.as_tensor(arrays["logits"]).double() if "logits" in arrays else \
                torch.as_tensor(arrays["probs"]).double().clamp_min(LOG_EPS).log()
            if logits.dim() != 2 or logits.shape[1] != run.bundle.num_classes:
                raise RunError(f"{path}: OOD predictions must be N×{run.bundle.num_classes} (the run's classes), "
                               f"got {tuple(logits.shape)}")
            return path.stem, logits
        raise RunError(f"{path} holds neither 'x' (OOD inputs) nor 'logits'/'probs' (the run's predictions on them)")
    return str(ood), run.logits(ood_inputs(run.bundle, str(ood), seed))


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an .npz (one-line errors for a missing or unreadable file; no pickles)."""
    if not path.is_file():
        raise FileNotFoundError(2, "no such file", str(path))
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError) as err:
        raise RunError(f"{path} is not a readable .npz file ({str(err).splitlines()[0] if str(err) else err})") from None


def input_arrays(run: LoadedRun, path: Path) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Model-ready ``x``, labels ``y`` and (optional) ``x_ood`` of a user's .npz, every check done first."""
    arrays = read_npz(path)
    missing = [k for k in ("x", "y") if k not in arrays]
    if missing:
        raise RunError(f"{path} lacks {' and '.join(repr(k) for k in missing)}: --inputs needs x (inputs) and y "
                       "(labels), optionally x_ood")
    y = arrays["y"]
    k = run.bundle.num_classes
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise RunError(f"{path}: y must be N integer labels, got {y.dtype} {y.shape}")
    if len(y) and (y.min() < 0 or y.max() >= k):
        raise RunError(f"{path}: labels must lie in 0..{k - 1} (the run has K = {k} classes), got {y.min()}..{y.max()}")
    x = model_inputs(run.bundle, arrays["x"])
    if len(x) != len(y):
        raise RunError(f"{path}: x has {len(x)} samples but y has {len(y)}")
    x_ood = model_inputs(run.bundle, arrays["x_ood"]) if "x_ood" in arrays else None
    return x, torch.as_tensor(y).long(), x_ood
