"""scripts/gpu_check.py: one command that checks a CUDA machine end to end and records what it measured.

In order (each a subprocess with its own time limit; about 6 minutes on one H100):

1. every method family for one short epoch (``run.max_steps_per_epoch``) in fp32 and bf16: CE, focal, AdaFocal,
   dual focal, FLγ-SECE (``jvp`` and ``higher``), FLγ-DECE, auto γ — the ResNet regime's configs;
2. the same CE run under ``accelerate launch --num_processes 1``;
3. SIGTERM during a run (exit 75, a checkpoint of the current step), then ``--resume`` (exit 0);
4. scripts/bench_epoch.py and scripts/bench_meta_step.py.

docs/performance_gpu.md gets the device's name (``torch.cuda.get_device_name``), each check's exit code and
seconds, and the benchmarks' tables. Without CUDA it says so in one line and exits 0 (CI does not run it);
``--dry-run`` prints the commands and loads every training config with its overrides (tests/test_gpu_check.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REGIME = "configs/fashion_mnist_resnet_overconfident"
#: (name, config stem, extra overrides) of the method families
FAMILIES = (("ce", "ce", ()), ("focal", "focal", ()), ("adafocal", "adafocal", ()), ("dual_focal", "dual_focal", ()),
            ("flgamma_sece_jvp", "flgamma_sece", ("meta.backend=jvp",)),
            ("flgamma_sece_higher", "flgamma_sece", ("meta.backend=higher",)),
            ("flgamma_dece", "flgamma_dece", ()), ("auto_gamma", "auto_gamma", ()))
PRECISIONS = ("no", "bf16")
SHORT = ("schedule.epochs=1", "schedule.milestones=[]", "run.max_steps_per_epoch=30", "logging.progress_bar=false")
EXIT_PREEMPTED = 75


@dataclass
class Check:
    """One command and what it must exit with; ``sigterm_after``: send SIGTERM after this many seconds."""

    name: str
    argv: list[str]
    expect: int = 0
    timeout: float = 120.0
    sigterm_after: float | None = None
    config: str | None = None  # the training config and overrides (for --dry-run's loading)
    overrides: list[str] = field(default_factory=list)


def train_argv(config: str, run_dir: Path, overrides: list[str], resume: bool = False) -> list[str]:
    argv = ["scripts/train.py", "--config", config, "--run-dir", str(run_dir), "--overwrite"]
    if resume:
        argv = ["scripts/train.py", "--run-dir", str(run_dir), "--resume"]
    return argv + (["--set", *overrides] if overrides else [])


def checks(out: Path) -> list[Check]:
    """Every check, in order; run directories under ``out``."""
    python = sys.executable
    found: list[Check] = []
    for name, stem, extra in FAMILIES:
        for precision in PRECISIONS:
            config, sets = f"{REGIME}/{stem}.yaml", [*SHORT, f"run.mixed_precision={precision}", *extra]
            found.append(Check(f"{name} {precision}", [python, *train_argv(config, out / f"{name}-{precision}", sets)],
                               config=config, overrides=sets))
    config = f"{REGIME}/ce.yaml"
    found.append(Check("accelerate launch --num_processes 1", [
        python, "-m", "accelerate.commands.launch", "--num_processes", "1", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", *train_argv(config, out / "launch", list(SHORT))],
        config=config, overrides=list(SHORT)))
    long = ["schedule.epochs=2", "schedule.milestones=[]", "logging.progress_bar=false"]
    found.append(Check("SIGTERM mid-run → 75", [python, *train_argv(config, out / "sigterm", long)],
                       expect=EXIT_PREEMPTED, sigterm_after=25.0, config=config, overrides=long))
    found.append(Check("--resume after SIGTERM → 0", [python, *train_argv(config, out / "sigterm", [], resume=True)],
                       timeout=240.0))
    found.append(Check("bench_epoch", [python, "scripts/bench_epoch.py", "--steps", "100", "--no-write", "--json"],
                       timeout=180.0))
    found.append(Check("bench_meta_step", [python, "scripts/bench_meta_step.py", "--reps", "15", "--no-write",
                                           "--json"], timeout=120.0))
    return found


def run(check: Check) -> tuple[int, float, str]:
    """(exit code, seconds, output) of one check; 124 when it ran past its time limit."""
    started = time.perf_counter()
    proc = subprocess.Popen(check.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        if check.sigterm_after is not None:
            try:
                proc.wait(timeout=check.sigterm_after)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=check.timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        output, code = proc.communicate()[0], 124
    return code, time.perf_counter() - started, output or ""


def last_json(output: str) -> dict | None:
    lines = [line for line in output.strip().splitlines() if line.startswith("{")]
    try:
        return json.loads(lines[-1]) if lines else None
    except ValueError:
        return None


def report(device: str, results: list[tuple[Check, int, float, str]]) -> str:
    import torch

    from .epoch_report import tables

    rows = [f"| {c.name} | {c.expect} | {code} | {seconds:.1f} | {'ok' if code == c.expect else 'FAILED'} |"
            for c, code, seconds, _ in results]
    text = [f"# GPU check\n\nGenerated by `python scripts/gpu_check.py` — do not edit by hand.\n\nDevice: {device}; "
            f"torch {torch.__version__}; {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC.\n",
            "| check | expected exit | exit | seconds | |", "|---|---:|---:|---:|---|", *rows]
    for check, code, _, output in results:
        found = last_json(output) if check.name.startswith("bench") else None
        if check.name == "bench_epoch" and found:
            text += ["", "## Epoch time (scripts/bench_epoch.py --steps 100)", "", tables(found)]
        elif check.name == "bench_meta_step" and found:
            text += ["", "## Meta step (scripts/bench_meta_step.py --reps 15)", "", "```",
                     json.dumps(found, indent=1)[:4000], "```"]
    return "\n".join(text) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="gpu_check.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--dry-run", action="store_true", help="print the commands, load every config, run nothing")
    p.add_argument("--out", default="runs/gpu_check", help="directory of the check runs")
    p.add_argument("--output", default="docs/performance_gpu.md")
    args = p.parse_args(argv)
    import torch

    todo = checks(Path(args.out))
    if args.dry_run:
        from metacal.train import load_config

        for check in todo:
            if check.config is not None:
                load_config(check.config, check.overrides)
            print(" ".join(check.argv))
        return 0
    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device here; nothing checked")
        return 0
    device = torch.cuda.get_device_name()
    results = []
    for check in todo:
        code, seconds, output = run(check)
        print(f"{check.name}: exit {code} (expected {check.expect}), {seconds:.1f} s", flush=True)
        if code != check.expect:
            print(output[-2000:], flush=True)
        results.append((check, code, seconds, output))
    Path(args.output).write_text(report(device, results))
    return 0 if all(code == c.expect for c, code, _, _ in results) else 1
