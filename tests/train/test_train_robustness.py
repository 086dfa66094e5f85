"""Runs survive SIGKILL at any point (mid-epoch, inside a checkpoint write, at an epoch boundary), SIGTERM
and Ctrl-C (SIGINT).

Each interrupted run is resumed with ``--run-dir DIR --resume`` and compared with an uninterrupted run of
the same config without mid-epoch checkpoints: every number of metrics.json (val, test, test after TS),
the per-epoch training numbers of history.json (loss sums, meta objective, γ mean/std of every training
sample — the mid-epoch accumulators) and every tensor of the final model, γ-Net and optimizers agree to
1e-6 (CPU, one thread; observed: bit-identical). Kills run ``scripts/train.py`` in a real subprocess through
hooked_train.py, which installs a fault of faults.py, so the kill is a true SIGKILL.

Tiny setup (train_tiny.TINY + 1-hidden-layer MLP): 320 train samples, batch 32 → 10 steps per epoch,
3 epochs, checkpoints every 4 global steps → saves at global steps 4, 8, 10 (end of epoch 1), 12, 16, 20 …
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import faults
import pytest
import torch
import yaml
from train_tiny import TINY, assert_same_numbers, deep_merge, read_metrics

REPO = Path(__file__).resolve().parents[2]
BASE = {"model": {"name": "mlp", "options": {"hidden": [32]}}, "schedule": {"epochs": 3, "milestones": [2]},
        "logging": {"tensorboard": False}, "run": {"checkpoint_every_steps": 4}}
SETUPS = {
    "flgamma_sece": {"loss": {"name": "focal"},
                     "learner": "gamma_net", "meta": {"objective": "sece", "backend": "jvp"}},
    "mixup": {"loss": {"name": "mixup", "params": {"alpha": 1.0}}},
    "adafocal": {"loss": {"name": "adafocal"}},
}
STATE_FILES = ("model.safetensors", "optimizer.bin", "custom_checkpoint_2.pkl", "custom_checkpoint_3.pkl",
               "custom_checkpoint_4.pkl")


def config_for(tmp: Path, setup: str) -> Path:
    path = tmp / f"{setup}.yaml"
    path.write_text(yaml.safe_dump(deep_merge(deep_merge(TINY, BASE), SETUPS[setup])))
    return path


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Uninterrupted runs (no mid-epoch checkpoints), built once per setup on demand."""
    from metacal.train.cli import main

    tmp, done = tmp_path_factory.mktemp("reference"), {}

    def get(setup: str) -> Path:
        if setup not in done:
            run_dir = tmp / setup
            code = main(["--config", str(config_for(tmp, setup)), "--run-dir", str(run_dir),
                         "--set", "run.checkpoint_every_steps=0"])
            assert code == 0
            done[setup] = run_dir
        return done[setup]

    return get


def run_script(fault: str, args: list) -> subprocess.CompletedProcess:
    """scripts/train.py in a subprocess with ``fault`` installed (hooked_train.py)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(REPO / "tests" / "train" / "hooked_train.py"), fault,
                           *map(str, args)], env=env, capture_output=True, text=True, timeout=240)


def tensors(path: Path) -> dict[str, torch.Tensor]:
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    flat: dict[str, torch.Tensor] = {}

    def walk(obj, prefix):
        if isinstance(obj, torch.Tensor) and obj.dtype != torch.uint8:  # uint8: generator states
            flat[prefix] = obj
        elif isinstance(obj, torch.Tensor):
            flat[prefix] = obj.to(torch.int64)
        elif isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, f"{prefix}.{k}")
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                walk(v, f"{prefix}.{i}")
        elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
            flat[prefix] = torch.tensor(float(obj), dtype=torch.float64)

    walk(torch.load(path, weights_only=False, map_location="cpu"), "")
    return flat


def assert_same_run(a: Path, b: Path) -> int:
    """metrics.json, history.json training numbers and final state of two runs agree (returns #tensors)."""
    ma, mb = read_metrics(a), read_metrics(b)
    assert ma["epoch"] == mb["epoch"]
    for split in ("val", "test", "test_after_ts"):
        assert_same_numbers(ma[split], mb[split], 1e-6, split)
    ha, hb = (json.loads((r / "history.json").read_text()) for r in (a, b))
    assert [h["epoch"] for h in hb] == [1, 2, 3]
    for ea, eb in zip(ha, hb):
        for part in ("train", "val"):
            assert_same_numbers(ea[part], eb[part], 1e-6, (ea["epoch"], part))
    compared = 0
    for name in STATE_FILES:
        fa, fb = a / "checkpoints" / "latest" / name, b / "checkpoints" / "latest" / name
        assert fa.is_file() == fb.is_file(), name
        if not fa.is_file():
            continue
        ta, tb = tensors(fa), tensors(fb)
        assert ta.keys() == tb.keys(), name
        for key in ta:
            torch.testing.assert_close(tb[key], ta[key], rtol=0, atol=1e-6, msg=f"{name}:{key}")
            compared += 1
    return compared


def latest_step(run_dir: Path) -> tuple[int, int]:
    from metacal.train.checkpoint import find_latest

    manifest = json.loads((find_latest(run_dir / "checkpoints") / "MANIFEST.json").read_text())
    return manifest["global_step"], manifest["step_in_epoch"]


# (setup, fault of hooked_train.py, value, newest complete checkpoint left behind: (global step, step in epoch))
KILLS = [
    # SIGKILL three steps after the mid-epoch checkpoint at global step 12 (epoch 2, step 2)
    ("flgamma_sece", "kill_at_step", "15", (12, 2)),
    # SIGKILL inside the 3rd save (end of epoch 1): files complete and fsynced in the temporary directory,
    # not renamed → the previous good one (global step 8, mid-epoch) is used
    ("flgamma_sece", "kill_in_checkpoint", "written:3", (8, 8)),
    # SIGKILL inside the 4th save after the rename, before `latest` moved → the renamed (newer) one is used
    ("flgamma_sece", "kill_in_checkpoint", "renamed:4", (12, 2)),
    # epoch boundary: AdaFocal (state updated from validation at each epoch end), only epoch checkpoints
    ("adafocal", "kill_at_step", "11", (10, 0)),
]


@pytest.mark.slow
@pytest.mark.parametrize("setup, fault, value, left", KILLS, ids=[f"{k[0]}-{k[2]}" for k in KILLS])
def test_sigkill_then_resume_matches_uninterrupted_run(setup, fault, value, left, reference, run_cli, tmp_path):
    config, run_dir = config_for(tmp_path, setup), tmp_path / "run"
    extra = ["--set", "run.checkpoint_every_steps=0"] if setup == "adafocal" else []
    proc = run_script(f"{fault}={value}", ["--config", config, "--run-dir", run_dir, *extra])
    assert proc.returncode == -9, proc.stderr[-2000:]  # really killed
    assert not (run_dir / "metrics.json").exists()
    assert latest_step(run_dir) == left
    code, out, err = run_cli(["--run-dir", run_dir, "--resume"])
    assert code == 0, err
    assert f"global step {left[0]})" in out
    assert not list((run_dir / "checkpoints").glob(".tmp-*"))  # leftovers of the killed save are gone
    assert assert_same_run(reference(setup), run_dir) >= 4


@pytest.mark.slow
@pytest.mark.parametrize("setup, step", [("flgamma_sece", 6), ("mixup", 7)])
def test_sigterm_saves_at_step_boundary_exits_75_and_resumes(setup, step, reference, run_cli, tmp_path,
                                                             monkeypatch):
    """In process (the CLI's handler): mixup's generator and the meta state continue mid-epoch."""
    from metacal.train.preemption import EXIT_PREEMPTED

    config, run_dir = config_for(tmp_path, setup), tmp_path / "run"
    with monkeypatch.context() as patch:
        faults.after_step(patch, step, faults.signal_self(signal.SIGTERM))  # a real SIGTERM to this process
        code, _, err = run_cli(["--config", config, "--run-dir", run_dir])
    assert code == EXIT_PREEMPTED == 75
    assert err.startswith("preempted:") and f"global step {step}" in err and "--resume" in err
    assert len(err.strip().splitlines()) == 1
    assert latest_step(run_dir) == (step, step)  # saved at the step boundary, not at the last periodic one (4)
    assert (run_dir / "checkpoints" / "latest").resolve().name == f"ckpt-{step:09d}"
    assert not (run_dir / "metrics.json").exists()
    code, out, err = run_cli(["--run-dir", run_dir, "--resume"])
    assert code == 0, err
    assert f"after epoch 1, step {step}" in out
    assert assert_same_run(reference(setup), run_dir) >= 4


@pytest.mark.slow
def test_corrupt_latest_checkpoint_is_refused_and_kept(run_cli, tmp_path, monkeypatch):
    """Documented choice: a checkpoint that fails its manifest is an error (exit 2), never skipped or deleted."""
    config, run_dir = config_for(tmp_path, "flgamma_sece"), tmp_path / "run"
    with monkeypatch.context() as patch:
        faults.after_step(patch, 9, faults.signal_self(signal.SIGTERM))
        assert run_cli(["--config", config, "--run-dir", run_dir])[0] == 75
    latest = (run_dir / "checkpoints" / "latest").resolve()
    weights = latest / "model.safetensors"
    good = weights.read_bytes()
    weights.write_bytes(good[: len(good) // 2])  # truncated
    code, _, err = run_cli(["--run-dir", run_dir, "--resume"])
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert f"checkpoint {latest} is corrupt: model.safetensors has {len(good) // 2} bytes" in err
    assert "truncated" in err
    flipped = bytearray(good)
    flipped[-1] ^= 0xFF  # same size, different content
    weights.write_bytes(bytes(flipped))
    code, _, err = run_cli(["--run-dir", run_dir, "--resume"])
    assert code == 2 and "does not match its checksum" in err
    assert weights.read_bytes() == bytes(flipped) and latest.is_dir()  # nothing deleted or rewritten
    weights.write_bytes(good)  # repaired → resumes fine
    assert run_cli(["--run-dir", run_dir, "--resume"])[0] == 0


def test_resume_skips_incomplete_and_prefers_newest_complete(tmp_path):
    """find_latest: only directories with a manifest count; the highest (step, epoch end) wins."""
    from metacal.train.checkpoint import find_latest

    ckpts = tmp_path / "checkpoints"
    for name, step, in_epoch in (("ckpt-000000010-e0001", 10, 0), ("ckpt-000000010", 10, 10),
                                 ("ckpt-000000008", 8, 8)):
        (ckpts / name).mkdir(parents=True)
        (ckpts / name / "MANIFEST.json").write_text(json.dumps({"files": {}, "global_step": step,
                                                                "step_in_epoch": in_epoch}))
    (ckpts / "ckpt-000000012").mkdir()  # no manifest: half-deleted or foreign
    (ckpts / ".tmp-ckpt-000000014").mkdir()
    os.symlink("ckpt-000000008", ckpts / "latest")  # a stale pointer does not hide a newer complete one
    assert find_latest(ckpts).name == "ckpt-000000010-e0001"
    shutil.rmtree(ckpts / "ckpt-000000010-e0001")
    assert find_latest(ckpts).name == "ckpt-000000010"
    assert find_latest(tmp_path / "nothing") is None


# stage of the 2nd save (global step 8) that crashes → newest complete checkpoint, `latest`, what is on disk
STAGE_CRASHES = [
    ("partial", 4, 4, [".tmp-ckpt-000000008", "ckpt-000000004"]),  # the temporary one without a manifest
    ("written", 4, 4, [".tmp-ckpt-000000008", "ckpt-000000004"]),  # … and with one
    ("renamed", 8, 4, ["ckpt-000000004", "ckpt-000000008"]),
    ("pointed", 8, 8, ["ckpt-000000004", "ckpt-000000008"]),
]


@pytest.mark.parametrize("stage, newest, latest, entries", STAGE_CRASHES, ids=[c[0] for c in STAGE_CRASHES])
def test_crash_at_each_save_stage_leaves_a_complete_checkpoint(stage, newest, latest, entries, tmp_path,
                                                               monkeypatch):
    """A crash at each stage of a save keeps a resumable checkpoint; the next save clears the leftovers."""
    from accelerate import Accelerator

    from metacal.train.checkpoint import TrainState, find_latest, save_checkpoint

    class Crash(Exception):
        pass

    def crash() -> None:
        raise Crash(stage)

    accelerator, ckpts = Accelerator(), tmp_path / "checkpoints"

    def save(step: int) -> None:
        save_checkpoint(accelerator, ckpts, TrainState(global_step=step, step_in_epoch=step), {}, "run: {}\n")

    with monkeypatch.context() as patch:
        faults.in_checkpoint(patch, stage, 2, crash)
        save(4)
        with pytest.raises(Crash):
            save(8)
    assert sorted(p.name for p in ckpts.iterdir() if not p.is_symlink()) == entries
    assert (ckpts / ".tmp-ckpt-000000008" / "MANIFEST.json").is_file() == (stage == "written")
    assert find_latest(ckpts).name == f"ckpt-{newest:09d}"
    assert os.readlink(ckpts / "latest") == f"ckpt-{latest:09d}"
    save(12)
    assert sorted(p.name for p in ckpts.iterdir()) == ["ckpt-000000012", "latest"]


@pytest.mark.slow
def test_script_exits_75_on_sigterm_at_epoch_end_and_resumes(reference, run_cli, tmp_path):
    """The real script: SIGTERM after the last step of epoch 2 (global step 20) → checkpoint at that step
    boundary, exit status 75 and one stderr line; the resume only evaluates epoch 2 and trains epoch 3."""
    config, run_dir = config_for(tmp_path, "flgamma_sece"), tmp_path / "run"
    proc = run_script("sigterm_at_step=20", ["--config", config, "--run-dir", run_dir])
    assert proc.returncode == 75, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith("preempted: stopped by SIGTERM after epoch 2, step 10")
    assert "Traceback" not in proc.stderr
    assert latest_step(run_dir) == (20, 10)
    code, out, err = run_cli(["--run-dir", run_dir, "--resume"])
    assert code == 0, err
    assert "epoch   2/3" in out and "epoch   1/3" not in out
    assert assert_same_run(reference("flgamma_sece"), run_dir) >= 4


@pytest.mark.slow
def test_script_exits_130_on_ctrl_c_and_resumes(reference, run_cli, tmp_path):
    """The real script, a real SIGINT (Ctrl-C) after global step 6 (mid-epoch, between the periodic
    checkpoints at 4 and 8): checkpoint at step 6, exit status 130, the resume command as the last line and
    no traceback; the resume ends like the uninterrupted run."""
    config, run_dir = config_for(tmp_path, "flgamma_sece"), tmp_path / "run"
    proc = run_script("sigint_at_step=6", ["--config", config, "--run-dir", run_dir])
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        f"interrupted: stopped by Ctrl-C (SIGINT) after epoch 1, step 6 (global step 6); checkpoint saved: "
        f"{run_dir}/checkpoints/ckpt-000000006; continue with --run-dir {run_dir} --resume")
    assert "press Ctrl-C again to abort at once" in proc.stderr
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr
    assert latest_step(run_dir) == (6, 6)
    assert not (run_dir / "metrics.json").exists()
    code, out, err = run_cli(["--run-dir", run_dir, "--resume"])
    assert code == 0, err
    assert "after epoch 1, step 6" in out
    assert assert_same_run(reference("flgamma_sece"), run_dir) >= 4


@pytest.mark.slow
def test_second_ctrl_c_aborts_at_once(tmp_path):
    """Ctrl-C twice within one step: the process dies by SIGINT there (no checkpoint of that step, no
    traceback); the periodic checkpoint before it (global step 4) is what a resume finds."""
    config, run_dir = config_for(tmp_path, "mixup"), tmp_path / "run"
    proc = run_script("sigint_twice_at_step=6", ["--config", config, "--run-dir", run_dir])
    assert proc.returncode == -signal.SIGINT, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "interrupted:" not in proc.stderr
    assert latest_step(run_dir) == (4, 4)


@pytest.mark.slow
def test_full_disk_during_a_checkpoint_is_one_line_and_resumable(reference, run_cli, tmp_path, monkeypatch):
    """The 2nd checkpoint (global step 8) runs out of space half-way through optimizer.bin: exit 2 with one
    line naming the checkpoint, the cause, the free space and the intact previous checkpoint; the partial
    files are gone; that checkpoint (step 4) resumes to the uninterrupted run's end."""
    config, run_dir = config_for(tmp_path, "mixup"), tmp_path / "run"
    with monkeypatch.context() as patch:
        faults.disk_full_in_checkpoint(patch, save=2)
        code, _, err = run_cli(["--config", config, "--run-dir", run_dir])
    ckpts = run_dir / "checkpoints"
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"error: cannot write checkpoint {ckpts}/ckpt-000000008: No space left on device (")
    assert f" free on {ckpts}); the newest complete checkpoint {ckpts}/ckpt-000000004 is intact; " in err
    assert err.strip().endswith(f"continue with --run-dir {run_dir} --resume")
    assert sorted(p.name for p in ckpts.iterdir()) == ["ckpt-000000004", "latest"]  # no partial directory left
    assert latest_step(run_dir) == (4, 4) and not (run_dir / "metrics.json").exists()
    code, out, err = run_cli(["--run-dir", run_dir, "--resume"])
    assert code == 0, err
    assert "after epoch 1, step 4" in out
    assert assert_same_run(reference("mixup"), run_dir) >= 4


def test_pointers_fall_back_to_text_files_without_symlinks(tmp_path, monkeypatch):
    """Filesystems without symlinks: ``latest.txt`` names the checkpoint and protects it from pruning."""
    from metacal.train import checkpoint

    for name in ("ckpt-000000004", "ckpt-000000008", ".tmp-ckpt-000000012"):
        (tmp_path / name).mkdir()

    def no_symlinks(link, name):
        raise OSError("operation not permitted")

    monkeypatch.setattr(checkpoint, "point_symlink", no_symlinks)
    checkpoint._point(tmp_path / "latest", "ckpt-000000008")
    checkpoint._prune(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-000000008", "latest.txt"]
    assert (tmp_path / "latest.txt").read_text() == "ckpt-000000008\n"
