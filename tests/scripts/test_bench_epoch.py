"""scripts/bench_epoch.py's options: a regime is a config or its folder, and bad input (a config or method that
does not exist, a non-positive count, missing data) is one line and exit 2, with nothing written. The
measurement itself: tests/test_gpu_check.py and tests/experiments/benchmark/test_flops.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from script_loader import load_script

REPO = Path(__file__).resolve().parents[2]
REGIME = REPO / "configs" / "fashion_mnist_overconfident"


def report():
    return load_script("bench_epoch")  # the launcher; its main is experiments.benchmark.epoch_report.main


def test_a_regime_is_a_config_or_its_folder():
    from experiments.benchmark.epoch_report import bad_input, method_config, parse, regime_config

    assert regime_config(str(REGIME)) == REGIME / "ce.yaml"
    assert regime_config(str(REGIME / "focal.yaml")) == REGIME / "focal.yaml"
    for given in (REGIME, REGIME / "focal.yaml"):
        assert method_config(str(given), "auto_gamma") == str(REGIME / "auto_gamma.yaml")
    # every method is loaded up front; dual_focal has no file of its own there (composed from base + methods/)
    assert not (REGIME / "dual_focal.yaml").exists()
    assert bad_input(parse(["--configs", str(REGIME), "--methods", "ce", "dual_focal"])) is None


@pytest.mark.parametrize("argv, says", [
    (["--configs", "no/such/ce.yaml"], "config file not found: no/such/ce.yaml"),
    (["--configs", str(REGIME), "--methods", "ce", "nope"], "unknown method 'nope'; available: "),
    (["--steps", "0"], "--steps and --threads must be positive"),
    (["--threads", "-1"], "--steps and --threads must be positive"),
], ids=["config", "method", "steps", "threads"])
def test_bad_options_are_one_line_and_write_nothing(tmp_path, capsys, argv, says):
    page = tmp_path / "performance.md"
    assert report().main([*argv, "--output", str(page)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("bench_epoch: error: ") and says in err
    assert not page.exists()


def test_missing_data_is_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("METACAL_NO_SYSTEM_DATASETS", "1")  # the loaders leave /usr/share/datasets out
    monkeypatch.setenv("METACAL_DATA", str(tmp_path / "empty"))
    monkeypatch.setenv("HOME", str(tmp_path))  # and the user's cache
    page = tmp_path / "performance.md"
    assert report().main(["--configs", str(REGIME), "--methods", "ce", "--steps", "1", "--output", str(page)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("bench_epoch: error: dataset 'fashion_mnist' not found")
    assert not page.exists()


def test_output_problem_names_what_stops_the_page_being_written(tmp_path):
    from experiments.benchmark.epoch_report import output_problem

    (tmp_path / "page.md").write_text("old")
    assert output_problem(tmp_path / "page.md") is None and output_problem(tmp_path / "new.md") is None
    assert output_problem(tmp_path) == f"{tmp_path} is a folder; give the page's file"
    assert output_problem(tmp_path / "no" / "page.md") == f"cannot write {tmp_path / 'no' / 'page.md'}: no folder " \
                                                          f"{tmp_path / 'no'}"


def test_every_benchmark_that_writes_a_page_refuses_an_unwritable_one_before_measuring(tmp_path, capsys):
    """bench_epoch, bench_meta_step, the FLOP count, bench_auto and the GPU check: exit 2 and one line, at once
    (each would otherwise measure for minutes and then fail on the write)."""
    from experiments.benchmark import auto_cost, flops, gpu_check

    page = tmp_path / "no" / "page.md"
    says = f"cannot write {page}: no folder {tmp_path / 'no'}"
    for main, argv in ((report().main, ["--output"]), (load_script("bench_meta_step").main, ["--output"]),
                       (auto_cost.main, ["--out"])):
        assert main([*argv, str(page)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.endswith(f"error: {says}\n"), err
    for main in (flops.main, gpu_check.main):  # argparse's own error: the usage line, then the message
        with pytest.raises(SystemExit) as stopped:
            main(["--output", str(page)])
        assert stopped.value.code == 2 and capsys.readouterr().err.endswith(f"error: {says}\n")
