"""Sweep over configs × seeds: plan (skip finished / resume interrupted / restart or start) and execute.

Each grid cell runs ``TRAIN_CMD --config CFG --set run.seed=S [--set k=v ...] --run-dir OUT/<config-stem>/seed<S>
[--resume | --overwrite]`` (TRAIN_CMD by default ``python -m metacal.train``) as a subprocess
(stdout/stderr → ``OUT/logs/<stem>_seed<S>.log``). Every outcome is
appended to ``OUT/sweep_log.jsonl`` (one JSON object per run: config, seed, run_dir, action, status, exit_code,
seconds, message). A run counts as succeeded only if the trainer exits 0 AND marked the run finished.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

from metacal.run.layout import has_checkpoints, is_finished

ACTIONS = ("skip", "resume", "restart", "start")
# After a Ctrl-C, the seconds the sweep waits for its trainers to stop by themselves (a terminal's Ctrl-C reaches
# the whole process group: each trainer checkpoints and exits 130) before it sends SIGTERM to those still running
# (they got no SIGINT: `kill -INT` to the sweep alone). Sent at once, SIGTERM could reach a loaded trainer before
# the terminal's SIGINT was handled and turn the interruption into a preemption (exit 75).
INTERRUPT_GRACE_S = 10.0


@dataclass
class PlannedRun:
    """One grid cell: ``action`` ∈ {"skip" (finished), "resume" (checkpoints, not finished), "restart" (a
    non-empty directory without checkpoints: the run died before its first checkpoint, so it starts over with
    ``--overwrite``), "start" (no directory or an empty one)}."""

    config: Path
    seed: int
    run_dir: Path
    action: str
    command: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.config.stem}/seed{self.seed}"


def parse_overrides(overrides: Sequence[str]) -> list[str]:
    """Validate ``k=v`` overrides (the trainer's own parser: a ValueError naming the bad one); ``run.seed`` is
    rejected because the sweep sets it (use --seeds)."""
    from metacal.train.config import split_override

    out = []
    for item in overrides:
        key, _ = split_override(item)
        if key == "run.seed":
            raise ValueError("--set run.seed=... is not allowed in a sweep; give the seeds with --seeds")
        out.append(item)
    return out


def run_dir_for(out: Path, config: Path, seed: int) -> Path:
    """``OUT/<config-stem>/seed<S>``."""
    return Path(out) / Path(config).stem / f"seed{seed}"


def build_command(
    train_cmd: Sequence[str], config: Path, seed: int, run_dir: Path, overrides: Sequence[str], action: str
) -> list[str]:
    """The trainer call for one cell: one ``--set k=v`` per override (the trainer's --set is repeatable),
    plus ``--resume`` for "resume" and ``--overwrite`` for "restart"."""
    cmd = [*train_cmd, "--config", str(config), "--set", f"run.seed={seed}"]
    for item in overrides:
        cmd += ["--set", item]
    cmd += ["--run-dir", str(run_dir)]
    if action == "resume":
        cmd.append("--resume")
    elif action == "restart":
        cmd.append("--overwrite")
    return cmd


def split_shared_bases(configs: Sequence[str | Path]) -> tuple[list[Path], list[Path]]:
    """(methods, bases): a listed config that another listed config names under ``base:`` is a shared base
    (``configs/<dataset>/base.yaml``), not a method of the grid — so ``--configs configs/x/*.yaml`` works."""
    import yaml

    paths = [Path(c) for c in configs]
    named: set[Path] = set()
    for p in paths:
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8")) if p.is_file() else None
        except (OSError, yaml.YAMLError):
            continue  # the trainer reports a broken file with its own message
        base = data.get("base") if isinstance(data, dict) else None
        for b in [base] if isinstance(base, str) else (base or []):
            if isinstance(b, str):
                named.add((p.parent / b).resolve())
    methods = [p for p in paths if p.resolve() not in named]
    return methods, [p for p in paths if p.resolve() in named]


def plan_sweep(
    configs: Sequence[str | Path],
    seeds: Sequence[int],
    out: str | Path,
    train_cmd: Sequence[str],
    overrides: Sequence[str] = (),
) -> list[PlannedRun]:
    """Grid configs × seeds (config-major order) with the action for each cell, decided from its run directory."""
    if not configs:
        raise ValueError("no configs given: pass --configs FILE [FILE ...]")
    if not seeds:
        raise ValueError("no seeds given: pass --seeds S [S ...]")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"duplicate seeds in --seeds {list(seeds)}")
    from metacal.train.config import config_exists, missing_config
    from metacal.train.value_ranges import SEED_RANGE, is_seed

    if bad := [s for s in seeds if not is_seed(int(s))]:
        raise ValueError(f"--seeds must lie in {SEED_RANGE} (run.seed); got {' '.join(map(str, bad))}")

    paths = [Path(c) for c in configs]
    for p in paths:
        if not config_exists(p):
            raise FileNotFoundError(missing_config(p))
    stems: dict[str, Path] = {}
    for p in paths:
        if p.stem in stems:
            raise ValueError(f"two configs share the stem {p.stem!r} ({stems[p.stem]}, {p}); run dirs would collide")
        stems[p.stem] = p
    overrides = parse_overrides(overrides)
    plan = []
    for config in paths:
        for seed in seeds:
            run_dir = run_dir_for(Path(out), config, int(seed))
            if is_finished(run_dir):
                action = "skip"
            elif has_checkpoints(run_dir):
                action = "resume"
            elif run_dir.is_dir() and any(run_dir.iterdir()):
                action = "restart"
            else:
                action = "start"
            cmd = [] if action == "skip" else build_command(train_cmd, config, int(seed), run_dir, overrides, action)
            plan.append(PlannedRun(config=config, seed=int(seed), run_dir=run_dir, action=action, command=cmd))
    return plan


def format_plan(plan: Sequence[PlannedRun]) -> str:
    """Human-readable plan: one line per cell with its action and command, then the counts."""
    lines = []
    for p in plan:
        cmd = " ".join(_quote(c) for c in p.command) if p.command else "(finished)"
        lines.append(f"{p.action:7s} {p.name:30s} {cmd}")
    counts = {a: sum(p.action == a for p in plan) for a in ACTIONS}
    lines.append(f"{len(plan)} runs: " + ", ".join(f"{counts[a]} {a}" for a in ACTIONS))
    return "\n".join(lines)


def _quote(arg: str) -> str:
    return shlex.quote(arg)


@dataclass
class RunOutcome:
    """Result of one cell: status ∈ {"skipped", "ok", "failed"}."""

    config: str
    seed: int
    run_dir: str
    action: str
    status: str
    exit_code: int | None
    seconds: float
    message: str = ""
    finished_at: str = ""


def _log_outcome(log_path: Path, outcome: RunOutcome) -> None:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(asdict(outcome), ensure_ascii=False) + "\n")


def _finish(p: PlannedRun, code: int, seconds: float) -> RunOutcome:
    """Exit 0 counts as success only if the trainer also marked the run finished."""
    if code == 0 and is_finished(p.run_dir):
        status, msg = "ok", ""
    elif code == 0:
        status, msg = "failed", "exit code 0 but the run is not marked finished (metrics.json has no \"finished\": true)"
    else:
        status, msg = "failed", f"exit code {code}"
    return RunOutcome(
        str(p.config), p.seed, str(p.run_dir), p.action, status, code, round(seconds, 3), msg,
        datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def child_env(jobs: int) -> dict[str, str]:
    """The trainers' environment: a source checkout's root first on PYTHONPATH (so ``-m metacal.train`` runs
    the sweep's own code); with several jobs, OMP_NUM_THREADS = cores // jobs (at least 1) so parallel runs
    do not oversubscribe the CPU — unless the user already set it."""
    env = dict(os.environ)
    root = _checkout_root()  # the trainers import the same metacal as the sweep, wherever they start
    if root is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [env.get("PYTHONPATH")])])
    if jobs > 1 and "OMP_NUM_THREADS" not in env:
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // jobs))
    return env


def execute_plan(
    plan: Sequence[PlannedRun],
    out: str | Path,
    jobs: int = 1,
    progress: Callable[[RunOutcome], None] | None = None,
) -> list[RunOutcome]:
    """Run the plan with at most ``jobs`` trainer subprocesses at a time; log and return every outcome.

    ``progress`` is called once per cell (skipped ones included) as soon as its outcome is known.
    """
    if jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {jobs}")
    out = Path(out)
    log_path, log_dir = out / "sweep_log.jsonl", out / "logs"
    outcomes: list[RunOutcome] = []

    def record(outcome: RunOutcome) -> None:
        outcomes.append(outcome)
        _log_outcome(log_path, outcome)
        if progress is not None:
            progress(outcome)

    env = child_env(jobs)
    pending = [p for p in plan if p.action != "skip"]
    for p in plan:
        if p.action == "skip":
            record(RunOutcome(str(p.config), p.seed, str(p.run_dir), "skip", "skipped", None, 0.0,
                              "already finished", datetime.now(timezone.utc).isoformat(timespec="seconds")))
    running: list[tuple[PlannedRun, subprocess.Popen, float, object]] = []
    try:
        while pending or running:
            while pending and len(running) < jobs:
                p = pending.pop(0)
                log_dir.mkdir(parents=True, exist_ok=True)
                fh = open(log_dir / f"{p.config.stem}_seed{p.seed}.log", "a", encoding="utf-8")
                fh.write(f"$ {' '.join(_quote(c) for c in p.command)}\n")
                fh.flush()
                try:
                    proc = subprocess.Popen(p.command, stdout=fh, stderr=subprocess.STDOUT, env=env)
                except OSError as exc:  # command not found / not executable
                    fh.close()
                    outcome = _finish(p, 127, 0.0)
                    outcome.message = f"could not start trainer: {exc}"
                    record(outcome)
                    continue
                running.append((p, proc, time.monotonic(), fh))
            still = []
            for p, proc, t0, fh in running:
                code = proc.poll()
                if code is None:
                    still.append((p, proc, t0, fh))
                    continue
                fh.close()
                record(_finish(p, code, time.monotonic() - t0))
            running = still
            if running:
                time.sleep(0.05)
    except KeyboardInterrupt:
        deadline = time.monotonic() + INTERRUPT_GRACE_S
        while any(proc.poll() is None for _, proc, _, _ in running) and time.monotonic() < deadline:
            time.sleep(0.05)
        for p, proc, t0, fh in running:
            if proc.poll() is None:
                proc.terminate()
        for p, proc, t0, fh in running:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            fh.close()
            outcome = _finish(p, proc.returncode if proc.returncode is not None else -2, time.monotonic() - t0)
            outcome.message = "interrupted by the user (resume by running the same sweep again)"
            outcome.status = "failed"
            record(outcome)
        raise
    return outcomes


def default_train_cmd() -> list[str]:
    """``python -m metacal.train`` with the current interpreter: works from a checkout and after ``pip install``."""
    return [sys.executable, "-m", "metacal.train"]


def _checkout_root() -> Path | None:
    """The source checkout this metacal was imported from (it has pyproject.toml), or None when installed."""
    import metacal

    root = Path(metacal.__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() else None
