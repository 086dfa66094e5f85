"""Bad input anywhere → one line on stderr, exit 2, no traceback, earlier results untouched.

Cases: unwritable/impossible run directory, missing data, resume of a nonexistent directory or of one
without a complete checkpoint, a checkpoint that does not match the config (architecture keys changed
with --set, other number of classes, tensors of other shapes), an unloadable checkpoint, bad values of
the new config key; plus divergence with mid-epoch checkpoints (exit 1, last good checkpoint loads) and
the documented exit codes in --help.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import faults
import pytest
import torch

MLP = {"model": {"name": "mlp", "options": {"hidden": [32]}}, "logging": {"tensorboard": False}}
ONE_EPOCH = {**MLP, "schedule": {"epochs": 1, "milestones": [1]}}


def snapshot(root: Path) -> dict[str, object]:
    """Every file's bytes and every symlink's target below ``root``."""
    out: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = ("link", os.readlink(path))
        elif path.is_file():
            out[rel] = path.read_bytes()
    return out


def one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


@pytest.fixture
def finished_run(write_config, run_cli, tmp_path):
    config = write_config("ce", ONE_EPOCH)
    run_dir = tmp_path / "done"
    assert run_cli(["--config", config, "--run-dir", run_dir])[0] == 0
    return config, run_dir


def test_help_documents_exit_codes(capsys):
    from metacal.train.cli import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--help"])
    text = capsys.readouterr().out
    for fragment in ("exit codes:", "0   finished", "1   diverged", "2   bad input", "75  preempted by SIGTERM",
                     "checkpoint_every_steps"):
        assert fragment in text


def test_run_dir_below_a_file_is_refused(write_config, run_cli, tmp_path):
    blocker = tmp_path / "results.txt"
    blocker.write_text("earlier results")
    code, _, err = run_cli(["--config", write_config("ce", ONE_EPOCH), "--run-dir", blocker / "run"])
    one_line_error(code, err, "cannot create run directory", str(blocker / "run"))
    assert blocker.read_text() == "earlier results"


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_run_dir_is_refused(write_config, run_cli, tmp_path):
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        code, _, err = run_cli(["--config", write_config("ce", ONE_EPOCH), "--run-dir", parent / "run"])
    finally:
        parent.chmod(0o755)
    one_line_error(code, err, "cannot create run directory")


def test_missing_data_is_one_line_and_leaves_nothing(write_config, run_cli, tmp_path):
    config = tmp_path / "c10.yaml"
    config.write_text(f"data: {{name: cifar10, root: {tmp_path / 'empty'}}}\nmodel: {{name: mlp}}\n")
    code, _, err = run_cli(["--config", config, "--run-dir", tmp_path / "run"])
    one_line_error(code, err, "dataset 'cifar10' not found", str(tmp_path / "empty"))
    assert not (tmp_path / "run").exists()


def test_unknown_learner_is_one_line_and_leaves_nothing(write_config, run_cli, tmp_path):
    """learner names an entry of metacal.meta.LEARNERS (one's own learners register there)."""
    config = write_config("c", {**ONE_EPOCH, "learner": "autoo"})
    code, _, err = run_cli(["--config", config, "--run-dir", tmp_path / "run"])
    one_line_error(code, err, "unknown learner 'autoo'; did you mean auto?", "available: auto, gamma_net, loss")
    assert not (tmp_path / "run").exists()


def test_overwrite_with_bad_input_keeps_earlier_results(finished_run, run_cli):
    config, run_dir = finished_run
    before = snapshot(run_dir)
    code, _, err = run_cli(["--config", config, "--run-dir", run_dir, "--overwrite",
                            "--set", "model.options.widthh=3"])  # fails while building, after the dir checks
    one_line_error(code, err, "model (mlp)", "widthh")
    assert snapshot(run_dir) == before  # the directory is cleared only once the new run has started


def test_resume_of_nonexistent_dir(run_cli, tmp_path):
    code, _, err = run_cli(["--run-dir", tmp_path / "nowhere", "--resume"])
    one_line_error(code, err, "cannot resume", "does not exist")
    assert not (tmp_path / "nowhere").exists()


def test_resume_without_complete_checkpoint(write_config, run_cli, tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints" / ".tmp-ckpt-000000004").mkdir(parents=True)  # killed during its first save
    (run_dir / "config.yaml").write_text("data: {name: gaussian_mixture}\n")
    before = snapshot(run_dir)
    code, _, err = run_cli(["--run-dir", run_dir, "--resume"])
    one_line_error(code, err, "cannot resume", "no complete checkpoint", "--overwrite")
    code, _, err = run_cli(["--config", write_config("ce", ONE_EPOCH), "--run-dir", run_dir, "--resume"])
    one_line_error(code, err, "no complete checkpoint")
    assert snapshot(run_dir) == before


def test_resume_of_a_pre_manifest_checkpoint_explains_why(run_cli, tmp_path):
    legacy = tmp_path / "old" / "checkpoints" / "latest"
    legacy.mkdir(parents=True)
    (legacy / "train_state.json").write_text('{"epoch": 3}')
    code, _, err = run_cli(["--run-dir", tmp_path / "old", "--resume"])
    one_line_error(code, err, "older metacal without a manifest", "--overwrite")
    assert (legacy / "train_state.json").read_text() == '{"epoch": 3}'


@pytest.mark.parametrize("overrides, key", [
    (["model.options.hidden=[64]"], "model.options"),
    (["data.options.num_classes=3"], "data.options"),
    (["loss.name=adafocal"], "loss.name"),
    (["learner=gamma_net", "loss.name=focal"], "loss.name"),
])
def test_resume_with_architecture_changes_is_refused(overrides, key, finished_run, run_cli):
    _, run_dir = finished_run
    before = snapshot(run_dir)
    args = ["--run-dir", run_dir, "--resume", "--set", "schedule.epochs=2"]
    for item in overrides:
        args += ["--set", item]
    code, _, err = run_cli(args)
    one_line_error(code, err, "cannot resume:", f"{key} is", "in the checkpoint", "another --run-dir")
    assert snapshot(run_dir) == before  # config.yaml, checkpoints and metrics untouched


def test_resume_with_another_config_file_is_checked_too(finished_run, write_config, run_cli):
    _, run_dir = finished_run
    other = write_config("wide", {**ONE_EPOCH, "model": {"name": "mlp", "options": {"hidden": [16, 16]}}})
    code, _, err = run_cli(["--config", other, "--run-dir", run_dir, "--resume"])
    one_line_error(code, err, "model.options is")


def test_shape_check_names_the_tensor(finished_run):
    """Independent of the config comparison: tensor shapes are compared before anything is loaded."""
    from metacal.train import components
    from metacal.train.checkpoint import CheckpointError, check_model_shapes, find_latest
    from metacal.train.config import load_config

    config, run_dir = finished_run
    latest = find_latest(run_dir / "checkpoints")

    def model(*overrides):
        cfg = load_config(config, list(overrides))
        return components.build_model(cfg, components.build_data(cfg))

    check_model_shapes(latest, model())
    with pytest.raises(CheckpointError, match=r"classifier.bias has shape \[4\] in the checkpoint but \[3\] now"):
        check_model_shapes(latest, model("data.options.num_classes=3"))
    with pytest.raises(CheckpointError, match="holds a different model"):
        check_model_shapes(latest, model("model.options.hidden=[32, 32]"))


def test_unloadable_checkpoint_with_consistent_manifest_is_one_line(finished_run, run_cli):
    """Garbage that passes the manifest (e.g. written by something else) still ends in one line, exit 2."""
    import hashlib

    _, run_dir = finished_run
    latest = (run_dir / "checkpoints" / "latest").resolve()
    (latest / "optimizer.bin").write_bytes(b"not a torch file")
    manifest = json.loads((latest / "MANIFEST.json").read_text())
    manifest["files"]["optimizer.bin"] = {"size": 16, "sha256": hashlib.sha256(b"not a torch file").hexdigest()}
    (latest / "MANIFEST.json").write_text(json.dumps(manifest))
    before = snapshot(run_dir)
    code, _, err = run_cli(["--run-dir", run_dir, "--resume", "--set", "schedule.epochs=2"])
    one_line_error(code, err, f"cannot load checkpoint {latest}")
    assert snapshot(run_dir) == before


@pytest.mark.parametrize("value, fragment", [("abc", "run.checkpoint_every_steps"), ("-1", ">= 0")])
def test_bad_checkpoint_every_steps(value, fragment, write_config, run_cli, tmp_path):
    code, _, err = run_cli(["--config", write_config("ce", ONE_EPOCH), "--run-dir", tmp_path / "run",
                            "--set", f"run.checkpoint_every_steps={value}"])
    one_line_error(code, err, fragment)


def test_mid_epoch_checkpoint_fixes_batch_size(write_config, run_cli, tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    with monkeypatch.context() as patch:
        faults.after_step(patch, 3, faults.signal_self(signal.SIGTERM))
        assert run_cli(["--config", write_config("ce", ONE_EPOCH), "--run-dir", run_dir])[0] == 75
    code, _, err = run_cli(["--run-dir", run_dir, "--resume", "--set", "data.batch_size=16"])
    one_line_error(code, err, "data.batch_size is 16 now but 32")
    code, out, err = run_cli(["--run-dir", run_dir, "--resume", "--set", "optim.lr=0.05"])  # allowed
    assert code == 0 and "after epoch 1, step 3" in out, err


def test_divergence_with_mid_epoch_checkpoints_keeps_a_loadable_one(write_config, run_cli, tmp_path):
    """lr × 1e30 at epoch 2 → non-finite loss at a named step; the newest checkpoint predates it, holds
    finite weights and loads: resuming replays the same steps and stops at the same step again."""
    from safetensors.torch import load_file

    from metacal.train.checkpoint import find_latest

    config = write_config("ce", {**MLP, "schedule": {"epochs": 2, "milestones": [1], "lr_decay": 1e30},
                                 "run": {"checkpoint_every_steps": 1}})
    run_dir = tmp_path / "run"
    code, _, first = run_cli(["--config", config, "--run-dir", run_dir])
    assert code == 1 and len(first.strip().splitlines()) == 1 and "Traceback" not in first, first
    assert "non-finite loss at epoch 2, step" in first and "last good checkpoint" in first
    latest = find_latest(run_dir / "checkpoints")
    assert str(latest) in first
    weights = load_file(str(latest / "model.safetensors"))
    assert all(bool(torch.isfinite(t).all()) for t in weights.values())
    state = json.loads((latest / "train_state.json").read_text())
    step = int(first.split("(global step ")[1].split(")")[0])
    assert state["global_step"] == step - 1 and state["epoch"] == 1  # saved right before the bad step
    assert not (run_dir / "metrics.json").exists()
    code, out, again = run_cli(["--run-dir", run_dir, "--resume"])
    assert code == 1 and f"global step {step - 1})" in out
    assert again == first and find_latest(run_dir / "checkpoints") == latest
