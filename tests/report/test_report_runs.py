"""Reading run directories: finished markers, tolerant history/metrics reading, layout → (method, seed), labels."""

import json

import pytest

from metacal.report.labels import METHOD_LABELS, method_label, method_order
from metacal.run.layout import (
    find_runs,
    has_checkpoints,
    is_finished,
    read_history,
    read_run,
)


def test_finished_markers(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    assert not is_finished(run)
    (run / "metrics.json").write_text(json.dumps({"test": {"ece": 0.1}}))
    assert not is_finished(run)  # metrics without "finished": true is not the marker
    (run / "metrics.json").write_text(json.dumps({"test": {"ece": 0.1}, "finished": True}))
    assert is_finished(run)
    (run / "metrics.json").write_text("{half written")
    assert not is_finished(run)
    (run / "DONE").write_text("")  # no marker: metacal writes "finished" into metrics.json, last
    assert not is_finished(run)
    assert not is_finished(tmp_path / "does-not-exist")


def test_checkpoints_need_content(tmp_path):
    assert not has_checkpoints(tmp_path)
    (tmp_path / "checkpoints").mkdir()
    assert not has_checkpoints(tmp_path)  # an empty directory holds nothing to resume from
    (tmp_path / "checkpoints" / "last.pt").write_bytes(b"x")
    assert has_checkpoints(tmp_path)


def test_history_is_the_json_list_and_a_broken_file_reads_as_empty(tmp_path):
    run = tmp_path / "ce" / "seed0"
    run.mkdir(parents=True)
    (run / "history.json").write_text(json.dumps([{"epoch": 1, "time_s": 5.0}, {"epoch": 2, "time_s": 7.0}, 3]))
    assert read_run(run).epoch_times() == [5.0, 7.0]
    (tmp_path / "broken.json").write_text("[{")  # half-written
    assert read_history(tmp_path / "broken.json") == []
    (tmp_path / "object.json").write_text("{}")
    assert read_history(tmp_path / "object.json") == [] and read_history(tmp_path / "missing.json") == []


def test_layout_gives_method_and_seed(tmp_path, run_writer):
    run_writer(tmp_path / "focal" / "seed3", 3, metrics=False, predictions=False, epoch_times=[2.0, 4.0])
    (tmp_path / "flgamma_sece" / "seed0").mkdir(parents=True)  # started, nothing written yet
    solo = tmp_path / "other" / "my_run"
    solo.mkdir(parents=True)
    (solo / "config.yaml").write_text("run:\n  seed: 7\n  method: mine\n")
    (tmp_path / "logs").mkdir()  # sweep logs: not a run
    (tmp_path / "logs" / "focal_seed3.log").write_text("")
    runs = find_runs(tmp_path)
    # a run outside a sweep's <method>/seed<S> layout: the method its config names (run.method)
    assert [(r.method, r.seed) for r in runs] == [("flgamma_sece", 0), ("focal", 3), ("mine", 7)]
    focal = runs[1]
    assert focal.finished and not focal.complete  # finished but without test metrics → reported as missing
    assert focal.epoch_times() == [2.0, 4.0]
    assert runs[0].config == {} and runs[0].history == [] and runs[0].metrics is None
    assert read_run(tmp_path / "focal" / "seed3").config["run"]["seed"] == 3


def test_find_runs_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="run root not found"):
        find_runs(tmp_path / "nope")
    assert find_runs(tmp_path) == []


def test_label_mapping():
    expected = {
        "ce": "CE", "focal": "Focal", "flsd53": "FLSD-53", "ls005": "LS-0.05", "ls01": "LS-0.1",
        "mixup": "Mixup", "mmce": "MMCE", "ce_dece": "CE-DECE", "ce_sece": "CE-SECE",
        "flgamma_dece": "FLγ-DECE", "flgamma_sece": "FLγ-SECE", "dual_focal": "Dual focal",
        "flgamma_sece_trajectory": "FLγ-SECE, trajectory level",
        "inverse_focal": "Inverse focal", "adafocal": "AdaFocal", "bsce_gra": "BSCE-GRA",
        "focal_savuc": "Focal+S-AvUC", "nll_sbece": "NLL+SB-ECE",
        "auto_gamma": "Focal, auto γ", "auto_ls": "LS, auto ε", "auto_dual_focal": "Dual focal, auto γ",
        "mbls": "MbLS", "auto_gamma_shift": "Focal, auto γ (shift-tuned)",
    }  # fmt: skip
    assert METHOD_LABELS == expected
    assert all(method_label(k) == v for k, v in expected.items())
    assert method_label("my_new_loss") == "my_new_loss"
    assert (method_label("ls_005"), method_label("ls_01")) == ("LS-0.05", "LS-0.1")  # configs/*/ls_005.yaml
    stems = ["zeta", "flgamma_sece", "ls_01", "ce", "alpha", "focal"]
    assert sorted(stems, key=method_order) == ["ce", "focal", "ls_01", "flgamma_sece", "alpha", "zeta"]


def test_the_fixed_gamma_grid_is_named_and_ordered_by_its_record():
    """focal2…5 (or any name) at a fixed γ: labelled "Focal γ = g" and placed after Focal by γ, from the record;
    without a record, a name is only a name."""
    from metacal.run.method import Method

    specs = {"focal5": Method("focal5", "focal", {"gamma": 5.0}), "focal2": Method("focal2", "focal", {"gamma": 2}),
             "my_focal": Method("my_focal", "focal", {"gamma": 2.5}), "flsd53": Method("flsd53", "flsd53"),
             "zeta": Method("zeta", "focal", {"gamma": 3.0}, learner="auto")}
    order = sorted([*specs, "ce", "focal"], key=lambda m: method_order(m, specs.get(m)))
    assert order == ["ce", "focal", "focal2", "my_focal", "focal5", "flsd53", "zeta"]
    assert [method_label(m, specs[m]) for m in ("focal2", "my_focal", "focal5", "zeta")] == [
        "Focal γ = 2", "Focal γ = 2.5", "Focal γ = 5", "zeta"]
    assert method_label("focal3") == "focal3" and method_label("focal", specs["focal2"]) == "Focal"
