"""The run directory: where one training run keeps everything it produces.

Layout::

    run_dir/
      config.yaml            fully resolved config
      tensorboard/           TensorBoard event files
      checkpoints/latest/    accelerate save_state at the end of the last finished epoch
      checkpoints/best/      the same for the epoch with the best validation score
      predictions/{val,test}.npz   logits + labels of the selected (best) epoch (evaluate-CLI format)
      reliability.png        reliability diagram of the selected epoch on the test set
      metrics.json           {"epoch", "val", "test", "test_after_ts"} of the selected epoch
      history.json           per-epoch train/val/test numbers (curves)

An existing non-empty directory is never reused unless ``overwrite`` (wipes it) or ``resume``.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def tensorboard(self) -> Path:
        return self.root / "tensorboard"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def latest(self) -> Path:
        return self.checkpoints / "latest"

    @property
    def best(self) -> Path:
        return self.checkpoints / "best"

    @property
    def predictions(self) -> Path:
        return self.root / "predictions"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.json"

    @property
    def history(self) -> Path:
        return self.root / "history.json"

    @property
    def reliability(self) -> Path:
        return self.root / "reliability.png"


def default_run_dir(config_path: str | Path | None, parent: str | Path = "runs") -> Path:
    """``runs/<config-stem>-<YYYYmmdd-HHMMSS>``."""
    stem = Path(config_path).stem if config_path else "run"
    return Path(parent) / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def has_checkpoint(root: str | Path) -> bool:
    return (RunPaths(Path(root)).latest / "train_state.json").is_file()


def prepare_run_dir(root: str | Path, resume: bool = False, overwrite: bool = False) -> RunPaths:
    """Check the directory may be used, create it, and return its paths.

    * new or empty directory: created;
    * ``resume``: must hold a finished epoch (checkpoints/latest) — kept as is;
    * ``overwrite``: an existing directory is deleted first;
    * otherwise an existing non-empty directory is an error (FileExistsError).
    """
    if resume and overwrite:
        raise ValueError("--resume and --overwrite exclude each other")
    path = Path(root)
    if resume:
        if not has_checkpoint(path):
            raise FileNotFoundError(
                f"cannot resume: {path} holds no checkpoint (expected {RunPaths(path).latest}/train_state.json)"
            )
        return RunPaths(path)
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"run directory {path} exists and is not a directory")
    if path.is_dir() and any(path.iterdir()):
        if not overwrite:
            raise FileExistsError(
                f"run directory {path} already exists; pass --resume to continue it or --overwrite to replace it"
            )
        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)
    return RunPaths(path)
