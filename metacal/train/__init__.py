"""The trainer: YAML config → run directory with checkpoints, TensorBoard logs, predictions and metrics.

Command line: ``python scripts/train.py --config configs/quickstart.yaml`` (see :mod:`metacal.train.cli`).
From Python::

    from metacal.train import load_config, make_accelerator, prepare_run_dir, train
    cfg = load_config("configs/quickstart.yaml", ["schedule.epochs=2"])
    result = train(cfg, prepare_run_dir("runs/try"))      # result.metrics == metrics.json

Modules: ``config`` (schema + loader), ``cli``, ``run_dir``, ``components`` (builders), ``loop`` (the epoch
loop), ``meta_setup`` (γ-Net / learnable-L2 meta step wiring), ``evaluation``, ``tb_logging``, ``checkpoint``.
"""

from .config import Config, ConfigError, load_config
from .loop import RunResult, TrainingDivergedError, make_accelerator, train
from .run_dir import RunPaths, prepare_run_dir

__all__ = ["Config", "ConfigError", "RunPaths", "RunResult", "TrainingDivergedError", "load_config",
           "make_accelerator", "prepare_run_dir", "train"]
