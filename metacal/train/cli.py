"""``scripts/train.py`` / ``python -m metacal.train`` / ``metacal-train``: train one model from a YAML config.

    python -m metacal.train --config configs/quickstart.yaml [--set optim.lr=0.05 ...]
                            [--run-dir DIR] [--resume] [--overwrite]
    python -m metacal.train --config configs/quickstart.yaml [--set ...] --print-config

``--print-config`` prints the resolved config as YAML (its bases, the file's own keys, ``--set``, then the defaults:
what config.yaml would hold) and exits 0; nothing is trained, no data is read and nothing is written.

Multi-process: ``torchrun --nproc_per_node 2 scripts/train.py ...`` (CPU: gloo) or ``accelerate launch``.

Exit codes (also in ``--help``): 0 finished; 1 diverged (NaN/inf loss, meta objective, γ or weights —
the message names the step; the last good checkpoint stays); 2 bad input (config typo or wrong type,
unknown name, missing data, unusable run directory, missing/corrupt/incompatible checkpoint) — one
line on stderr, nothing deleted; 75 preempted (SIGTERM: a checkpoint of the current step was saved;
rerun with ``--resume``); 3 out of accelerator memory (the line names the batch sizes, the device and its
memory, and the setting to lower; the last checkpoint stays); 130 interrupted (Ctrl-C: the same, a second
Ctrl-C aborts at once). Bad input
never prints a traceback. Under ``torchrun`` / ``accelerate launch`` the launcher exits 1 and reports each
process's code itself; the one line is said once, by rank 0, before the launcher's report (:func:`_report`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from metacal.data.errors import DataFormatError
from metacal.registry import UnknownNameError
from metacal.wording import CLI, speaking

from .checkpoint import CheckpointError, find_latest
from .compat import checkpoint_to_resume, saved_config
from .config import ConfigError, load_config, to_dict, to_yaml
from .out_of_memory import EXIT_OUT_OF_MEMORY, OutOfDeviceMemory
from .preemption import EXIT_INTERRUPTED, EXIT_PREEMPTED, Preempted, handle_stop_signals
from metacal.run.layout import RunPaths

from .run_dir import default_run_dir, remove_if_empty, shared_run_dir
from .run_summary import finished_note

EXIT_OK, EXIT_DIVERGED, EXIT_BAD_INPUT = 0, 1, 2
# OSError: FileNotFound, Permission…; DataFormatError: a user's image that stops decoding after the build-time check
USER_ERRORS = (ConfigError, CheckpointError, UnknownNameError, DataFormatError, OSError)
LAUNCHER_WAIT = 20.0  # seconds a rank other than 0 waits, after a failure, for the launcher to stop it (_report)

EPILOG = f"""\
exit codes:
  {EXIT_OK}   finished (metrics.json written), or --resume of a run that is already finished (nothing done)
  {EXIT_DIVERGED}   diverged: non-finite loss/γ/weights; the message names the step, the last good checkpoint stays
  {EXIT_BAD_INPUT}   bad input: config, data, run directory or checkpoint; one line on stderr, nothing deleted;
      also a checkpoint that cannot be written (full disk): its partial files go, the previous one stays
  {EXIT_OUT_OF_MEMORY}   out of GPU memory in a step or an evaluation: the line names the batch sizes, the device
      and its memory, and the setting to lower; the last checkpoint stays
  {EXIT_PREEMPTED}  preempted by SIGTERM: a checkpoint of the current step was saved; rerun with --resume
  {EXIT_INTERRUPTED} interrupted by Ctrl-C: the same (a second Ctrl-C aborts at once; the last checkpoint stays)

checkpoints: every epoch end, plus every run.checkpoint_every_steps global steps (0 = off). A run killed at
any moment (even mid-epoch) continues with --run-dir DIR --resume and ends with the same metrics and weights.
examples: configs/README.md"""


def _prog() -> str:
    """How the trainer was started: ``python -m metacal.train``, ``metacal-train`` or ``train.py``."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "train.py"
    return "python -m metacal.train" if name == "__main__.py" else name


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=_prog(), description="Train a calibrated classifier from a YAML config.",
                                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", help="YAML config (may name a 'base:' file); optional with --resume")
    p.add_argument("--set", dest="overrides", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                   help="dotted overrides: --set optim.lr=0.05 meta.objective=dece (the flag may repeat)")
    p.add_argument("--run-dir", help="output directory (default: runs/<config-stem>-<timestamp>)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --run-dir from its newest complete checkpoint (keys that fix the "
                        "architecture or saved state may not change)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --run-dir (its content is deleted only once the new run has started)")
    p.add_argument("--print-config", action="store_true",
                   help="print the resolved config as YAML (bases, the file's keys, --set, defaults: what the run's "
                        "config.yaml would hold) and exit; trains nothing, reads no data, writes nothing (with "
                        "--resume --run-dir: the config the resume would use)")
    return p.parse_args(argv)


def resolve_config(args: argparse.Namespace):
    """The run's config (a --resume without --config: the checkpoint's own, plus --set); a config whose data
    and model came from Python (metacal.fit) is refused in one line, it names nothing the CLI can build."""
    from .components import check_buildable

    cfg = _resolve_config(args)
    if args.resume:
        check_buildable(cfg, f"metacal.fit(model, train, ..., run_dir={args.run_dir!r}, resume=True) continues it")
    else:
        check_buildable(cfg, f"metacal.fit(model, train, ..., config={args.config!r})")
    return cfg


def _resolve_config(args: argparse.Namespace):
    if args.resume:
        if not args.run_dir:
            raise ConfigError("--resume needs --run-dir (the run to continue)")
        root = Path(args.run_dir)
        latest = checkpoint_to_resume(root)
        if args.config is None:  # the checkpoint's own resolved config, plus --set overrides
            return load_config(None, args.overrides, base=to_dict(saved_config(root, latest)))
    if args.config is None:
        raise ConfigError("--config is required (e.g. --config configs/quickstart.yaml)")
    return load_config(args.config, args.overrides)


def _prepare_paths(args: argparse.Namespace, accelerator) -> RunPaths:
    """The main process checks/creates the run directory; every process gets the same path or error."""
    root = Path(args.run_dir) if args.run_dir else default_run_dir(args.config)
    return shared_run_dir(root, accelerator, resume=args.resume, overwrite=args.overwrite,
                          user_errors=USER_ERRORS + (ValueError,))


def _report(accelerator, message: str) -> None:
    """One line on stderr, said once when a launcher started several processes: by rank 0. The others wait
    for the launcher to stop them, which it does once rank 0 has exited (every rank reads the same config and
    data, so they fail alike), so the line is what the user reads first, before the launcher's report; a rank
    still running after :data:`LAUNCHER_WAIT` seconds met a fault of its own and says it."""
    main = accelerator.is_main_process if accelerator is not None else os.environ.get("RANK", "0") == "0"
    if not main:
        try:
            time.sleep(LAUNCHER_WAIT)
        except KeyboardInterrupt:  # Ctrl-C reaches every rank; rank 0 says what happened
            return
    print(" ".join(message.split()), file=sys.stderr, flush=True)


def _describe(err: BaseException) -> str:
    if isinstance(err, OSError) and not isinstance(err, (FileNotFoundError, FileExistsError, PermissionError)):
        return f"{err.strerror or type(err).__name__}: {err.filename or ''}".rstrip(": ")
    if isinstance(err, OSError) and err.filename is not None and err.strerror:
        return f"{err.strerror}: {err.filename}"
    return str(err)


def main(argv: list[str] | None = None) -> int:
    """The command line: its messages name settings as flags (``--resume``, ``--set key=value``)."""
    with speaking(CLI):
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    args = parse_args(argv)
    paths = None
    from .loop import TrainingDivergedError, make_accelerator, train_in_dir

    accelerator = None
    existed = bool(args.run_dir) and Path(args.run_dir).exists()
    try:
        if args.print_config:
            print(to_yaml(resolve_config(args)), end="")
            return EXIT_OK
        with handle_stop_signals():
            finished = args.resume and args.run_dir and finished_note(Path(args.run_dir), lambda: resolve_config(args))
            if finished:  # --resume of a run that already finished: say so, train nothing
                if os.environ.get("RANK", "0") == "0":
                    print(finished)
                return EXIT_OK
            cfg = resolve_config(args)
            accelerator = make_accelerator(cfg)
            paths = _prepare_paths(args, accelerator)
            train_in_dir(cfg, paths, accelerator, resume=args.resume, overwrite=args.overwrite)
    except USER_ERRORS as err:
        if paths is not None and not existed and (accelerator is None or accelerator.is_main_process):
            remove_if_empty(paths.root)  # created by this call and still empty: leave no trace
        _report(accelerator, f"error: {_describe(err)}")
        return EXIT_BAD_INPUT
    except TrainingDivergedError as err:
        latest = find_latest(paths.checkpoints) if paths is not None else None
        where = f"; last good checkpoint: {latest}" if latest is not None else "; no checkpoint was saved"
        _report(accelerator, f"error: {err}{where}")
        return EXIT_DIVERGED
    except OutOfDeviceMemory as err:
        latest = find_latest(paths.checkpoints) if paths is not None else None
        where = f"; last checkpoint: {latest}" if latest is not None else "; no checkpoint was saved"
        _report(accelerator, f"error: {err}{where}")
        return EXIT_OUT_OF_MEMORY
    except Preempted as err:
        _report(accelerator, f"{err.label}: {err}")
        return err.exit_code
    finally:
        if accelerator is not None:
            accelerator.end_training()
    return EXIT_OK
