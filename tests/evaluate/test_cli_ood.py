"""The evaluate CLI's selective-prediction rows and ``--ood``: JSON against metacal.metrics, the tables, folders,
probability-only files and the K-mismatch error."""

import json

import numpy as np
import pytest
import torch

from metacal.metrics.ood import ood_detection
from metacal.metrics.selective import selective_summary
from test_cli import run  # the evaluate CLI in process: (exit code, stdout, stderr)


def make_npz(path, n=200, k=4, seed=0, kind="logits", scale=2.0):
    rng = np.random.default_rng(seed)
    logits = (scale * rng.normal(size=(n, k))).astype(np.float32)
    labels = rng.integers(0, k, n)
    if kind == "logits":
        np.savez(path, logits=logits, labels=labels)
    else:
        np.savez(path, probs=torch.softmax(torch.from_numpy(logits).double(), 1).numpy(), labels=labels)
    return path


def test_json_has_selective_keys_and_ood_object(tmp_path, capsys):
    pred, ood = make_npz(tmp_path / "p.npz", seed=1, scale=3.0), make_npz(tmp_path / "o.npz", n=150, seed=2, scale=0.5)
    code, out, err = run([pred, "--ood", ood, "--json"], capsys)
    assert code == 0 and err == ""
    result = json.loads(out)
    p, o = np.load(pred), np.load(ood)
    probs = torch.softmax(torch.from_numpy(p["logits"]).double(), 1)
    expected_sel = selective_summary(probs, torch.from_numpy(p["labels"]))
    for key in ("aurc", "augrc", "risk_at_coverage", "coverage_at_risk"):
        assert result[key] == pytest.approx(expected_sel[key], abs=1e-12), key
    assert list(result["risk_at_coverage"]) == ["0.8", "0.9"] and list(result["coverage_at_risk"]) == ["0.01", "0.05"]
    expected = ood_detection(torch.from_numpy(p["logits"]), torch.from_numpy(o["logits"]))
    assert list(result["ood"]) == ["msp", "max_logit", "energy", "entropy"]
    for score, values in expected.items():
        assert list(result["ood"][score]) == ["auroc", "aupr_in", "aupr_out", "fpr95"]
        assert result["ood"][score] == pytest.approx(values, abs=1e-12), score
    assert result["ood"]["msp"]["auroc"] > 0.6  # sharper ID logits: detectable
    assert "ood_logits_from" not in result
    code, out, _ = run([pred, "--json"], capsys)
    assert code == 0 and "ood" not in json.loads(out)


def test_table_rows_and_ood_table(tmp_path, capsys):
    pred, ood = make_npz(tmp_path / "p.npz", seed=3), make_npz(tmp_path / "o.npz", seed=4)
    code, out, _ = run([pred, "--ood", ood, "--ci", "--bootstrap", "20"], capsys)
    assert code == 0
    rows = {line.split("  ")[0]: line for line in out.splitlines()}
    result = json.loads(run([pred, "--ood", ood, "--json"], capsys)[1])
    for label, value in (("AURC (%)", result["aurc"]), ("Risk@90%cov (%)", result["risk_at_coverage"]["0.9"]),
                         ("Cov@5%risk (%)", result["coverage_at_risk"]["0.05"])):
        assert f"{100 * value:.2f}" in rows[label] and "[" in rows[label]  # estimate and its interval
    for label in ("AUGRC (%)", "Risk@80%cov (%)", "Cov@1%risk (%)"):
        assert label in rows
    header = next(line for line in out.splitlines() if line.startswith("OOD detection"))
    assert header.split()[2:] == ["AUROC", "(%)", "AUPR-In", "(%)", "AUPR-Out", "(%)", "FPR95", "(%)"]
    energy = next(line for line in out.splitlines() if line.startswith("energy ")).split()
    assert energy[1:] == [f"{100 * result['ood']['energy'][k]:.2f}" for k in ("auroc", "aupr_in", "aupr_out", "fpr95")]


def test_k_mismatch_is_one_line_exit_2(tmp_path, capsys):
    pred, ood = make_npz(tmp_path / "p.npz", k=4), make_npz(tmp_path / "o.npz", k=3)
    code, out, err = run([pred, "--ood", ood, "--json"], capsys)
    assert code == 2 and out == ""
    assert err.strip() == ("python -m metacal.evaluate: error: --ood file has K = 3 classes but predictions have "
                           "K = 4") and err.count("\n") == 1
    code, _, err = run([pred, "--ood", tmp_path / "missing.npz"], capsys)
    assert code == 2 and "no such file" in err and err.count("\n") == 1


def test_folder_scores_every_file_and_probs_only_uses_log_probs(tmp_path, capsys):
    folder = tmp_path / "predictions"
    folder.mkdir()
    make_npz(folder / "val.npz", seed=5, scale=3.0)
    make_npz(folder / "test.npz", seed=6, scale=3.0)
    ood = make_npz(tmp_path / "o.npz", seed=7, kind="probs")
    code, out, _ = run([folder, "--ood", ood, "--json"], capsys)
    assert code == 0
    result = json.loads(out)
    o = np.load(ood)
    for name in ("val.npz", "test.npz"):
        p = np.load(folder / name)
        inside = torch.softmax(torch.from_numpy(p["logits"]).double(), 1).log()
        expected = ood_detection(inside, torch.from_numpy(o["probs"]).clamp_min(1e-12).log())
        assert result[name]["ood_logits_from"] == "log_probs"
        for score, values in expected.items():
            assert result[name]["ood"][score] == pytest.approx(values, abs=1e-12), (name, score)
