"""The shift page's per-sample figures (metacal/report/shift_figures.py): the risk–coverage curve by hand, seeds
pooled, and the page drawing both figures once every run has its samples file."""

from __future__ import annotations

import numpy as np
import pytest

from metacal.report.shift_figures import pooled, risk_coverage
from metacal.report.shift_page import main
from metacal.shift.samples import COLUMNS, SampleCollector, load_samples, samples_path
from tests.report.test_shift_page import SUITE, make_sweep


def test_risk_coverage_by_hand():
    conf = np.array([0.6, 0.9, 0.7, 0.8])
    correct = np.array([False, True, True, False])
    coverage, risk = risk_coverage(conf, correct, points=4)
    # most confident first: 0.9 ✓, 0.8 ✗, 0.7 ✓, 0.6 ✗
    assert coverage.tolist() == [0.25, 0.5, 0.75, 1.0]
    assert risk == pytest.approx([0.0, 0.5, 1 / 3, 0.5])
    # ties are taken together: three tied at 0.9 with one error, then a correct 0.5. The expected errors among the
    # first k under a random order of the tie are k/3 for k ≤ 3, so the risk is 1/3 there, then 1/4.
    coverage, risk = risk_coverage(np.array([0.9, 0.9, 0.5, 0.9]), np.array([True, False, True, True]), points=4)
    assert risk == pytest.approx([1 / 3, 1 / 3, 1 / 3, 0.25])


def test_pooled_concatenates_seeds_and_needs_every_one():
    a = {(3, "ts_nll"): (np.array([0.5, 0.6], np.float32), np.array([True, False]))}
    b = {(3, "ts_nll"): (np.array([0.7], np.float32), np.array([True]))}
    conf, correct = pooled([a, b], 3, "ts_nll")
    assert conf.tolist() == pytest.approx([0.5, 0.6, 0.7]) and correct.tolist() == [True, False, True]
    assert pooled([a, {}], 3, "ts_nll") is None and pooled([a], 0, "ts_nll") is None


def test_the_page_draws_both_figures_from_the_samples_files(tmp_path):
    import torch

    root = make_sweep(tmp_path / "sweep")
    rng = np.random.default_rng(0)
    for run in sorted(root.glob("*/seed*")):
        collector = SampleCollector()
        for severity in (0, 3):
            probs = torch.softmax(torch.as_tensor(rng.normal(size=(50, 4))), 1)
            collector.add(severity, {c: probs for c in COLUMNS}, torch.as_tensor(rng.integers(0, 4, 50)))
        collector.save(samples_path(run, SUITE))
    saved = load_samples(samples_path(root / "ce" / "seed0", SUITE))
    assert len(saved[(3, "ts_perturbed")][0]) == 50 and saved[(0, "uncalibrated")][1].dtype == bool
    out = tmp_path / "docs" / "shift.md"
    assert main([str(root), "--suite", SUITE, "--out", str(out)]) == 0
    text = out.read_text()
    for name in ("shift_risk_coverage.png", "shift_reliability_sev3.png"):
        assert (out.parent / name).is_file() and f"]({name})" in text
    assert "Not drawn" not in text
    (samples_path(root / "ce" / "seed1", SUITE)).unlink()  # one run evaluated before the files existed
    assert main([str(root), "--suite", SUITE, "--out", str(out)]) == 0
    assert "Not drawn: risk–coverage curves and reliability diagrams under shift need the per-sample files" \
        in out.read_text()
