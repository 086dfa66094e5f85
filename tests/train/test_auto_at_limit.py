"""The automatic scalar at its upper end is a finding, not a silence: metrics.json's ``auto`` record says whether
and when it got there (``at_limit``, ``limit_epoch``) and how many moves the probe withheld (``held``), and the
run's last lines say what it means. Hand-built histories, as metacal.meta.auto writes them."""

from __future__ import annotations

from pathlib import Path

from metacal.meta.auto import scalar_summary
from metacal.run.layout import RunPaths
from metacal.train.run_summary import end_of_run_summary


def history(gammas: list[float], held: list[int], top: float = 10.0) -> list[dict]:
    rows = []
    for epoch, (gamma, h) in enumerate(zip(gammas, held), start=1):
        trained = gammas[epoch - 2] if epoch > 1 else 1.0
        rows.append({"epoch": epoch, "train": {"auto_gamma_trained": trained, "auto_gamma": gamma, "auto_gap": 0.02,
                                               "auto_gap_se": 0.007, "auto_held": float(h), "auto_at_limit": 0.0,
                                               "auto_max": top, "auto_measure_s": 0.5}})
    return rows


def test_reaching_the_upper_end_is_recorded_with_its_epoch():
    record = scalar_summary(history([2.0, 4.0, 10.0, 10.0], [0, 0, 0, 0]), 2, "gamma", ["meta_val"])
    assert record["knob"] == "gamma" and record["measured_on"] == ["meta_val"]
    assert scalar_summary([{"epoch": 1, "train": {"loss": 1.0}}], 1, "gamma") is None  # no update: no record
    assert record["at_limit"] is True and record["limit_epoch"] == 3 and record["limit"] == 10.0
    assert record["selected"] == 2.0 and record["final"] == 10.0 and record["measure_s"] == 2.0
    below = scalar_summary(history([2.0, 3.2, 3.2, 3.2], [0, 0, 1, 2]), 4, "gamma")
    assert below["at_limit"] is False and below["limit_epoch"] is None and below["held"] == 2


def test_runs_saved_before_the_limit_was_recorded_read_as_not_at_it():
    rows = history([2.0, 10.0], [0, 0])
    for row in rows:
        del row["train"]["auto_max"], row["train"]["auto_held"]
    record = scalar_summary(rows, 2, "gamma")
    assert record["at_limit"] is False and record["limit"] is None and record["held"] == 0


def test_the_last_lines_say_the_limit_was_reached(tmp_path: Path):
    metrics = {"epoch": 2, "val": {"error": 0.2, "ece": 0.03}, "test": {"error": 0.2, "ece": 0.03},
               "test_after_ts": None, "auto": scalar_summary(history([4.0, 10.0], [0, 0]), 2, "gamma", ["meta_val", "val"])}
    text = end_of_run_summary(metrics, RunPaths(tmp_path), epochs=2)
    line = next(x for x in text.splitlines() if "upper end" in x)
    assert line.startswith("automatic gamma reached its upper end 10 (auto.max) at epoch 2:")
    metrics["auto"] = scalar_summary(history([4.0, 5.0], [0, 0]), 2, "gamma", ["meta_val"])
    assert "upper end" not in end_of_run_summary(metrics, RunPaths(tmp_path), epochs=2)
