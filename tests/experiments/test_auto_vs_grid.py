"""experiments/auto_vs_grid.py (scripts/auto_vs_grid.py) on hand-made run folders: the per-seed grid pick is the lowest VALIDATION ECE (never
test), the paired differences are the hand-computed ones, and the page holds the command that made it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from experiments import auto_vs_grid
from experiments.benchmark import auto_cost
from metacal.metrics import overconfidence

# seed → method → (val ECE, test ECE, test error, test ECE after TS); the test ECE of the grid point with the
# lowest val ECE is not the lowest test ECE, so a pick made on test numbers would differ
RUNS = {
    0: {"ce": (0.10, 0.14, 0.30, 0.03), "focal": (0.06, 0.05, 0.31, 0.03), "focal2": (0.04, 0.06, 0.32, 0.03),
        "focal3": (0.05, 0.02, 0.33, 0.03), "focal4": (0.07, 0.04, 0.34, 0.03), "focal5": (0.08, 0.05, 0.35, 0.03),
        "auto_gamma": (0.04, 0.045, 0.315, 0.035)},
    1: {"ce": (0.11, 0.15, 0.29, 0.04), "focal": (0.07, 0.06, 0.30, 0.04), "focal2": (0.06, 0.05, 0.31, 0.04),
        "focal3": (0.03, 0.04, 0.32, 0.04), "focal4": (0.05, 0.03, 0.33, 0.04), "focal5": (0.09, 0.06, 0.34, 0.04),
        "auto_gamma": (0.05, 0.05, 0.32, 0.045)},
}


# seed → the automatic run's move per epoch: seed 0 raises, holds, lowers (2 moves, 1 reversal); seed 1 raises
# three times (3 moves, 0 reversals)
DECISIONS = {0: (1.0, 0.0, -1.0), 1: (1.0, 1.0, 1.0)}


# seed → the grid runs' validation gap mean(confidence − 1[correct]) by γ: seed 0 crosses 0 between γ 2 and 3
# (root 2 + 0.04 / 0.06), seed 1 stays over-confident up to γ 5 (root beyond the grid)
VAL_GAPS = {0: (0.2, 0.1, 0.04, -0.02, -0.1, -0.2), 1: (0.3, 0.2, 0.15, 0.1, 0.05, 0.01)}

# seed → the automatic run's selected network: its gap on validation and on test (on meta-val: auto.gap_selected)
AUTO_GAPS = {0: {"val": -0.05, "test": 0.01}, 1: {"val": 0.03, "test": -0.04}}


# the grid's folders and their γ, as their configs say (the script reads the configs, not these names)
GRID_GAMMA = {"ce": 0.0, "focal": 1.0, "focal2": 2.0, "focal3": 3.0, "focal4": 4.0, "focal5": 5.0}


def config_of(method: str) -> dict:
    """The resolved config's loss and learner of a hand-made run."""
    if method == "auto_gamma":
        return {"loss": {"name": "focal", "params": {"gamma": 1.0}}, "learner": "auto"}
    if method == "ce":
        return {"loss": {"name": "ce", "params": {}}, "learner": None}
    return {"loss": {"name": "focal", "params": {"gamma": GRID_GAMMA[method]}}, "learner": None}


def val_predictions(gap: float) -> dict[str, np.ndarray]:
    """Two 2-class samples predicted as class 0 with confidence c whose signed gap is ``gap``: one right and one
    wrong (gap = c − 1/2) when the gap is positive, both right (gap = c − 1) otherwise."""
    c = 0.5 + gap if gap > 0 else 1.0 + gap
    logits = np.array([[np.log(c / (1 - c)), 0.0]] * 2)
    return {"logits": logits, "labels": np.array([0, 1] if gap > 0 else [0, 0])}


def write_runs(root: Path) -> None:
    for seed, methods in RUNS.items():
        for method, (val_ece, ece, error, ece_ts) in methods.items():
            run = root / method / f"seed{seed}"
            run.mkdir(parents=True)
            (run / "config.yaml").write_text(yaml.safe_dump(config_of(method)))
            if method in GRID_GAMMA:
                (run / "predictions").mkdir()
                gap = VAL_GAPS[seed][int(GRID_GAMMA[method])]
                np.savez(run / "predictions" / "val.npz", **val_predictions(gap))
            if method == "auto_gamma":
                (run / "predictions").mkdir()
                for split, gap in AUTO_GAPS[seed].items():
                    np.savez(run / "predictions" / f"{split}.npz", **val_predictions(gap))
            auto = {"selected": 2.5 + seed, "gap_selected": 0.01 * (seed + 1), "gap_se_selected": 0.02,
                    "at_limit": seed == 0, "held": 3 * (1 - seed)} if method == "auto_gamma" else None
            metrics = {"finished": True, "epoch": 3, "val": {"ece": val_ece}, "test": {"ece": ece, "error": error},
                       "test_after_ts": {"ece": ece_ts, "temperature": 2.0}, "auto": auto}
            (run / "metrics.json").write_text(json.dumps(metrics))
            decisions = DECISIONS[seed]
            history = [{"epoch": e, "train": {"auto_gamma_trained": 1.0 + e, "auto_gap": 0.01, "auto_band": 0.02,
                                              "auto_decision": decisions[e - 1]} if auto else {}} for e in (1, 2, 3)]
            (run / "history.json").write_text(json.dumps(history))


def test_pick_on_validation_and_paired_differences(tmp_path, capsys):
    write_runs(tmp_path / "sweep")
    assert auto_vs_grid.main([str(tmp_path / "sweep"), "--out", str(tmp_path / "page.md"), "--title", "T"]) == 0
    out = capsys.readouterr().out
    assert "seed 0: γ = 2, seed 1: γ = 3" in out  # lowest val ECE: focal2 on seed 0, focal3 on seed 1
    # auto − pick: ECE (0.045 − 0.06, 0.05 − 0.04), error (0.315 − 0.32, 0.32 − 0.32)
    d_ece = np.array([0.045 - 0.06, 0.05 - 0.04])
    assert f"| Focal, auto γ | {100 * d_ece.mean():+.2f} [" in out
    assert f"| {100 * d_ece.max():+.2f} |" in out
    assert "| Focal, auto γ | 0 | 2.50 | 4.50 | 31.50 |" in out and "| grid pick | 1 | 3.00 | 4.00 | 32.00 |" in out
    # moves (2 + 3) / 2, reversals (1 + 0) / 2, gap / SE (0.01 / 0.02 + 0.02 / 0.02) / 2; the selected networks'
    # gaps in points: meta-val (1 + 2) / 2, val (−5 + 3) / 2, test (1 − 4) / 2
    # held (3 + 0) / 2; seed 0 reached the clip
    assert "| Focal, auto γ | 2.5 | 0.5 | +0.75 | +1.50 | -1.00 | -1.50 | 1.5 | 1 of 2 |" in out
    # the fixed-γ root: seed 0 at 2 + 0.04 / 0.06, seed 1 beyond the grid; auto γ at selection 2.5 and 3.5
    assert "| 0 | 2 | 2.67 | 2.50 |" in out and "| 1 | 3 | > 5 | 3.50 |" in out
    assert "| mean | 2.50 | 2.67 | 3.00 |" in out
    page = (tmp_path / "page.md").read_text()
    assert page.startswith("# T\n\nGenerated by `python scripts/auto_vs_grid.py ")
    assert (tmp_path / "page_gamma.png").stat().st_size > 0


@pytest.mark.parametrize("gap", [0.3, 0.01, -0.05, -0.4])
def test_the_hand_made_predictions_have_their_gap(gap):
    p = val_predictions(gap)
    probs = torch.softmax(torch.from_numpy(p["logits"]), dim=1)
    assert float(overconfidence(probs, torch.from_numpy(p["labels"]))) == pytest.approx(gap)


def test_gap_root_at_and_beyond_the_grid_ends():
    assert auto_vs_grid.gap_root({0.0: -0.01, 1.0: -0.05}) == 0.0  # under-confident already at γ 0
    assert auto_vs_grid.gap_root({0.0: 0.3, 1.0: 0.1, 2.0: -0.1}) == pytest.approx(1.5)
    assert auto_vs_grid.gap_root({0.0: 0.3, 1.0: 0.0}) == 1.0
    assert auto_vs_grid.gap_root({0.0: 0.3, 1.0: 0.1}) == float("inf")


def test_the_page_names_the_kernel_paths_the_runs_trained_on(tmp_path):
    """Read from every run's runtime.json under the folders, each start and resume; a run saved before the
    kernel path was recorded says so, and folders without runtime.json say that."""
    sessions = {"sweep/ce/seed0": [{"device": "cpu", "cpu_kernels": "AVX512"}],
                "sweep/ce/seed1": [{"device": "cpu", "cpu_kernels": "AVX2"}, {"device": "cpu", "cpu_kernels": "AVX512"}],
                "other/auto_gamma/seed0": [{"device": "cuda"}],
                "cpus/ce/seed0": [{"device": "cpu", "cpu": "AMD EPYC", "cpu_kernels": "AVX512"}],
                "cpus/ce/seed1": [{"device": "cpu", "cpu": "Intel(R) Xeon(R) Processor", "cpu_kernels": "AVX512"}]}
    for run, listed in sessions.items():
        (tmp_path / run).mkdir(parents=True)
        (tmp_path / run / "runtime.json").write_text(json.dumps({"sessions": listed}))
    line = auto_vs_grid.trained_on([tmp_path / "sweep"])
    assert line.startswith("Trained on: cpu, CPU kernels AVX2; cpu, CPU kernels AVX512 (the runs' runtime.json")
    both = auto_vs_grid.trained_on([tmp_path / "sweep", tmp_path / "other"])
    assert both.startswith("Trained on: cpu, CPU kernels AVX2; cpu, CPU kernels AVX512; cuda, CPU kernels not recorded")
    assert auto_vs_grid.trained_on([tmp_path / "empty"]) == "Trained on: not recorded (no runtime.json)."
    # the CPU model, where runtime.json has it: one kernel path, two vendors, two entries
    assert auto_vs_grid.trained_on([tmp_path / "cpus"]).startswith(
        "Trained on: cpu, AMD EPYC, CPU kernels AVX512; cpu, Intel(R) Xeon(R) Processor, CPU kernels AVX512 (the")


def test_no_root_table_without_a_grid_or_without_predictions():
    ce = {0: {"val_gap": 0.1}, 1: {"val_gap": 0.2}}
    auto = ("auto", {0: {"gamma": 1.0}, 1: {"gamma": 2.0}})
    gammas = {"ce": 0.0, "focal": 1.0}
    assert auto_vs_grid.root_table({"ce": ce}, gammas, [0, 1], {0: "ce", 1: "ce"}, auto) == []  # CE alone: no root
    focal = {0: {"val_gap": -0.1}, 1: {"val_gap": None}}  # seed 1 has no val predictions
    assert auto_vs_grid.root_table({"ce": ce, "focal": focal}, gammas, [0, 1], {0: "ce", 1: "ce"}, auto) == []
    focal[1]["val_gap"] = 0.1
    table = auto_vs_grid.root_table({"ce": ce, "focal": focal}, gammas, [0, 1], {0: "ce", 1: "focal"}, auto)
    assert "| 0 | 0 | 0.50 | 1.00 |" in table and "| 1 | 1 | > 1 | 2.00 |" in table


def test_the_grid_is_read_from_the_runs_configs_not_their_names(tmp_path, capsys):
    """A folder of any name that trains focal at a fixed γ (here 2.5, named my_focal) joins the grid; a folder
    named like a grid point that has a learner does not. The pick moves to it where its val ECE is lowest."""
    sweep = tmp_path / "sweep"
    write_runs(sweep)
    (sweep / "focal4").rename(sweep / "my_focal")
    for seed in (0, 1):
        run = sweep / "my_focal" / f"seed{seed}"
        (run / "config.yaml").write_text(yaml.safe_dump({"loss": {"name": "focal", "params": {"gamma": 2.5}}}))
        metrics = json.loads((run / "metrics.json").read_text())
        metrics["val"]["ece"] = 0.01  # the lowest on both seeds
        (run / "metrics.json").write_text(json.dumps(metrics))
    learner = {"loss": {"name": "focal", "params": {"gamma": 5.0}}, "learner": "auto"}
    for seed in (0, 1):
        (sweep / "focal5" / f"seed{seed}" / "config.yaml").write_text(yaml.safe_dump(learner))
    assert auto_vs_grid.grid_gammas(sweep) == {"ce": 0.0, "focal": 1.0, "focal2": 2.0, "my_focal": 2.5, "focal3": 3.0}
    assert auto_vs_grid.main([str(sweep)]) == 0
    out = capsys.readouterr().out
    assert "the grid pick is the γ ∈ {0, 1, 2, 2.5, 3} (0: CE)" in out
    assert "seed 0: γ = 2.5, seed 1: γ = 2.5" in out


def test_a_sweep_without_ce_is_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert auto_vs_grid.main([str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has no finished CE run" in err[0]


def test_an_out_below_a_file_is_one_line_before_the_sweep_is_read(tmp_path, capsys):
    (tmp_path / "taken").write_text("")
    page = tmp_path / "taken" / "auto.md"
    assert auto_vs_grid.main([str(tmp_path / "nowhere"), "--out", str(page)]) == 2
    assert capsys.readouterr().err == (f"auto_vs_grid: error: --out {page} cannot be written: {tmp_path / 'taken'} "
                                       "is a file\n")


@pytest.mark.slow
def test_bench_auto_runs_the_three_methods(tmp_path, capsys):
    bench = auto_cost
    out = tmp_path / "cost.md"
    code = bench.main(["--regime", "mnist1d_overconfident", "--repeats", "1", "--out", str(out),
                       "--set", "schedule.epochs=2", "--set", "run.max_steps_per_epoch=3", "--set", "eval.bootstrap=0"])
    assert code == 0
    text = out.read_text()
    assert "| CE |" in text and "| focal (fixed γ) |" in text and "| auto_gamma |" in text
    assert "Controller overhead" in text and text.startswith("Generated by `python scripts/bench_auto.py")
