"""Run a grid of training configs × seeds with the trainer; finished runs are skipped, interrupted ones resumed.

A run is finished when its metrics.json says "finished": true (metacal/run/layout.py); it is resumed
(--resume) when it has checkpoints/, restarted (--overwrite) when its directory is non-empty without
checkpoints (it died before the first one), started otherwise.

    python scripts/sweep.py --base configs/fashion_mnist/base.yaml --methods ce focal3 auto_gamma \
        --seeds 0 1 2 --out runs/sweep_fmnist [--jobs N] [--set k=v ...] [--dry-run] [--train-cmd "..."]
    python scripts/sweep.py --configs my/ce.yaml my/focal.yaml ...   # files, or dataset × method pairs
    metacal-sweep ...            # the same, as the installed console script

``--base B --methods m1 m2`` is ``--configs <B's folder>/m1.yaml <B's folder>/m2.yaml``: a pair with no file of
its own is composed at load time from the folder's base.yaml and configs/methods/<m>.yaml
(metacal/train/config.py, ``composed_bases``).

Run directories: OUT/<config-stem>/seed<S>. Log: OUT/sweep_log.jsonl (one line per run with its exit code),
the command itself: OUT/sweep_command.txt (the report prints it),
trainer output: OUT/logs/<stem>_seed<S>.log. Exit code 0 if every run succeeded (or was already finished),
1 if any failed, 2 on bad input: with metacal's trainer that includes every config that will train, loaded with
the --set overrides before the first run starts. Then: python scripts/report.py OUT

Progress: a bar on stderr when stderr is a terminal; otherwise (a log file, a pipe) one plain line per
finished run on stdout, so logs hold no carriage returns.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import Callable, Sequence

from metacal.run.layout import SWEEP_COMMAND_FILE
from metacal.sweep.plan import (PlannedRun, RunOutcome, default_train_cmd, execute_plan, format_plan, plan_sweep,
                                split_shared_bases)

PROG = "python scripts/sweep.py"


def parse_args(argv: list[str] | None = None, prog: str = PROG) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", nargs="+", help="config YAML files (the grid's methods)")
    ap.add_argument("--base", help="a dataset folder's base.yaml, with --methods: each method composed on it")
    ap.add_argument("--methods", nargs="+", metavar="NAME",
                    help="with --base: methods of configs/methods/ (or files beside the base), e.g. ce focal3")
    ap.add_argument("--seeds", nargs="+", type=int, required=True, help="seeds, e.g. 0 1 2")
    ap.add_argument("--out", required=True, help="sweep directory; runs go to OUT/<config-stem>/seed<S>")
    ap.add_argument("--jobs", type=int, default=1,
                    help="trainer processes at a time (default 1); each gets OMP_NUM_THREADS=cores//N unless set")
    ap.add_argument("--set", nargs="+", action="extend", default=[], metavar="K=V", dest="overrides",
                    help="config overrides passed to every run (not run.seed)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and exit without training")
    ap.add_argument("--train-cmd", default=None,
                    help="trainer command (default: this interpreter + -m metacal.train); split like a shell")
    return ap.parse_args(argv)


def grid_configs(args: argparse.Namespace) -> list[str]:
    """The configs of the grid: ``--configs`` as given, or ``--base``'s folder × ``--methods``."""
    if args.configs and (args.base or args.methods):
        raise ValueError("give either --configs or --base with --methods, not both")
    if args.configs:
        return list(args.configs)
    if not (args.base and args.methods):
        raise ValueError("no configs given: pass --configs FILE [FILE ...] or --base BASE.yaml --methods NAME ...")
    base = Path(args.base)
    if base.name != "base.yaml" or not base.is_file():
        raise ValueError(f"--base must be a dataset folder's base.yaml (e.g. configs/fashion_mnist/base.yaml); "
                         f"got {args.base}")
    return [str(base.parent / f"{name}.yaml") for name in args.methods]


def runs_metacal_trainer(train_cmd: Sequence[str]) -> bool:
    """Whether ``train_cmd`` is metacal's trainer (the default ``-m metacal.train``, ``metacal-train`` or this
    checkout's ``scripts/train.py``, also under torchrun or accelerate launch), whose config loader the sweep can
    run first. A launcher of one's own (a registered loss or learner) reads its configs itself."""
    import metacal

    script = Path(metacal.__file__).resolve().parents[1] / "scripts" / "train.py"
    return any(t == "metacal.train" or Path(t).name == "metacal-train"
               or (t.endswith(".py") and Path(t).resolve() == script) for t in train_cmd)


def check_configs(plan: Sequence[PlannedRun], overrides: Sequence[str], train_cmd: Sequence[str]) -> None:
    """Each config that will train, loaded with the sweep's overrides as metacal's trainer loads it: a config
    error (an unknown key, a value out of range) is one line before any run starts, not one failed run per
    seed. Another trainer (``--train-cmd``) reads its configs itself."""
    from metacal.train.config import ConfigError, load_config

    if not runs_metacal_trainer(train_cmd):
        return
    for config in dict.fromkeys(p.config for p in plan if p.action != "skip"):
        try:
            load_config(config, list(overrides))
        except ConfigError as err:
            raise ValueError(f"{config}: {err}") from None


def check_out(out: Path) -> None:
    """ValueError when no run directory could be made or written below ``out``."""
    from metacal.writable import folder_problem

    if problem := folder_problem(out):
        raise ValueError(f"--out {problem}")


def _log_path(out: Path, outcome: RunOutcome) -> Path:
    return out / "logs" / f"{Path(outcome.config).stem}_seed{outcome.seed}.log"


def progress_reporter(total: int, out: Path, interactive: bool) -> tuple[Callable[[RunOutcome], None],
                                                                         Callable[[], None]]:
    """(report one outcome, close): a tqdm bar when ``interactive`` (stderr is a terminal), else one
    plain line per run on stdout — ``[3/12] ce/seed1: ok (41.0 s)`` — and nothing with a carriage return."""
    done = [0]
    if interactive:
        from tqdm import tqdm

        bar = tqdm(total=total, desc="sweep", unit="run", dynamic_ncols=True)

        def report(outcome: RunOutcome) -> None:
            bar.update(1)
            bar.set_postfix_str(f"{Path(outcome.config).stem}/seed{outcome.seed}: {outcome.status}")
            if outcome.status == "failed":
                tqdm.write(f"FAILED {Path(outcome.config).stem}/seed{outcome.seed}: {outcome.message} "
                           f"(log: {_log_path(out, outcome)})")

        return report, bar.close

    def report_line(outcome: RunOutcome) -> None:
        done[0] += 1
        line = f"[{done[0]}/{total}] {Path(outcome.config).stem}/seed{outcome.seed}: {outcome.status}"
        if outcome.status == "ok":
            line += f" ({outcome.seconds:.1f} s)"
        elif outcome.status == "failed":
            line += f" — {outcome.message} (log: {_log_path(out, outcome)})"
        print(line, flush=True)

    return report_line, lambda: None


def listen_for_ctrl_c() -> Callable[[], None]:
    """Ctrl-C raises KeyboardInterrupt here even when the sweep was started with SIGINT ignored.

    A job that a non-interactive shell starts in the background (``sweep … &`` in a script, a CI step)
    inherits SIGINT as ignored, and Python then installs no handler of its own. The trainers the sweep
    starts install theirs regardless (metacal/train/preemption.py), so without this a Ctrl-C to the
    process group stopped every trainer with a checkpoint while the sweep went on to record their exit
    code 130 as failures and exit 1, instead of stopping and exiting 130 itself. Returns the undo.
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    return lambda: signal.signal(signal.SIGINT, previous)


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    restore = listen_for_ctrl_c()
    try:
        return _sweep(argv, prog)
    except KeyboardInterrupt:
        print("sweep: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    finally:
        restore()


def _sweep(argv: list[str] | None, prog: str) -> int:
    args = parse_args(argv, prog)
    try:
        train_cmd = shlex.split(args.train_cmd) if args.train_cmd else default_train_cmd()
        if not train_cmd:
            raise ValueError("--train-cmd is empty")
        if args.jobs < 1:
            raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
        check_out(Path(args.out))
        configs, bases = split_shared_bases(grid_configs(args))
        plan = plan_sweep(configs, args.seeds, args.out, train_cmd, args.overrides)
        check_configs(plan, args.overrides, train_cmd)
    except (ValueError, FileNotFoundError) as exc:
        print(f"sweep: error: {exc}", file=sys.stderr)
        return 2
    if bases:
        print("not methods (other configs use them as base:): " + ", ".join(map(str, bases)))
    print(format_plan(plan), flush=True)
    if args.dry_run:
        return 0
    out = Path(args.out)
    given = sys.argv[1:] if argv is None else argv
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / SWEEP_COMMAND_FILE).write_text(shlex.join([*shlex.split(prog), *given]) + "\n")
    except OSError as exc:
        print(f"sweep: error: --out {out} cannot be written: {exc.strerror or exc}", file=sys.stderr)
        return 2
    report, close = progress_reporter(len(plan), out, sys.stderr.isatty())
    try:
        outcomes = execute_plan(plan, out, jobs=args.jobs, progress=report)
    finally:
        close()
    failed = [o for o in outcomes if o.status == "failed"]
    counts = {s: sum(o.status == s for o in outcomes) for s in ("ok", "skipped", "failed")}
    print(f"sweep done: {counts['ok']} ok, {counts['skipped']} skipped, {counts['failed']} failed "
          f"(log: {out / 'sweep_log.jsonl'})")
    for o in failed:
        print(f"  failed: {Path(o.config).stem}/seed{o.seed} — {o.message}", file=sys.stderr)
    return 1 if failed else 0


def console_main() -> int:
    """Entry point of the ``metacal-sweep`` console script."""
    return main(prog="metacal-sweep")


if __name__ == "__main__":
    sys.exit(main(prog="python -m metacal.sweep.cli"))
