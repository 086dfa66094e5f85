"""metacal.train.preemption in process: which signal was asked for, its exit code, the second Ctrl-C, and the
agreement across ranks (two stand-in processes whose sum adds another rank's request)."""

from __future__ import annotations

import os
import signal
from types import SimpleNamespace

import torch

from metacal.train import preemption


def test_ctrl_c_is_recorded_and_hands_sigint_back_to_the_default(capfd):
    before = signal.getsignal(signal.SIGINT)
    with preemption.handle_stop_signals():
        assert not preemption.stop_requested()
        os.kill(os.getpid(), signal.SIGINT)  # handled at the next bytecode: no KeyboardInterrupt
        assert preemption.stop_requested() and preemption.requested_signal() == signal.SIGINT
        assert signal.getsignal(signal.SIGINT) is signal.SIG_DFL  # a second Ctrl-C kills at once
        os.kill(os.getpid(), signal.SIGTERM)  # a later SIGTERM does not change what is reported
        assert preemption.requested_signal() == signal.SIGINT
    assert signal.getsignal(signal.SIGINT) is before and not preemption.stop_requested()
    assert "press Ctrl-C again to abort at once" in capfd.readouterr().err


def test_exit_codes_and_labels():
    term, interrupt = preemption.Preempted("x"), preemption.Preempted("y", signal.SIGINT)
    assert (term.exit_code, term.label) == (75, "preempted")
    assert (interrupt.exit_code, interrupt.label) == (130, "interrupted")
    assert preemption.signal_name(signal.SIGINT) == "Ctrl-C (SIGINT)"


def two_processes(monkeypatch, other_rank: list[float]):
    """Two processes; the sum over them adds the other rank's [SIGTERM, SIGINT] request counts in place."""
    def add_other_rank(tensors):
        for t in tensors:
            t.add_(torch.tensor(other_rank))

    monkeypatch.setattr(preemption, "world_size", lambda: 2)
    monkeypatch.setattr(preemption, "sum_over_processes", add_other_rank)
    return SimpleNamespace(device=torch.device("cpu"))


def test_ranks_agree_on_the_signal(monkeypatch):
    with preemption.handle_stop_signals():
        assert not preemption.stop_requested(two_processes(monkeypatch, [0.0, 0.0]))
        assert preemption.stop_requested(two_processes(monkeypatch, [0.0, 1.0]))  # only the other rank got Ctrl-C
        assert preemption.requested_signal() == signal.SIGINT
        assert preemption.stop_requested(two_processes(monkeypatch, [1.0, 1.0]))  # ranks disagree: SIGTERM wins
        assert preemption.requested_signal() == signal.SIGTERM
        os.kill(os.getpid(), signal.SIGINT)
        assert preemption.stop_requested(two_processes(monkeypatch, [1.0, 0.0]))  # this rank's own signal first
        assert preemption.requested_signal() == signal.SIGINT
