"""scripts/sweep.py with the real trainer, stopped part-way by a real signal to its whole process group (the
sweep and the trainer it runs): Ctrl-C (SIGINT, as a terminal sends it) or SIGKILL (nothing can clean up).
Running the same sweep again skips the finished run and resumes the interrupted one from its checkpoint;
a run whose metrics.json is half-written is not taken for finished."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "train"))
from train_tiny import TINY, deep_merge  # noqa: E402

SMALL = {"model": {"name": "mlp", "options": {"hidden": [16]}}, "logging": {"tensorboard": False},
         "eval": {"test_every_epoch": False}, "run": {"max_steps_per_epoch": 3}}
EPOCHS = {"a_short": 1, "b_long": 15}  # the sweep runs them in this order (config-major)


def write_configs(folder: Path, lengths: dict[str, int] = EPOCHS) -> list[Path]:
    folder.mkdir()
    paths = []
    for stem, epochs in lengths.items():
        data = deep_merge(deep_merge(TINY, SMALL), {"schedule": {"epochs": epochs, "milestones": [max(1, epochs // 2)]}})
        (folder / f"{stem}.yaml").write_text(yaml.safe_dump(data))
        paths.append(folder / f"{stem}.yaml")
    return paths


def sweep(configs: list[Path], out: Path, extra: tuple[str, ...] = (), **popen) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(REPO / "scripts" / "sweep.py"), "--configs", *map(str, configs), "--seeds", "0",
           "--out", str(out), *extra]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def wait_for(condition, proc: subprocess.Popen, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"the sweep ended early: {proc.communicate()}"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "sigkill"])
def test_killed_sweep_skips_finished_resumes_interrupted(signum, tmp_path):
    configs, out = write_configs(tmp_path / "configs"), tmp_path / "out"
    run = {stem: out / stem / "seed0" for stem in EPOCHS}
    # its own process group, as a terminal job; started with SIGINT ignored, as a non-interactive shell starts
    # a background job (`sweep … &`): the sweep must still stop on Ctrl-C and exit 130 like its trainer
    proc = sweep(configs, out, start_new_session=True, preexec_fn=_ignore_sigint)
    try:  # stop once the long run has its first (end of epoch 1) checkpoint
        wait_for(lambda: any((run["b_long"] / "checkpoints").glob("ckpt-*")), proc)
        os.killpg(proc.pid, signum)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert (run["a_short"] / "metrics.json").is_file() and not (run["b_long"] / "metrics.json").exists()
    log = [json.loads(line) for line in (out / "sweep_log.jsonl").read_text().splitlines()]
    if signum == signal.SIGINT:  # the sweep stops its trainer, which checkpoints and exits 130
        assert proc.returncode == 130 and "sweep: interrupted; run the same command again to resume" in err
        assert "Traceback" not in err
        assert [(Path(r["config"]).stem, r["status"], r["exit_code"]) for r in log] == [
            ("a_short", "ok", 0), ("b_long", "failed", 130)]
        trainer_log = (out / "logs" / "b_long_seed0.log").read_text()
        assert "interrupted: stopped by Ctrl-C (SIGINT)" in trainer_log and "Traceback" not in trainer_log
    else:  # nothing was recorded for the killed run
        assert proc.returncode == -signal.SIGKILL
        assert [(Path(r["config"]).stem, r["status"]) for r in log] == [("a_short", "ok")]
    # a half-written metrics.json (as a full disk can leave one) does not make a run finished
    (run["b_long"] / "metrics.json").write_text('{"epoch": 3, "finished": tr')

    dry = sweep(configs, out, extra=["--dry-run"])
    stdout, err = dry.communicate(timeout=120)
    assert dry.returncode == 0, err[-3000:]
    plan = [line.split()[:2] for line in stdout.splitlines() if line.split()[:1] in (["skip"], ["resume"])]
    assert plan == [["skip", "a_short/seed0"], ["resume", "b_long/seed0"]]
    if signum == signal.SIGKILL:
        return  # the resume itself is run once, in the Ctrl-C case

    again = sweep(configs, out)
    _, err = again.communicate(timeout=300)
    assert again.returncode == 0, err[-3000:]
    log = [json.loads(line) for line in (out / "sweep_log.jsonl").read_text().splitlines()][-2:]
    assert [(Path(r["config"]).stem, r["action"], r["status"]) for r in log] == [
        ("a_short", "skip", "skipped"), ("b_long", "resume", "ok")]
    assert "resumed from" in (out / "logs" / "b_long_seed0.log").read_text()
    history = json.loads((run["b_long"] / "history.json").read_text())
    assert [h["epoch"] for h in history] == list(range(1, EPOCHS["b_long"] + 1))  # every epoch exactly once
    assert json.loads((run["b_long"] / "metrics.json").read_text())["finished"] is True


@pytest.mark.slow
def test_ctrl_c_to_the_sweep_alone_stops_its_trainer_with_sigterm_after_the_grace(tmp_path):
    """`kill -INT <sweep>` reaches only the sweep: it waits INTERRUPT_GRACE_S for its trainer to stop by itself,
    then sends SIGTERM; the trainer checkpoints and exits 75 (preempted) and the run resumes like any other."""
    from metacal.sweep.plan import INTERRUPT_GRACE_S

    # b_long long enough to outlast the grace (the tiny run trains about 5 epochs a second)
    configs, out = write_configs(tmp_path / "configs", {"a_short": 1, "b_long": 1000}), tmp_path / "out"
    run = out / "b_long" / "seed0"
    proc = sweep(configs, out, start_new_session=True)
    try:
        wait_for(lambda: any((run / "checkpoints").glob("ckpt-*")), proc)
        started = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        waited = time.monotonic() - started
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130 and "sweep: interrupted" in err and waited >= INTERRUPT_GRACE_S
    log = [json.loads(line) for line in (out / "sweep_log.jsonl").read_text().splitlines()]
    assert [(Path(r["config"]).stem, r["status"], r["exit_code"]) for r in log] == [
        ("a_short", "ok", 0), ("b_long", "failed", 75)]
    trainer_log = (out / "logs" / "b_long_seed0.log").read_text()
    assert "preempted: stopped by SIGTERM" in trainer_log and "checkpoint saved" in trainer_log
