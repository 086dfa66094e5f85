"""experiments.benchmark.meta_step: the reference row is the `higher` backend's γ-Net update, and every ratio
of the benchmark is a median of within-round ratios."""

import statistics
from types import SimpleNamespace

import pytest
import torch

from experiments.benchmark.meta_step import Method, build_setup, paired_statistic


def test_reference_lookahead_has_the_higher_backends_hypergradient():
    """The "higher_recompute" row (lookahead on copied weights, then a separate real step) gives the same
    γ-Net gradients as the `higher` backend from one state (float64), and the same real step."""
    torch.set_default_dtype(torch.float64)
    try:
        args = SimpleNamespace(model="small_resnet", classes=4, size=12, batch=6, meta_batch=5, objective="sece")
        model, gamma_net, objective, data = build_setup(args, torch.device("cpu"))
        ref = Method("higher_recompute", model, gamma_net, objective, data)
        backend = Method("higher", model, gamma_net, objective, data)
        ref.meta_opt.step = lambda: None  # keep the gradients, skip Adam, so γ is the same in the real step
        ref.step()
        backend.step()
        for p, q in zip(ref.gamma_net.parameters(), backend.gamma_net.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-9, atol=1e-12)
        for p, q in zip(ref.model.parameters(), backend.model.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-9, atol=1e-12)
    finally:
        torch.set_default_dtype(torch.float32)


def test_paired_statistic_is_the_median_of_within_round_ratios():
    # round 2 ran on a machine twice as slow: paired ratios are unaffected, the ratio of medians is not
    times = {"a": [1.0, 2.0, 4.0, 1.0], "b": [2.0, 4.0, 8.0, 2.5]}
    stat = paired_statistic(times)
    assert stat(lambda t: t["b"] / t["a"]) == pytest.approx(2.0)  # ratios 2, 2, 2, 2.5
    assert statistics.median(times["b"]) / statistics.median(times["a"]) == pytest.approx(3.25 / 1.5)
    assert stat(lambda t: t["a"] - t["b"]) == pytest.approx(-1.75)  # −1, −2, −4, −1.5: median of −2, −1.5
