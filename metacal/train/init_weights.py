"""``model.checkpoint``: the local weights a run starts from (never downloaded).

PATH may be

* a state-dict file: ``torch.save(model.state_dict(), PATH)`` (torchvision's ``.pth`` files) or ``.safetensors``;
* a metacal checkpoint directory (``runs/<name>/checkpoints/ckpt-…``): its ``model.safetensors``, after the
  manifest check of :func:`metacal.train.checkpoint.verify_checkpoint`;
* a metacal run directory: the checkpoint ``checkpoints/best`` names (the selected epoch), else the newest.

The tensors are checked and copied by :func:`metacal.models.load_weights` (missing keys, unexpected keys and
shape mismatches are one-line errors; ``model.checkpoint_skip`` prefixes stay as initialised). On
``--resume`` the run's own checkpoint restores the weights, so PATH is not read again.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from torch import nn

from metacal.models.weights import WeightsMismatchError, load_weights, read_state_dict

from .checkpoint import find_latest, verify_checkpoint

MODEL_FILE = "model.safetensors"


def weights_file(path: str | Path) -> Path:
    """The state-dict file PATH stands for (module docstring)."""
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(2, "model.checkpoint does not exist", str(path))
    if path.is_file():
        return path
    checkpoints = path / "checkpoints"
    if checkpoints.is_dir():  # a run directory
        best = checkpoints / "best"
        pointer = checkpoints / "best.txt"
        if best.is_dir():
            path = best.resolve()
        elif pointer.is_file():
            path = checkpoints / pointer.read_text().strip()
        else:
            latest = find_latest(checkpoints)
            if latest is None:
                raise WeightsMismatchError(f"model.checkpoint {path} is a run directory without a complete checkpoint")
            path = latest
    if not (path / MODEL_FILE).is_file():
        raise WeightsMismatchError(f"model.checkpoint {path} is a directory without {MODEL_FILE} (give a state-dict "
                                   "file, a metacal checkpoint directory or a metacal run directory)")
    verify_checkpoint(path)
    return path / MODEL_FILE


def load_initial_weights(model: nn.Module, path: str | Path, skip: Sequence[str] = ()) -> Path:
    """Load PATH (module docstring) into ``model``; returns the file read."""
    file = weights_file(path)
    load_weights(model, read_state_dict(file), skip=skip, source=str(file))
    return file
