"""Run scripts/train.py with one fault of tests/train/faults.py installed (a real signal to this process):

    python tests/train/hooked_train.py kill_at_step=15 --config c.yaml --run-dir runs/x
    python tests/train/hooked_train.py sigterm_at_step=20 ...
    python tests/train/hooked_train.py sigint_at_step=6 ...                 # Ctrl-C; sigint_twice_at_step: two
    python tests/train/hooked_train.py kill_in_checkpoint=written:3 ...     # STAGE:N-th save
    torchrun --nproc_per_node 2 tests/train/hooked_train.py kill_rank_at_step=1:7 ...  # only rank 1 dies

The first argument names the fault; the rest go to the trainer unchanged.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
from pathlib import Path

import faults
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "train.py"


def install(monkeypatch: pytest.MonkeyPatch, fault: str) -> None:
    """Install ``fault`` (``kill_at_step=G``, ``sigterm_at_step=G``, ``sigint_at_step=G``,
    ``sigint_twice_at_step=G``, ``kill_in_checkpoint=STAGE:N`` or ``kill_rank_at_step=R:G``: SIGKILL after
    global step G in the process whose ``RANK`` (set by torchrun) is R; the other processes run unhooked)."""
    name, _, value = fault.partition("=")
    stage, _, save = value.partition(":")
    rank, _, rank_step = value.partition(":")
    at_step = {"kill_at_step": signal.SIGKILL, "sigterm_at_step": signal.SIGTERM, "sigint_at_step": signal.SIGINT}
    if name in at_step and value.isdigit():
        faults.after_step(monkeypatch, int(value), faults.signal_self(at_step[name]))
    elif name == "sigint_twice_at_step" and value.isdigit():  # Ctrl-C, then Ctrl-C again before the step ends
        twice = faults.signal_self(signal.SIGINT)
        faults.after_step(monkeypatch, int(value), lambda: (twice(), twice()))
    elif name == "kill_in_checkpoint" and stage in faults.STAGES and save.isdigit():
        faults.in_checkpoint(monkeypatch, stage, int(save), faults.signal_self(signal.SIGKILL))
    elif name == "kill_rank_at_step" and rank.isdigit() and rank_step.isdigit():
        if int(os.environ.get("RANK", "0")) == int(rank):
            faults.after_step(monkeypatch, int(rank_step), faults.signal_self(signal.SIGKILL))
    else:
        sys.exit(f"hooked_train.py: unknown fault {fault!r}; expected kill_at_step=G, sigterm_at_step=G, "
                 "sigint_at_step=G, sigint_twice_at_step=G, kill_rank_at_step=R:G or "
                 f"kill_in_checkpoint=STAGE:N with STAGE in {', '.join(faults.STAGES)}")


if __name__ == "__main__":
    install(pytest.MonkeyPatch(), sys.argv[1])
    sys.argv = [str(SCRIPT), *sys.argv[2:]]
    runpy.run_path(str(SCRIPT), run_name="__main__")
