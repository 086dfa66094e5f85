"""A finished run's network, rebuilt from its directory: the resolved config.yaml, the data it was trained on
and the selected epoch's weights (``checkpoints/best``), on CPU or GPU, with nothing retrained.

:func:`load_run` is what evaluating a run on shifted or new data starts from (:mod:`metacal.shift.evaluate`);
:func:`build_network` (the network alone, sized by the bundle or by the run's predictor.json) is also what
:func:`metacal.load` starts from (:mod:`metacal.predict.model`), which needs no data.
Logits come from the network in eval mode over batches of the run's ``data.eval_batch_size``, in float32, as
the trainer computed the run's own ``predictions/*.npz``: on the device that trained an fp32 run they are the
same numbers (tests/shift/test_shift_evaluate.py checks the clean test set against predictions/test.npz).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from metacal.predictions import Predictions, load_predictions


class RunError(ValueError):
    """The directory is not a run that can be evaluated (one line, exit code 2 on the command line)."""


@dataclass
class LoadedRun:
    """A run's config, data bundle, network (eval mode, on ``device``) and validation predictions."""

    root: Path
    cfg: Any  # metacal.train.config.Config
    bundle: Any  # metacal.data.DataBundle
    model: nn.Module
    device: torch.device
    val: Predictions  # predictions/val.npz: what the run's own temperature scaling was fitted on

    def logits(self, inputs: torch.Tensor) -> torch.Tensor:
        """float32 logits (CPU) of model-ready ``inputs`` (N, *input_shape), in batches of the run's
        ``data.eval_batch_size``."""
        return batched_logits(self.model, inputs, int(self.cfg.data.eval_batch_size), self.device,
                              self.bundle.num_classes)

    def predictions(self, inputs: torch.Tensor, labels: torch.Tensor) -> Predictions:
        return Predictions.from_logits(self.logits(inputs), labels.long())


@torch.no_grad()
def batched_logits(model: nn.Module, inputs: torch.Tensor, batch_size: int, device: torch.device,
                   num_classes: int) -> torch.Tensor:
    """float32 logits (CPU) of ``model`` on model-ready ``inputs``, in batches of ``batch_size`` on ``device``."""
    out = [model(batch.to(device)).float().cpu() for batch in torch.split(inputs, batch_size)]
    return torch.cat(out) if out else torch.empty(0, num_classes)


def check_run_dir(root: str | Path) -> Path:
    """The run directory, or a one-line :class:`RunError` saying what is missing."""
    root = Path(root)
    if not root.is_dir():
        raise RunError(f"{root} is not a directory (pass a run directory, runs/<name>)")
    if not (root / "config.yaml").is_file():
        raise RunError(f"{root} has no config.yaml: not a metacal run directory")
    checkpoints = root / "checkpoints"
    if not checkpoints.is_dir() or not any(p.name.startswith("ckpt-") for p in checkpoints.iterdir()):
        raise RunError(f"{root} has no checkpoint to evaluate (it was trained with run.save_checkpoints=false, or "
                       "did not finish an epoch); retrain it with checkpoints on")
    if not (root / "predictions" / "val.npz").is_file():
        raise RunError(f"{root} has no predictions/val.npz: the run did not finish (resume it with --resume)")
    return root


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def resolve_device(device: str | torch.device | None, flag: str | None = None) -> torch.device:
    """``device`` as a torch.device (None: CUDA when available, else the CPU). ValueError in one line for a name
    torch does not know or a CUDA device this machine lacks, worded for the command-line ``flag`` when given."""
    if device is None:
        return default_device()
    said, use = (f"{flag} {device}", f"{flag} cpu") if flag else (f"device={str(device)!r}", "device='cpu'")
    try:
        where = torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        raise ValueError(f"{said} is not a device (cpu, cuda, cuda:0)") from None
    if where.type == "cuda" and (not torch.cuda.is_available() or (where.index or 0) >= torch.cuda.device_count()):
        raise ValueError(f"{said}: no such CUDA device on this machine; use {use}")
    return where


def load_run(root: str | Path, device: str | torch.device | None = None) -> LoadedRun:
    """Rebuild the run in ``root`` (module docstring). One-line errors (:class:`RunError`, ConfigError,
    FileNotFoundError, DataNotFoundError) for a directory that is not a finished run with a checkpoint, a
    config that names data or a model from Python (:func:`metacal.fit`), or data that is not on this machine."""
    from metacal.train import components
    from metacal.train.config import load_saved_config

    root = check_run_dir(root)
    cfg = load_saved_config(root / "config.yaml")
    components.check_buildable(cfg, how=f"metacal.fit(...) again; {root} cannot be rebuilt from its config")
    bundle = components.build_data(cfg)
    device = resolve_device(device)
    model = build_network(root, cfg, bundle, device)
    return LoadedRun(root, cfg, bundle, model, device, load_predictions(root / "predictions" / "val.npz"))


def build_network(root: Path, cfg: Any, shapes: Any, device: torch.device) -> nn.Module:
    """The run's network by ``model.name`` / ``model.options`` for ``shapes`` (a data bundle, or the run's
    :class:`metacal.run.predictor_info.PredictorInfo`: ``num_classes``, ``in_channels``, ``input_shape``), with the
    weights of ``checkpoints/best`` (the selected epoch, manifest-checked), on ``device`` in eval mode."""
    from metacal.train import components
    from metacal.train.init_weights import load_initial_weights

    model = components.build_model(cfg, shapes, load_checkpoint=False)
    load_initial_weights(model, root)
    return model.to(device).eval()
