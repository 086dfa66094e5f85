"""Run scripts/train.py with one fault of tests/train/faults.py installed (a real signal to this process):

    python tests/train/hooked_train.py kill_at_step=15 --config c.yaml --run-dir runs/x
    python tests/train/hooked_train.py sigterm_at_step=20 ...
    python tests/train/hooked_train.py kill_in_checkpoint=written:3 ...     # STAGE:N-th save

The first argument names the fault; the rest go to the trainer unchanged.
"""

from __future__ import annotations

import runpy
import signal
import sys
from pathlib import Path

import faults
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "train.py"


def install(monkeypatch: pytest.MonkeyPatch, fault: str) -> None:
    """Install ``fault`` (``kill_at_step=G``, ``sigterm_at_step=G`` or ``kill_in_checkpoint=STAGE:N``)."""
    name, _, value = fault.partition("=")
    stage, _, save = value.partition(":")
    if name in ("kill_at_step", "sigterm_at_step") and value.isdigit():
        signum = signal.SIGKILL if name == "kill_at_step" else signal.SIGTERM
        faults.after_step(monkeypatch, int(value), faults.signal_self(signum))
    elif name == "kill_in_checkpoint" and stage in faults.STAGES and save.isdigit():
        faults.in_checkpoint(monkeypatch, stage, int(save), faults.signal_self(signal.SIGKILL))
    else:
        sys.exit(f"hooked_train.py: unknown fault {fault!r}; expected kill_at_step=G, sigterm_at_step=G or "
                 f"kill_in_checkpoint=STAGE:N with STAGE in {', '.join(faults.STAGES)}")


if __name__ == "__main__":
    install(pytest.MonkeyPatch(), sys.argv[1])
    sys.argv = [str(SCRIPT), *sys.argv[2:]]
    runpy.run_path(str(SCRIPT), run_name="__main__")
