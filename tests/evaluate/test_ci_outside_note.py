"""``python -m metacal.evaluate --ci``: an estimate outside its own bootstrap interval is marked ``†`` in the
table, with a one-line footnote saying why; nothing is marked when every estimate is inside."""

import json

import numpy as np
import torch

from metacal.metrics.bootstrap import outside_note
from metacal.metrics.selective import flatten
from metacal.metrics.weighted import WEIGHTED_KEYS

from test_cli import run

DOCS = "docs/conventions.md#intervals"


def predictions(path, n: int, temperature: float = 1.0, scale: float = 2.0):
    """Labels drawn from softmax(scale·z) (calibrated at temperature 1), logits scale·z / temperature."""
    g = torch.Generator().manual_seed(0)
    z = scale * torch.randn(n, 10, generator=g, dtype=torch.float64)
    labels = torch.multinomial(torch.softmax(z, 1), 1, generator=g).squeeze(1)
    np.savez(path, logits=(z / temperature).numpy(), labels=labels.numpy())
    return path


def test_calibrated_model_ece_above_its_basic_interval_gets_a_footnote(tmp_path, capsys):
    path = predictions(tmp_path / "calibrated.npz", 500)
    code, out, _ = run([path, "--json", "--ci", "--bootstrap", "200"], capsys)
    result = json.loads(out)
    low, high = result["ci"]["ece"]
    assert code == 0 and low == 0.0 and high < result["ece"]  # the case: ECE above [0, high], clipped at 0
    code, out, err = run([path, "--ci", "--bootstrap", "200"], capsys)
    assert code == 0 and err == ""
    lines = out.splitlines()
    ece = next(line for line in lines if line.startswith("ECE (%)"))
    assert ece.endswith(f"[0.00, {100 * high:.2f}]†"), ece
    assert not next(line for line in lines if line.startswith("Error (%)")).endswith("†")
    assert lines[-1] == ("† ECE, RMSCE, Classwise ECE: the estimate lies above its basic interval because the "
                         "resampled values run above it (the estimator's bias, which the basic interval subtracts); "
                         f"ECE, RMSCE: clipped at 0, the metric's lower bound; see {DOCS}"), lines[-1]
    # the percentile interval follows the resamples: above the estimate
    code, out, _ = run([path, "--ci", "--bootstrap", "200", "--ci-method", "percentile"], capsys)
    assert "the estimate lies below its percentile interval because the resampled values run above it" in out


def test_no_footnote_when_every_estimate_is_inside(tmp_path, capsys):
    path = predictions(tmp_path / "overconfident.npz", 2000, temperature=0.5, scale=1.0)
    code, out, _ = run([path, "--json", "--ci", "--bootstrap", "200"], capsys)
    result = json.loads(out)
    result.update(flatten(result))  # the selective numbers' intervals are keyed flat: "risk_at_coverage@0.8"
    assert all(result["ci"][key][0] <= result[key] <= result["ci"][key][1] for key in WEIGHTED_KEYS)
    code, out, _ = run([path, "--ci", "--bootstrap", "200"], capsys)
    assert code == 0 and "†" not in out and DOCS not in out


def test_note_below_and_at_the_upper_bound():
    ci = {"method": "basic", "error": [0.2, 1.0], "nll": [0.5, 0.6], "ece": [0.01, 0.02]}
    note = outside_note(ci, {"error": 0.1, "nll": 0.55, "ece": 0.015}, {"error": "Error"})
    assert note == ("Error: the estimate lies below its basic interval because the resampled values run below it "
                    "(the estimator's bias, which the basic interval subtracts); Error: clipped at the metric's "
                    f"upper bound; see {DOCS}")
    assert outside_note(ci, {"error": 0.5, "nll": 0.55}) is None
