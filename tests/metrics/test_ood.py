"""OOD detection (metacal.metrics.ood) against scikit-learn on tied scores, hand-computed tiny cases and the
score definitions."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.special import logsumexp, softmax
from sklearn.metrics import average_precision_score, roc_auc_score, roc_curve

from metacal.metrics.ood import SCORES, auroc, average_precision, fpr_at_tpr, ood_detection, ood_scores


def sklearn_metrics(s_in: np.ndarray, s_out: np.ndarray) -> dict[str, float]:
    y = np.r_[np.ones(len(s_in)), np.zeros(len(s_out))]
    s = np.r_[s_in, s_out]
    fpr, tpr, _ = roc_curve(y, s, drop_intermediate=False)
    return {"auroc": roc_auc_score(y, s), "aupr_in": average_precision_score(y, s),
            "aupr_out": average_precision_score(1 - y, -s), "fpr95": float(fpr[tpr >= 0.95].min())}


@pytest.mark.parametrize("seed, n_in, n_out, k, decimals", [
    (0, 200, 150, 5, 1), (1, 1000, 700, 10, 2), (2, 37, 500, 3, 0), (3, 20, 20, 2, 1)])
def test_agrees_with_sklearn_on_tied_scores(seed, n_in, n_out, k, decimals):
    rng = np.random.default_rng(seed)
    # logit rows drawn from a pool of 40 (ID mostly from the sharper half): every score ties within and across
    # the two sets; logits on a coarse grid, so max_logit also ties between different rows
    pool = np.round(rng.normal(size=(40, k)) * 2 + np.eye(k)[rng.integers(0, k, 40)] * np.linspace(0, 4, 40)[:, None],
                    decimals)
    z_in = pool[np.minimum(rng.integers(10, 50, n_in), 39)]
    z_out = pool[rng.integers(0, 30, n_out)]
    got = ood_detection(z_in, torch.from_numpy(z_out))
    assert list(got) == list(SCORES) and all(list(v) == ["auroc", "aupr_in", "aupr_out", "fpr95"]
                                             for v in got.values())
    s_in, s_out = ood_scores(z_in), ood_scores(z_out)
    for name in SCORES:
        a, b = s_in[name].numpy(), s_out[name].numpy()
        assert len(np.unique(np.r_[a, b])) < len(a) + len(b), name  # ties are really there
        expected = sklearn_metrics(a, b)
        for key, value in expected.items():
            assert got[name][key] == pytest.approx(value, abs=1e-12), (name, key)


def test_scores_are_the_documented_formulas():
    rng = np.random.default_rng(4)
    z = rng.normal(size=(50, 7)) * 3
    s = ood_scores(z)
    assert list(s) == ["msp", "max_logit", "energy", "entropy"]
    p = softmax(z, axis=1)
    assert np.allclose(s["msp"], p.max(1), rtol=0, atol=1e-15)
    assert np.array_equal(s["max_logit"].numpy(), z.max(1))
    assert np.allclose(s["energy"], logsumexp(z, axis=1), rtol=0, atol=1e-13)
    assert np.allclose(s["entropy"], (p * np.log(p)).sum(1), rtol=0, atol=1e-13)
    # log-probabilities as logits: msp and entropy unchanged, max_logit = ln msp, energy 0
    lp = ood_scores(np.log(p))
    assert np.allclose(lp["msp"], s["msp"], atol=1e-14) and np.allclose(lp["entropy"], s["entropy"], atol=1e-13)
    assert np.allclose(lp["max_logit"], np.log(p.max(1)), atol=1e-14) and np.allclose(lp["energy"], 0, atol=1e-14)
    # a one-hot-like row (probability underflows to 0): entropy stays finite, 0
    assert float(ood_scores(torch.tensor([[0.0, -1000.0]]))["entropy"]) == 0.0


def test_hand_computed_tiny_case():
    # ID scores 3, 2, 1; OOD scores 2, 0. Pairs (ID > OOD): 3>2, 3>0, 2>0, 1>0 = 4; 2=2 tie = ½ → 4.5 / 6
    pos, neg = torch.tensor([3.0, 2.0, 1.0]), torch.tensor([2.0, 0.0])
    assert auroc(pos, neg) == pytest.approx(0.75, abs=1e-15)
    # thresholds 3, 2, 1, 0: (TP, FP) = (1, 0), (2, 1), (3, 1), (3, 2); AP = 1/3·1 + 1/3·2/3 + 1/3·3/4
    assert average_precision(pos, neg) == pytest.approx((1 + 2 / 3 + 3 / 4) / 3, abs=1e-15)
    # OOD positive, negated scores: thresholds 0, -1, -2, -3: (TP, FP) = (1, 0), (1, 1), (2, 2), (2, 3)
    assert average_precision(-neg, -pos) == pytest.approx(0.5 * 1 + 0.5 * 0.5, abs=1e-15)
    # TPR ≥ 0.95 first at threshold 1 (TPR 1): FPR = 1/2
    assert fpr_at_tpr(pos, neg) == 0.5
    assert fpr_at_tpr(pos, neg, 0.6) == 0.5 and fpr_at_tpr(pos, neg, 0.3) == 0.0
    # perfectly separated / identical sets
    assert auroc(pos + 10, neg) == 1.0 and fpr_at_tpr(pos + 10, neg) == 0.0
    same = torch.ones(4)
    assert auroc(same, same) == 0.5 and fpr_at_tpr(same, same) == 1.0 and average_precision(same, same) == 0.5


@pytest.mark.parametrize("inside, outside, needle", [
    (np.zeros((3, 4)), np.zeros((3, 5)), "K = 4 classes but ood_logits have K = 5"),
    (np.zeros((0, 4)), np.zeros((3, 4)), "id_logits is empty"),
    (np.zeros((3, 4)), np.zeros((0, 4)), "ood_logits is empty"),
    (np.array([[0.0, np.nan]]), np.zeros((1, 2)), "id_logits contain NaN or inf"),
    (np.zeros((1, 2)), np.array([[np.inf, 0.0]]), "ood_logits contain NaN or inf"),
    (np.zeros(3), np.zeros((3, 1)), "must be 2-D"),
    ("logits", np.zeros((3, 1)), "must be a tensor"),
])
def test_bad_input_is_one_line(inside, outside, needle):
    with pytest.raises(ValueError, match=needle) as info:
        ood_detection(inside, outside)
    assert "\n" not in str(info.value)
