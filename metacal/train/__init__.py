"""The trainer: YAML config → run directory with checkpoints, TensorBoard logs, predictions and metrics.

Command line: ``python scripts/train.py --config configs/quickstart.yaml`` (see :mod:`metacal.train.cli`).
From Python::

    from metacal.train import load_config, make_accelerator, prepare_run_dir, train
    cfg = load_config("configs/quickstart.yaml", ["schedule.epochs=2"])
    result = train(cfg, prepare_run_dir("runs/try"))      # result.metrics == metrics.json

Own datasets and network: ``metacal.fit(model, train, val=..., test=..., config=..., overrides=[...])``
(module ``fit``; not re-exported here, so that ``metacal.train.fit`` stays the module).

Modules: ``schema``, ``config`` and ``value_ranges`` (the sections' keys; the loader, which asks each choice list
of its owner; the numbers' ranges), ``components`` (the one builder: config → data, model, loss, optimiser,
schedule, loaders, the iteration), ``cli`` (exit codes 0 / 1 diverged / 2 bad input / 75 preempted / 130 Ctrl-C),
``run_dir``, ``fit`` (own datasets and network from Python), ``setup`` (the run assembled before the first epoch),
``loop`` (the epoch loop), ``epoch_eval`` (an epoch's predictions and metrics), ``outputs`` (metrics.json & co.),
``tb_logging``, ``checkpoint`` (crash-safe checkpoint scheme), ``compat`` (may a config resume a checkpoint),
``preemption`` (SIGTERM and Ctrl-C), ``process_settings`` (threads, determinism, the CPU allocator).
Crash-safe writes: :mod:`metacal.atomic_io`.
"""

from .checkpoint import CheckpointError
from .config import Config, ConfigError, load_config
from .loop import RunResult, TrainingDivergedError, make_accelerator, train
from .preemption import EXIT_INTERRUPTED, EXIT_PREEMPTED, Preempted
from metacal.run.layout import RunPaths

from .run_dir import prepare_run_dir

__all__ = ["CheckpointError", "Config", "ConfigError", "EXIT_INTERRUPTED", "EXIT_PREEMPTED", "Preempted", "RunPaths",
           "RunResult", "TrainingDivergedError", "load_config", "make_accelerator", "prepare_run_dir", "train"]
