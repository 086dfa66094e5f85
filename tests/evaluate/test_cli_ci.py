"""``python -m metacal.evaluate --ci``: the JSON "ci" object, the table's interval column, the plot's bands, and
the one-line errors for bad bootstrap settings."""

import json

import numpy as np
import pytest
import torch

from metacal.evaluate.cli import main
from metacal.metrics import BootstrapSpec, bootstrap_intervals
from metacal.metrics.weighted import WEIGHTED_KEYS

from test_cli import make_npz, run


def probs_labels(path):
    data = np.load(path)
    return torch.softmax(torch.from_numpy(data["logits"]).double(), 1), torch.from_numpy(data["labels"])


def test_json_ci_object_defaults_and_settings(tmp_path, capsys):
    path = make_npz(tmp_path / "pred.npz")
    code, out, err = run([path, "--json", "--ci", "--bootstrap", "200"], capsys)
    assert code == 0 and err == ""
    result = json.loads(out)
    ci = result["ci"]
    assert list(ci) == ["method", "level", "bootstrap", "seed", *WEIGHTED_KEYS, "skipped"]
    assert (ci["method"], ci["level"], ci["bootstrap"], ci["seed"]) == ("basic", 0.9, 200, 0)
    assert ci["skipped"] == ["sece", "kde_ece", "smece"]
    probs, labels = probs_labels(path)
    assert ci == bootstrap_intervals(probs, labels, 15, BootstrapSpec(200, 0.9, 0))
    for key in WEIGHTED_KEYS:
        assert ci[key][0] <= ci[key][1]
    for key in ("error", "nll", "brier", "ece", "classwise_ece"):  # smooth statistics: the estimate is inside
        assert ci[key][0] <= result[key] <= ci[key][1], key
    # level, B and seed are passed through; a wider level gives a wider interval
    code, out, _ = run([path, "--json", "--ci", "--ci-level", "0.5", "--bootstrap", "200", "--seed", "3"], capsys)
    narrow = json.loads(out)["ci"]
    assert (narrow["level"], narrow["bootstrap"], narrow["seed"]) == (0.5, 200, 3)
    assert narrow == bootstrap_intervals(probs, labels, 15, BootstrapSpec(200, 0.5, 3))
    assert narrow["ece"][1] - narrow["ece"][0] < ci["ece"][1] - ci["ece"][0]
    # --ci-method percentile: the other rule, the same resamples
    code, out, _ = run([path, "--json", "--ci", "--bootstrap", "200", "--ci-method", "percentile"], capsys)
    pct = json.loads(out)["ci"]
    assert pct == bootstrap_intervals(probs, labels, 15, BootstrapSpec(200, 0.9, 0, "percentile"))
    assert pct["method"] == "percentile" and pct["ece"] != ci["ece"]
    # without --ci: no "ci"; the default B is 1000
    assert "ci" not in json.loads(run([path, "--json"], capsys)[1])
    assert json.loads(run([path, "--json", "--ci"], capsys)[1])["ci"]["bootstrap"] == 1000


def test_folder_gives_each_file_its_intervals_and_table_has_a_column(tmp_path, capsys):
    folder = tmp_path / "predictions"
    folder.mkdir()
    make_npz(folder / "val.npz", seed=1)
    make_npz(folder / "test.npz", seed=2)
    code, out, _ = run([folder, "--json", "--ci", "--bootstrap", "50"], capsys)
    assert code == 0
    result = json.loads(out)
    assert set(result) == {"val.npz", "test.npz"} and result["val.npz"]["ci"] != result["test.npz"]["ci"]
    code, out, _ = run([folder / "test.npz", "--ci", "--bootstrap", "50"], capsys)
    assert code == 0
    ece = result["test.npz"]["ci"]["ece"]
    assert "90% CI (B=50)" in out
    assert f"[{100 * ece[0]:.2f}, {100 * ece[1]:.2f}]" in out  # percent, like the estimates
    sece_row = next(line for line in out.splitlines() if line.startswith("SECE (%)"))
    assert "—" in sece_row  # skipped


def test_plot_with_ci_draws_bands(tmp_path, capsys):
    path = make_npz(tmp_path / "pred.npz")
    png = tmp_path / "rel.png"
    code, out, err = run([path, "--plot", png, "--ci", "--bootstrap", "100"], capsys)
    assert code == 0 and err == "" and png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("args, needle", [
    (["--bootstrap", "0"], "--bootstrap must be an integer >= 1, got 0"),
    (["--bootstrap", "-3"], "--bootstrap must be an integer >= 1, got -3"),
    (["--bootstrap", "2.5"], "argument --bootstrap: invalid int value"),
    (["--ci-level", "0"], "--ci-level must lie strictly between 0 and 1"),
    (["--ci-level", "1"], "--ci-level must lie strictly between 0 and 1"),
    (["--ci-level", "1.5"], "--ci-level must lie strictly between 0 and 1"),
    (["--ci-level", "-0.2"], "--ci-level must lie strictly between 0 and 1"),
    (["--ci-level", "nan"], "--ci-level must lie strictly between 0 and 1"),
    (["--ci-level", "abc"], "argument --ci-level: invalid float value"),
    (["--seed", "x"], "argument --seed: invalid int value"),
    (["--ci-method", "bca"], "argument --ci-method: invalid choice"),
])
def test_bad_bootstrap_settings_one_line_exit_2(tmp_path, capsys, args, needle):
    path = make_npz(tmp_path / "pred.npz")
    png = tmp_path / "rel.png"
    code, out, err = run([path, "--json", "--ci", "--plot", png, *args], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err and needle in err, err
    assert not png.exists()  # checked before anything is computed or written
    # also without --ci: a bad setting is an error, not silently ignored
    assert main([str(path), "--json", *args]) == 2
