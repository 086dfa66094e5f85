"""Out of accelerator memory in a step or an evaluation (``torch.cuda.OutOfMemoryError``, raised here on the CPU
by a patched step / prediction): exit code 3 and one line naming the batch sizes, the device and the setting to
lower; the newest checkpoint is the one saved before, untouched."""

from __future__ import annotations

import json

import torch

from metacal.meta import PlainStep
from metacal.train.cli import EPILOG
from metacal.train.out_of_memory import EXIT_OUT_OF_MEMORY


def test_torch_builds_the_cuda_error_without_cuda():
    assert issubclass(torch.cuda.OutOfMemoryError, RuntimeError)


def failing_step(monkeypatch, at_call: int) -> None:
    """PlainStep.step raises torch.cuda.OutOfMemoryError on its ``at_call``-th call (1-based)."""
    original, calls = PlainStep.step, []

    def step(self, inputs, targets):
        calls.append(1)
        if len(calls) == at_call:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        return original(self, inputs, targets)

    monkeypatch.setattr(PlainStep, "step", step)


def test_oom_in_a_step_names_the_batch_sizes_and_keeps_the_checkpoint(write_config, run_cli, tmp_path, monkeypatch):
    config = write_config("ce", {"run": {"checkpoint_every_steps": 4}})
    run_dir = tmp_path / "run"
    failing_step(monkeypatch, at_call=7)  # epoch 1, step 7 of 10; a checkpoint was saved after step 4
    code, _, err = run_cli(["--config", config, "--run-dir", run_dir])
    assert code == EXIT_OUT_OF_MEMORY == 3
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "out of memory on cpu in training at epoch 1, step 7" in err
    assert "data.batch_size=32, data.eval_batch_size=64" in err and "meta.batch_size" not in err
    assert "lower data.batch_size (--set data.batch_size=16)" in err
    latest = run_dir / "checkpoints" / "latest"
    assert "; last checkpoint: " in err and "checkpoints" in err.split("; last checkpoint: ")[1]
    assert json.loads((latest / "train_state.json").read_text())["global_step"] == 4
    assert not (run_dir / "metrics.json").exists()


def test_oom_in_an_evaluation_names_the_eval_batch(write_config, run_cli, tmp_path, monkeypatch):
    import metacal.train.loop as loop

    def predict(*args, **kwargs):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory.")

    monkeypatch.setattr(loop, "predict", predict)
    config = write_config("flgamma", {"loss": {"name": "focal"}, "learner": "gamma_net"})
    code, _, err = run_cli(["--config", config, "--run-dir", tmp_path / "run"])
    assert code == 3 and len(err.strip().splitlines()) == 1, err
    assert "in evaluation at the end of epoch 1" in err and "meta.batch_size=20" in err
    assert "lower data.eval_batch_size (--set data.eval_batch_size=32)" in err and "no checkpoint was saved" in err


def test_the_help_lists_the_exit_code():
    assert "  3   out of GPU memory" in EPILOG
