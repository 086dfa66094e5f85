"""Runs that say what they did: the end-of-run summary, metrics.json's ``runtime`` record, no "run directory"
line before a setup error that removes the directory, and ``--resume`` of a finished run."""

from __future__ import annotations

import json

import pytest
from train_tiny import read_metrics

from metacal.train.config import load_config
from metacal.train.run_summary import finished_note

FAST = {"logging": {"tensorboard": False, "reliability_every": 0}, "eval": {"select_by": "nll"}}


@pytest.mark.slow
def test_summary_runtime_and_resume_of_a_finished_run(write_config, run_cli, tmp_path):
    run_dir = tmp_path / "run"
    code, out, err = run_cli(["--config", write_config("tiny", FAST), "--run-dir", run_dir])
    assert code == 0, err
    metrics = read_metrics(run_dir)
    lines = out.splitlines()
    assert lines[0] == "runtime: 1 process, device cpu, no distributed backend"  # the start-of-run banner
    assert lines[1] == f"run directory: {run_dir}"  # printed once the run starts (setup succeeded)
    epoch_lines = [i for i, line in enumerate(lines) if line.startswith("epoch ")]
    assert len(epoch_lines) == 2 and lines[epoch_lines[-1] + 1].startswith("finished: ")
    summary = "\n".join(lines[epoch_lines[-1] + 1:])
    test, ts = metrics["test"], metrics["test_after_ts"]
    assert (f"selected epoch {metrics['epoch']} of 2 — lowest validation NLL (eval.select_by=nll; on a tie, the "
            "lower validation error)") in summary
    assert "' *' marks each new best" in summary
    assert (f"test at that epoch: error {100 * test['error']:.2f}%, ECE {100 * test['ece']:.2f}%; after temperature "
            f"scaling (T = {ts['temperature']:.3f}, fitted by NLL on validation): error {100 * ts['error']:.2f}%, "
            f"ECE {100 * ts['ece']:.2f}%") in summary
    assert f"all numbers: {run_dir / 'metrics.json'}" in summary
    marked = [int(lines[i].split()[1].split("/")[0]) for i in epoch_lines if lines[i].endswith(" *")]
    assert marked[-1] == metrics["epoch"]  # the summary's explanation of the marker holds
    assert metrics["runtime"] == {"num_processes": 1, "torch_threads": 1, "device": "cpu", "batch_size": 32,
                                  "batch_size_per_process": 32, "eval_batch_size_per_process": 64}
    # what it trained, named by the config file's stem, in config.yaml and metrics.json (metacal/run/method.py)
    saved = load_config(run_dir / "config.yaml")
    assert saved.run.method == "tiny"
    assert metrics["method"] == {"name": "tiny", "loss": {"name": saved.loss.name, "params": dict(saved.loss.params)},
                                 "learner": {"name": "none"}}

    before = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    stamp = (run_dir / "metrics.json").stat().st_mtime_ns
    code, out, err = run_cli(["--run-dir", run_dir, "--resume"])
    assert code == 0 and err == ""
    assert out.splitlines() == [f"{run_dir} is already finished (2 epochs, selected epoch {metrics['epoch']}; "
                                f"results in {run_dir / 'metrics.json'}); nothing to do — to train longer, resume "
                                "with --set schedule.epochs=N (N > 2)"]
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == before
    assert (run_dir / "metrics.json").stat().st_mtime_ns == stamp

    code, out, err = run_cli(["--run-dir", run_dir, "--resume", "--set", "schedule.epochs=3"])  # longer: trains
    assert code == 0, err
    assert "already finished" not in out and len(json.loads((run_dir / "history.json").read_text())) == 3


def test_no_run_directory_line_before_a_setup_error(run_cli, tmp_path):
    """The data is looked for after the directory was created; the failed run removes it and must not have
    announced it."""
    run_dir = tmp_path / "run"
    config = tmp_path / "nodata.yaml"
    config.write_text(f"data: {{name: fashion_mnist, root: {tmp_path / 'no-data'}}}\nmodel: {{name: mlp}}\n")
    code, out, err = run_cli(["--config", config, "--run-dir", run_dir])
    assert code == 2 and "dataset 'fashion_mnist' not found" in err
    assert "run directory" not in out and not run_dir.exists()


def _fake_run(root, finished: bool, epoch: int | None, step_in_epoch: int = 0):
    root.mkdir(parents=True)
    (root / "metrics.json").write_text(json.dumps({"epoch": 1, "finished": finished}))
    if epoch is not None:
        ckpt = root / "checkpoints" / f"ckpt-000000010-e{epoch:04d}"
        ckpt.mkdir(parents=True)
        (ckpt / "MANIFEST.json").write_text(json.dumps({"global_step": 10, "step_in_epoch": step_in_epoch,
                                                        "epoch": epoch, "files": {}}))
        (ckpt / "train_state.json").write_text(json.dumps({"epoch": epoch, "step_in_epoch": step_in_epoch}))
    return root


def test_finished_note_cases(tmp_path):
    def never() -> int:
        raise AssertionError("the config is resolved only for a finished run with a checkpoint")

    assert finished_note(_fake_run(tmp_path / "a", finished=False, epoch=2), never) is None
    assert finished_note(tmp_path / "missing", never) is None
    done = _fake_run(tmp_path / "b", finished=True, epoch=2)  # no config.yaml in the checkpoint: nothing to compare
    base = ["data.name=mnist1d", "model.name=mlp"]
    note = finished_note(done, lambda: load_config(None, base + ["schedule.epochs=2"]))
    assert "is already finished (2 epochs" in note
    # more epochs asked for: the resume trains them
    assert finished_note(done, lambda: load_config(None, base + ["schedule.epochs=3"])) is None
    no_ckpt = _fake_run(tmp_path / "c", finished=True, epoch=None)
    assert finished_note(no_ckpt, never) == (f"{no_ckpt} is already finished (selected epoch 1; results in "
                                            f"{no_ckpt / 'metrics.json'}); it kept no checkpoint, so there is "
                                            "nothing to resume")
