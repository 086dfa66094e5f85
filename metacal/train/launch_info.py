"""What a run actually runs on: processes, device, distributed backend — said once at the start, kept in
``run_dir/runtime.json``, and checked against what the launcher was asked for.

Why the check: ``accelerate launch --num_processes 2 scripts/train.py`` (with or without ``--cpu``) on a
machine without GPUs uses accelerate's *simple* launcher, which starts ONE process and only exports
``MASTER_ADDR``/``MASTER_PORT`` (because more than one was asked for) and ``ACCELERATE_*`` settings; no
``WORLD_SIZE`` reaches the script, so the run silently trains alone. The number asked for is not in the
environment; it is read from the launcher's command line (the parent process, ``/proc/<ppid>/cmdline``,
Linux) when possible. ``torchrun --nproc_per_node N`` does start N CPU processes (gloo), so the warning
names that command.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from metacal.atomic_io import write_text_atomic
from metacal.machine import cpu_kernels, cpu_model

RUNTIME_JSON = "runtime.json"
_COUNT_FLAGS = ("--num_processes", "--num-processes")


def parent_argv() -> list[str]:
    """The parent process's command line ([] where /proc is unavailable or unreadable)."""
    try:
        raw = Path(f"/proc/{os.getppid()}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _count_in(argv: Sequence[str]) -> int | None:
    """``--num_processes N`` / ``--num-processes=N`` of a launcher's command line, if present."""
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if flag in _COUNT_FLAGS:
            value = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            return int(value) if value.isdigit() else None
    return None


def requested_processes(env: Mapping[str, str], launcher_argv: Sequence[str]) -> int | None:
    """How many processes the launcher was asked for, when that says more than one; 0 when more than one was
    asked for but the number is unknown; None when nothing says more than one.

    ``WORLD_SIZE`` (torchrun, accelerate's multi-process launchers) is the count itself. Without it, the
    ``ACCELERATE_*`` variables mark accelerate's single-process launcher: its ``--num_processes`` is in the
    launcher's command line, and ``MASTER_ADDR`` alone shows that it was more than one."""
    world = env.get("WORLD_SIZE", "")
    if world.isdigit():
        return int(world) if int(world) > 1 else None
    if not any(key in env for key in ("ACCELERATE_USE_CPU", "ACCELERATE_MIXED_PRECISION")):
        return None
    count = _count_in(launcher_argv)
    if count is not None:
        return count if count > 1 else None
    return 0 if "MASTER_ADDR" in env else None


def _this_command(argv: Sequence[str]) -> str:
    """The script (or ``-m module``) and its arguments, as torchrun would take them."""
    if not argv:
        return "scripts/train.py …"
    first = argv[0]
    if Path(first).name == "__main__.py":  # python -m package
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        name = spec.name.removesuffix(".__main__") if spec is not None else "metacal.train"
        first = f"-m {name}"
    else:
        try:
            first = os.path.relpath(first)
        except ValueError:
            pass
    return " ".join([first, shlex.join(argv[1:])]).strip()


def mismatch_warning(got: int, asked: int | None, argv: Sequence[str]) -> str | None:
    """The one-line warning when the launcher asked for more processes (``asked``, from
    :func:`requested_processes`) than the run got (else None); ``argv``: this script's command line."""
    if asked is None or (asked and asked <= got):
        return None
    n = str(asked) if asked else "N"
    what = f"{asked} processes" if asked else "several processes"
    return (f"warning: the launcher asked for {what} but this run has {got} (accelerate launch starts a single "
            f"process when it finds no GPUs); on CPU use: torchrun --nproc_per_node {n} {_this_command(argv)}")


def describe(accelerator) -> dict[str, Any]:
    """Processes, device and distributed backend of this run (the same on every process)."""
    from metacal import distributed

    backend = getattr(accelerator.state, "backend", None)
    if backend is None:
        backend = distributed.process_group_backend()
    kind = accelerator.distributed_type
    return {"num_processes": accelerator.num_processes, "device": str(accelerator.device),
            "distributed_type": getattr(kind, "value", str(kind)), "backend": backend,
            "mixed_precision": accelerator.mixed_precision}


def banner(info: Mapping[str, Any]) -> str:
    """``runtime: 2 processes, device cpu, distributed backend gloo (MULTI_CPU)``."""
    n = info["num_processes"]
    procs = f"{n} process" + ("es" if n != 1 else "")
    how = (f"distributed backend {info['backend']} ({info['distributed_type']})" if info["backend"]
           else "no distributed backend")
    return f"runtime: {procs}, device {info['device']}, {how}"


def start(accelerator, env: Mapping[str, str] | None = None, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Print the banner and, if needed, the mismatch warning (main process only); return what
    :func:`record` writes: the description plus the processes asked for and the warning."""
    info = describe(accelerator)
    asked = requested_processes(os.environ if env is None else env, parent_argv())
    warning = mismatch_warning(info["num_processes"], asked, sys.argv if argv is None else argv)
    info.update(requested_processes=asked or None, warning=warning)
    if accelerator.is_main_process:
        print(banner(info), flush=True)
        if warning is not None:
            print(warning, file=sys.stderr, flush=True)
    return info


def record(path: Path, info: Mapping[str, Any], resumed: bool) -> None:
    """Append this start (first run or resume) to ``runtime.json``: ``{"sessions": [...]}``, newest last."""
    import accelerate
    import torch

    sessions: list = []
    try:
        sessions = list(json.loads(Path(path).read_text())["sessions"])
    except (OSError, ValueError, KeyError, TypeError):
        pass  # none yet (or unreadable: start the list again rather than fail a run over a log file)
    sessions.append({**info, "resumed": resumed, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                     "torch": torch.__version__, "accelerate": accelerate.__version__,
                     "python": sys.version.split()[0], "cpu": cpu_model(), "cpu_kernels": cpu_kernels()})
    write_text_atomic(Path(path), json.dumps({"sessions": sessions}, indent=2) + "\n")
