"""ODIR cross-validation: stratified folds, held-out NLL against a brute-force recomputation, and the choice
it makes on data that need no off-diagonal terms vs data that need them."""

import pytest
import torch

from metacal.posthoc import MatrixScaling
from metacal.posthoc.affine import affine_logits, fit_affine
from metacal.posthoc.odir import cross_validated_nll, select_odir, stratified_folds


def sample(n, k, weight, seed, scale=1.5):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, k, generator=g, dtype=torch.float64) * scale
    return z, torch.multinomial(torch.softmax(z @ weight.T, 1), 1, generator=g).squeeze(1)


def test_folds_are_stratified_and_seeded():
    y = torch.tensor([0] * 13 + [1] * 7 + [2] * 30)
    fold = stratified_folds(y, 5, seed=3)
    for c in range(3):
        counts = torch.bincount(fold[y == c], minlength=5)
        assert int(counts.max() - counts.min()) <= 1 and int(counts.sum()) == int((y == c).sum())
    assert torch.equal(fold, stratified_folds(y, 5, seed=3))
    assert not torch.equal(fold, stratified_folds(y, 5, seed=4))


def test_held_out_nll_matches_brute_force():
    k = 3
    z, y = sample(300, k, torch.eye(k, dtype=torch.float64) * 2, seed=0)
    grid = (0.01, 1.0)
    scores = cross_validated_nll(z, y, False, grid, folds=3, seed=1)
    fold = stratified_folds(y, 3, seed=1)
    for g, lam in enumerate(grid):
        total = 0.0
        for f in range(3):
            tr, te = fold != f, fold == f
            w, b = fit_affine(z[tr], y[tr], False, lam, lam, tolerance_grad=1e-10)  # cold start, tight
            total += float(torch.nn.functional.cross_entropy(affine_logits(z[te], w, b), y[te], reduction="sum"))
        # the CV fits are warm-started and stop at |∂L| < 1e-6: the held-out NLL agrees to ~1e-6
        assert float(scores[g]) == pytest.approx(total / 300, abs=2e-6)


def test_choice_follows_the_data():
    k = 4
    # few samples from a calibrated-at-T map (no off-diagonal terms): strong regularisation wins
    z, y = sample(200, k, torch.eye(k, dtype=torch.float64) * 0.5, seed=2)
    lam, scores = select_odir(z, y)
    assert lam >= 1.0 and float(scores.min()) < float(scores[0])
    # many samples from a map with large off-diagonal entries: weak regularisation wins
    mixing = torch.tensor([[1.0, 1.5, 0.0, 0.0], [0.0, 1.0, 1.5, 0.0], [0.0, 0.0, 1.0, 1.5], [1.5, 0.0, 0.0, 1.0]],
                          dtype=torch.float64)
    z, y = sample(4000, k, mixing, seed=3)
    ms = MatrixScaling().fit(z, y)
    assert ms.reg_lambda_used <= 1e-1 and ms.reg_mu_used == ms.reg_lambda_used
    assert float(ms.odir_scores[-1]) - float(ms.odir_scores.min()) > 0.05  # λ = 100 is clearly worse


def test_bad_settings():
    z, y = sample(50, 3, torch.eye(3, dtype=torch.float64), seed=4)
    with pytest.raises(ValueError, match="grid"):
        select_odir(z, y, grid=())
    with pytest.raises(ValueError, match="grid"):
        select_odir(z, y, grid=(1.0, -1.0))
    with pytest.raises(ValueError, match="folds"):
        select_odir(z, y, folds=1)
    with pytest.raises(ValueError, match="needs a fixed reg_lambda"):
        MatrixScaling(reg_mu=1.0)
