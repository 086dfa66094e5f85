"""scripts/sweep.py: planning (skip finished / resume interrupted / start new), dry run, execution with a fake
trainer (exit codes, log, skipping on a second pass), and one-line errors for bad input."""

import importlib.util
import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from metacal.sweep.plan import build_command, plan_sweep

REPO = Path(__file__).resolve().parents[2]

FAKE_TRAINER = """
import argparse, json, os, pathlib, sys
ap = argparse.ArgumentParser()
ap.add_argument("--config", required=True)
ap.add_argument("--set", action="append", default=[])  # as scripts/train.py: one KEY=VALUE per --set
ap.add_argument("--overwrite", action="store_true")
ap.add_argument("--run-dir", required=True)
ap.add_argument("--resume", action="store_true")
a = ap.parse_args()
d = pathlib.Path(a.run_dir)
d.mkdir(parents=True, exist_ok=True)
with open(d / "calls.jsonl", "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
(d / "omp.txt").write_text(os.environ.get("OMP_NUM_THREADS", "unset"))
stem = pathlib.Path(a.config).stem
if stem.startswith("bad"):
    print("boom", file=sys.stderr)
    sys.exit(3)
if stem.startswith("nodone"):
    sys.exit(0)
(d / "metrics.json").write_text('{"finished": true}')
"""


def _sweep_main(argv):
    spec = importlib.util.spec_from_file_location("sweep_cli", REPO / "scripts" / "sweep.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main(argv)


@pytest.fixture
def grid(tmp_path):
    configs = tmp_path / "configs"
    configs.mkdir()
    for stem in ("ce", "focal", "bad", "nodone"):
        (configs / f"{stem}.yaml").write_text(f"loss:\n  name: {stem}\n")
    trainer = tmp_path / "fake_train.py"
    trainer.write_text(FAKE_TRAINER)
    return configs, f"{sys.executable} {trainer}", tmp_path / "out"


def test_plan_skip_resume_start(grid):
    configs, train_cmd, out = grid
    (out / "ce" / "seed0").mkdir(parents=True)
    (out / "ce" / "seed0" / "metrics.json").write_text('{"finished": true}')  # finished → skip
    (out / "ce" / "seed1" / "checkpoints").mkdir(parents=True)
    (out / "ce" / "seed1" / "checkpoints" / "last.pt").write_bytes(b"x")  # interrupted → resume
    (out / "focal" / "seed0" / "checkpoints").mkdir(parents=True)  # died before a checkpoint → restart
    (out / "focal" / "seed0" / "config.yaml").write_text("")
    (out / "focal" / "seed2").mkdir(parents=True)  # empty directory → plain start
    (out / "focal" / "seed1" / "checkpoints").mkdir(parents=True)
    (out / "focal" / "seed1" / "checkpoints" / "last.pt").write_bytes(b"x")
    (out / "focal" / "seed1" / "metrics.json").write_text(json.dumps({"finished": True}))  # finished wins
    plan = plan_sweep([configs / "ce.yaml", configs / "focal.yaml"], [0, 1, 2], out, ["T"], ["optim.lr=0.05"])
    assert [(p.name, p.action) for p in plan] == [
        ("ce/seed0", "skip"), ("ce/seed1", "resume"), ("ce/seed2", "start"),
        ("focal/seed0", "restart"), ("focal/seed1", "skip"), ("focal/seed2", "start"),
    ]  # fmt: skip
    assert plan[0].command == []
    assert plan[1].command == ["T", "--config", str(configs / "ce.yaml"), "--set", "run.seed=1",
                               "--set", "optim.lr=0.05", "--run-dir", str(out / "ce" / "seed1"), "--resume"]
    assert plan[2].command[-1] == str(out / "ce" / "seed2")  # a new run is not resumed
    assert plan[3].command[-1] == "--overwrite" and "--resume" not in plan[3].command


@pytest.mark.parametrize("configs, seeds, overrides, message", [
    (["ce.yaml"], [0], ["run.seed=3"], "not allowed in a sweep"),
    (["ce.yaml"], [0], ["lr"], "must look like section.key=value"),
    (["ce.yaml"], [0, 0], [], "duplicate seeds"),
    (["ce.yaml"], [0, -1, 2**32], [], r"--seeds must lie in \[0, 2\*\*32 - 1\] \(run.seed\); got -1 4294967296"),
    (["missing.yaml"], [0], [], "config file not found"),
    (["ce.yaml", "sub/ce.yaml"], [0], [], "share the stem 'ce'"),
    ([], [0], [], "no configs"),
])  # fmt: skip
def test_plan_rejects_bad_input(tmp_path, configs, seeds, overrides, message):
    (tmp_path / "sub").mkdir()
    (tmp_path / "ce.yaml").write_text("")
    (tmp_path / "sub" / "ce.yaml").write_text("")
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        plan_sweep([tmp_path / c for c in configs], seeds, tmp_path / "out", ["T"], overrides)


def test_build_command_without_overrides():
    assert build_command(["py", "t.py"], Path("c/a.yaml"), 4, Path("o/a/seed4"), [], "start") == [
        "py", "t.py", "--config", "c/a.yaml", "--set", "run.seed=4", "--run-dir", "o/a/seed4"]


def test_dry_run_prints_plan_and_runs_nothing(grid, capsys):
    configs, train_cmd, out = grid
    (out / "ce" / "seed1" / "checkpoints").mkdir(parents=True)
    (out / "ce" / "seed1" / "checkpoints" / "x").write_text("")
    code = _sweep_main(["--configs", str(configs / "ce.yaml"), "--seeds", "0", "1", "--out", str(out),
                        "--train-cmd", train_cmd, "--dry-run", "--set", "a.b=1"])
    assert code == 0
    text = capsys.readouterr().out
    assert "start   ce/seed0" in text and "resume  ce/seed1" in text and "--resume" in text
    assert "--set run.seed=0 --set a.b=1" in text and "2 runs: 0 skip, 1 resume, 0 restart, 1 start" in text
    assert not (out / "ce" / "seed0").exists() and not (out / "sweep_log.jsonl").exists()


def test_sweep_runs_logs_and_fails_on_failed_run(grid, capsys, monkeypatch):
    configs, train_cmd, out = grid
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    (out / "focal" / "seed1" / "checkpoints").mkdir(parents=True)
    (out / "focal" / "seed1" / "checkpoints" / "last.pt").write_text("")
    cfgs = [str(configs / f"{s}.yaml") for s in ("ce", "focal", "bad", "nodone")]
    argv = ["--configs", *cfgs, "--seeds", "0", "1", "--out", str(out), "--train-cmd", train_cmd, "--jobs", "2"]
    assert _sweep_main(argv) == 1  # bad (exit 3) and nodone (exit 0 without "finished") failed
    assert (out / "sweep_command.txt").read_text() == "python scripts/sweep.py " + shlex.join(argv) + "\n"
    log = [json.loads(line) for line in (out / "sweep_log.jsonl").read_text().splitlines()]
    by_name = {(Path(r["config"]).stem, r["seed"]): r for r in log}
    assert len(log) == 8
    assert {k for k, r in by_name.items() if r["status"] == "ok"} == {("ce", 0), ("ce", 1), ("focal", 0), ("focal", 1)}
    assert by_name[("bad", 0)]["exit_code"] == 3 and by_name[("bad", 0)]["status"] == "failed"
    assert by_name[("nodone", 1)]["exit_code"] == 0 and "not marked finished" in by_name[("nodone", 1)]["message"]
    assert by_name[("focal", 1)]["action"] == "resume"
    call = json.loads((out / "focal" / "seed1" / "calls.jsonl").read_text())
    assert call[-1] == "--resume" and call[call.index("run.seed=1") - 1] == "--set"
    assert "boom" in (out / "logs" / "bad_seed0.log").read_text()  # trainer output kept per run
    cores = os.cpu_count() or 1  # 2 jobs share the cores: each trainer gets cores // 2 threads
    assert (out / "ce" / "seed0" / "omp.txt").read_text() == str(max(1, cores // 2))
    captured = capsys.readouterr()
    assert "4 ok, 0 skipped, 4 failed" in captured.out and "bad/seed0" in captured.err

    # second pass: finished runs are skipped, only the failures run again (and fail again)
    assert _sweep_main(argv) == 1
    log = [json.loads(line) for line in (out / "sweep_log.jsonl").read_text().splitlines()][8:]
    assert sorted((Path(r["config"]).stem, r["seed"], r["status"]) for r in log if r["status"] == "skipped") == [
        ("ce", 0, "skipped"), ("ce", 1, "skipped"), ("focal", 0, "skipped"), ("focal", 1, "skipped")]
    assert len((out / "ce" / "seed0" / "calls.jsonl").read_text().splitlines()) == 1  # not re-run
    assert {r["action"] for r in log if r["status"] == "failed"} == {"restart"}  # non-empty dirs: --overwrite

    # only good configs → exit 0
    ok_argv = ["--configs", *cfgs[:2], "--seeds", "0", "1", "--out", str(out), "--train-cmd", train_cmd]
    assert _sweep_main(ok_argv) == 0


def test_sweep_bad_input_is_one_line_exit_2(grid, capsys):
    configs, train_cmd, out = grid
    code = _sweep_main(["--configs", str(configs / "ce.yaml"), "--seeds", "0", "--out", str(out),
                        "--set", "run.seed=1", "--train-cmd", train_cmd])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("sweep: error:") and err.count("\n") == 1
    code = _sweep_main(["--configs", str(configs / "ce.yaml"), "--seeds", "0", "--out", str(out), "--jobs", "0"])
    assert code == 2 and "--jobs must be >= 1" in capsys.readouterr().err
    # a trainer that cannot be started counts as a failed run, not a crash
    code = _sweep_main(["--configs", str(configs / "ce.yaml"), "--seeds", "0", "--out", str(out),
                        "--train-cmd", str(out / "no-such-trainer")])
    assert code == 1


@pytest.mark.parametrize("extra, message", [
    (["--set", "optim.lr=.nan"], "quickstart.yaml: optim.lr must be a finite number >= 0; got nan"),
    (["--set", "optim.lrr=0.1"], "quickstart.yaml: unknown config key 'optim.lrr' (did you mean 'optim.lr'?)"),
    (["--dry-run", "--set", "optim.lrr=0.1"], "unknown config key 'optim.lrr'"),
])
def test_a_config_error_stops_the_sweep_before_any_run(tmp_path, capsys, extra, message):
    """With metacal's trainer the sweep loads every config with its overrides first: one line, exit 2, no
    directory, where each run used to fail on its own with exit code 2."""
    out = tmp_path / "out"
    code = _sweep_main(["--configs", str(REPO / "configs" / "quickstart.yaml"), "--seeds", "0", "1",
                        "--out", str(out), *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("sweep: error: ") and err.count("\n") == 1 and message in err, err
    assert not out.exists()


def test_an_out_that_cannot_be_created_is_one_line(grid, tmp_path, capsys):
    configs, train_cmd, _ = grid
    (tmp_path / "file").write_text("")
    for out in (tmp_path / "file", tmp_path / "file" / "o"):
        for dry in ([], ["--dry-run"]):
            code = _sweep_main(["--configs", str(configs / "ce.yaml"), "--seeds", "0", "--out", str(out),
                                "--train-cmd", train_cmd, *dry])
            err = capsys.readouterr().err
            assert code == 2 and err == f"sweep: error: --out {out} cannot be written: {tmp_path / 'file'} is a file\n"
    if Path("/proc/self").is_dir():  # Linux: no directory can be made in /proc, not even by root
        code = _sweep_main(["--configs", str(configs / "ce.yaml"), "--seeds", "0", "--out", "/proc/metacal_sweep",
                            "--train-cmd", train_cmd])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("sweep: error: --out /proc/metacal_sweep cannot be written: "), err
        assert err.count("\n") == 1


def test_which_trainers_get_their_configs_checked_first():
    from metacal.sweep.cli import runs_metacal_trainer
    from metacal.sweep.plan import default_train_cmd

    assert runs_metacal_trainer(default_train_cmd())
    assert runs_metacal_trainer(shlex.split("torchrun --standalone --nproc_per_node 2 -m metacal.train"))
    assert runs_metacal_trainer(["accelerate", "launch", str(REPO / "scripts" / "train.py")])
    assert runs_metacal_trainer(["/venv/bin/metacal-train"])
    assert not runs_metacal_trainer(shlex.split("python my_trainer.py"))
    assert not runs_metacal_trainer(shlex.split("python my_project/scripts/train.py"))  # a launcher of one's own


def test_shared_base_configs_are_not_methods(tmp_path, capsys):
    """``--configs configs/<dataset>/*.yaml`` also matches base.yaml; a file another listed config names
    under ``base:`` is skipped (both the string and the list form of ``base:``)."""
    from metacal.sweep.plan import split_shared_bases

    d = tmp_path / "configs" / "data"
    (tmp_path / "configs" / "methods").mkdir(parents=True)
    d.mkdir()
    (d / "base.yaml").write_text("data:\n  name: mnist1d\nmodel:\n  name: mlp\n")
    (tmp_path / "configs" / "methods" / "focal.yaml").write_text("loss:\n  name: focal\n")
    (d / "ce.yaml").write_text("base: base.yaml\n")
    (d / "focal.yaml").write_text("base: [base.yaml, ../methods/focal.yaml]\n")
    (d / "alone.yaml").write_text("data:\n  name: mnist1d\nmodel:\n  name: mlp\nloss:\n  name: ce\n")
    listed = sorted(d.glob("*.yaml"))
    methods, bases = split_shared_bases(listed)
    assert [p.name for p in methods] == ["alone.yaml", "ce.yaml", "focal.yaml"] and bases == [d / "base.yaml"]
    assert split_shared_bases([d / "base.yaml"]) == ([d / "base.yaml"], [])  # alone, a base is a config
    code = _sweep_main(["--configs", *map(str, listed), "--seeds", "0", "--out", str(tmp_path / "o"), "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0 and f"not methods (other configs use them as base:): {d / 'base.yaml'}" in out
    assert "3 runs: 0 skip, 0 resume, 0 restart, 3 start" in out


def test_progress_is_plain_lines_when_stderr_is_not_a_terminal(grid, capsys):
    """Under pytest (as in a log file) stderr is no terminal: one line per run, no carriage returns."""
    configs, train_cmd, out = grid
    (out / "ce" / "seed1").mkdir(parents=True)
    (out / "ce" / "seed1" / "metrics.json").write_text('{"finished": true}')  # finished: skipped
    argv = ["--configs", str(configs / "ce.yaml"), str(configs / "bad.yaml"), "--seeds", "0", "1", "--out", str(out),
            "--train-cmd", train_cmd]
    assert _sweep_main(argv) == 1
    captured = capsys.readouterr()
    assert "\r" not in captured.out and "\r" not in captured.err
    lines = [ln for ln in captured.out.splitlines() if ln.startswith("[")]
    assert [ln.split(":")[0] for ln in lines] == ["[1/4] ce/seed1", "[2/4] ce/seed0", "[3/4] bad/seed0",
                                                  "[4/4] bad/seed1"]
    assert lines[0] == "[1/4] ce/seed1: skipped" and lines[1].startswith("[2/4] ce/seed0: ok (")
    assert lines[2] == f"[3/4] bad/seed0: failed — exit code 3 (log: {out / 'logs' / 'bad_seed0.log'})"


def test_progress_bar_only_for_a_terminal(tmp_path, capsys):
    from metacal.sweep.cli import progress_reporter
    from metacal.sweep.plan import RunOutcome

    outcome = RunOutcome("c/ce.yaml", 0, str(tmp_path / "ce" / "seed0"), "start", "ok", 0, 1.5)
    report, close = progress_reporter(1, tmp_path, interactive=True)
    report(outcome)
    close()
    bar = capsys.readouterr()
    assert "\r" in bar.err and "ce/seed0: ok" in bar.err and bar.out == ""  # the bar redraws in place
    report, close = progress_reporter(1, tmp_path, interactive=False)
    report(outcome)
    close()
    assert capsys.readouterr() == ("[1/1] ce/seed0: ok (1.5 s)\n", "")


def test_base_and_methods_name_a_grid_over_one_dataset(tmp_path, capsys):
    """``--base D/base.yaml --methods a b`` plans D/a.yaml and D/b.yaml, files or composed pairs; a method that
    is neither, a --base that is no base.yaml, or both --configs and --base: one line, exit 2, nothing written."""
    (tmp_path / "methods").mkdir()
    d = tmp_path / "d"
    d.mkdir()
    (d / "base.yaml").write_text("data: {name: mnist1d}\nmodel: {name: mlp}\n")
    (tmp_path / "methods" / "focal3.yaml").write_text("loss: {name: focal, params: {gamma: 3.0}}\n")
    (d / "ce.yaml").write_text("loss: {name: ce}\nbase: base.yaml\n")
    out = tmp_path / "o"
    code = _sweep_main(["--base", str(d / "base.yaml"), "--methods", "ce", "focal3", "--seeds", "0", "1",
                        "--out", str(out), "--dry-run"])
    printed = capsys.readouterr().out
    assert code == 0 and "4 runs: 0 skip, 0 resume, 0 restart, 4 start" in printed
    assert f"--config {d / 'focal3.yaml'} --set run.seed=1" in printed
    for argv, message in [
        (["--base", str(d / "base.yaml"), "--methods", "focal4"], "unknown method 'focal4'; did you mean focal3"),
        (["--base", str(d / "ce.yaml"), "--methods", "ce"], "--base must be a dataset folder's base.yaml"),
        (["--configs", str(d / "ce.yaml"), "--base", str(d / "base.yaml"), "--methods", "ce"], "not both"),
        (["--methods", "ce"], "no configs given"),
    ]:
        assert _sweep_main([*argv, "--seeds", "0", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
