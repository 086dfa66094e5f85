"""``scripts/train.py``: train one model from a YAML config.

    python scripts/train.py --config configs/quickstart.yaml [--set optim.lr=0.05 ...]
                            [--run-dir DIR] [--resume] [--overwrite]

Multi-process: ``torchrun --nproc_per_node 2 scripts/train.py ...`` (CPU: gloo) or ``accelerate launch``.
Bad input (unknown key, wrong type, unknown loss/model/dataset, missing data, existing run dir) → one
line on stderr and exit code 2; a diverging run (NaN/inf) → one line and exit code 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from metacal.registry import UnknownNameError

from .config import ConfigError, load_config
from .run_dir import RunPaths, default_run_dir, has_checkpoint, prepare_run_dir

USER_ERRORS = (ConfigError, UnknownNameError, FileNotFoundError, FileExistsError)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="train.py", description="Train a calibrated classifier from a YAML config.",
                                epilog="examples: configs/README.md")
    p.add_argument("--config", help="YAML config (may name a 'base:' file); optional with --resume")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="dotted override, repeatable: --set optim.lr=0.05 --set meta.objective=dece")
    p.add_argument("--run-dir", help="output directory (default: runs/<config-stem>-<timestamp>)")
    p.add_argument("--resume", action="store_true", help="continue the run in --run-dir from its latest checkpoint")
    p.add_argument("--overwrite", action="store_true", help="delete an existing --run-dir first")
    return p.parse_args(argv)


def resolve_config(args: argparse.Namespace):
    if args.resume:
        if not args.run_dir:
            raise ConfigError("--resume needs --run-dir (the run to continue)")
        if not has_checkpoint(args.run_dir):
            raise FileNotFoundError(f"cannot resume: {args.run_dir} holds no finished epoch (checkpoints/latest)")
        if args.config is None:
            saved = yaml.safe_load(RunPaths(Path(args.run_dir)).config.read_text())
            return load_config(None, args.overrides, base=saved)
    if args.config is None:
        raise ConfigError("--config is required (e.g. --config configs/quickstart.yaml)")
    return load_config(args.config, args.overrides)


def _prepare_paths(args: argparse.Namespace, accelerator) -> RunPaths:
    """The main process checks/creates the run directory; every process gets the same path or error."""
    from accelerate.utils import broadcast_object_list

    payload: list = [None, None]
    if accelerator.is_main_process:
        try:
            root = Path(args.run_dir) if args.run_dir else default_run_dir(args.config)
            payload = [str(prepare_run_dir(root, resume=args.resume, overwrite=args.overwrite).root), None]
        except USER_ERRORS + (ValueError,) as err:
            payload = [None, f"{type(err).__name__}: {err}"]
    if accelerator.num_processes > 1:
        broadcast_object_list(payload)
    if payload[1] is not None:
        kind, _, message = payload[1].partition(": ")
        raise (FileExistsError if kind == "FileExistsError" else FileNotFoundError
               if kind == "FileNotFoundError" else ConfigError)(message)
    return RunPaths(Path(payload[0]))


def _remove_if_empty(path: Path) -> None:
    try:
        if path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    except OSError:
        pass


def _report(accelerator, message: str) -> None:
    """One line on stderr (once, from the main process, when several processes run)."""
    if accelerator is None or accelerator.is_main_process:
        print(message, file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    paths = None
    from .loop import TrainingDivergedError, make_accelerator, train

    accelerator = None
    try:
        cfg = resolve_config(args)
        accelerator = make_accelerator(cfg)
        paths = _prepare_paths(args, accelerator)
        accelerator.print(f"run directory: {paths.root}")
        train(cfg, paths, resume=args.resume, accelerator=accelerator)
    except USER_ERRORS as err:
        if paths is not None and not args.resume and accelerator.is_main_process:
            _remove_if_empty(paths.root)  # created by this call and still empty: leave no trace
        _report(accelerator, f"error: {err}")
        return 2
    except TrainingDivergedError as err:
        where = f"; last good checkpoint: {paths.latest}" if paths is not None and paths.latest.exists() else ""
        _report(accelerator, f"error: {err}{where}")
        return 1
    finally:
        if accelerator is not None:
            accelerator.end_training()
    return 0
