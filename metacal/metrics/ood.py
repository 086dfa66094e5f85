"""Out-of-distribution detection from a classifier's logits: in-distribution (ID) is the positive class and every
score is "higher = more in-distribution" (docs/conventions.md#selective).

Scores of logits z (float64):

* ``msp``: max_k softmax(z)_k (Hendrycks & Gimpel 2017);
* ``max_logit``: max_k z_k (Hendrycks et al. 2022);
* ``energy``: log Σ_k exp z_k, the negative free energy at T = 1 (Liu et al., NeurIPS 2020, eq. 1 and §3);
* ``entropy``: −H(softmax(z)) = Σ_k p_k log p_k (negated, so that higher means more confident).

Detection metrics, ID samples s⁺ (P of them), OOD samples s⁻ (Q of them); thresholds t run over the distinct
scores and accept s ≥ t:

* ``auroc``: P(s⁺ > s⁻) + ½ P(s⁺ = s⁻) (Mann–Whitney U / (PQ); ties count ½), from mid-ranks;
* ``aupr_in``: average precision with ID positive, Σ_j (R_j − R_{j−1}) Prec_j over the distinct thresholds
  (step-wise, no interpolation: scikit-learn's ``average_precision_score``);
* ``aupr_out``: the same with OOD positive and the scores negated;
* ``fpr95``: the fraction of OOD accepted at the HIGHEST threshold whose TPR (fraction of ID with s ≥ t) is
  ≥ 0.95 — the smallest FPR among the ROC points with TPR ≥ 0.95, since FPR only grows as t falls.

With only probabilities available, log p stands for the logits (log-softmax is softmax-invariant): msp and
entropy are unchanged, max_logit = log msp, and energy = log Σ_k p_k = 0 for every sample (useless).
"""

from __future__ import annotations

from typing import Any

import torch

from .inputs import as_tensor

SCORES = ("msp", "max_logit", "energy", "entropy")
DETECTION_KEYS = ("auroc", "aupr_in", "aupr_out", "fpr95")
TPR_LEVEL = 0.95


def ood_scores(logits: Any) -> dict[str, torch.Tensor]:
    """{score: (N,) float64} for ``SCORES``, in that order (module docstring)."""
    z = _check_logits(logits, "logits")
    log_p = torch.log_softmax(z, dim=1)
    p = log_p.exp()
    return {"msp": p.amax(dim=1), "max_logit": z.amax(dim=1), "energy": torch.logsumexp(z, dim=1),
            "entropy": (p * log_p).sum(dim=1)}


def ood_detection(id_logits: Any, ood_logits: Any) -> dict[str, dict[str, float]]:
    """{score: {"auroc", "aupr_in", "aupr_out", "fpr95"}} for every ``SCORES`` entry, ID = positive."""
    inside, outside = _check_logits(id_logits, "id_logits"), _check_logits(ood_logits, "ood_logits")
    if inside.shape[1] != outside.shape[1]:
        raise ValueError(f"id_logits have K = {inside.shape[1]} classes but ood_logits have K = "
                         f"{outside.shape[1]}; both must come from the same model")
    scores_in, scores_out = ood_scores(inside), ood_scores(outside)
    return {name: detection_metrics(scores_in[name], scores_out[name]) for name in SCORES}


def detection_metrics(inside: torch.Tensor, outside: torch.Tensor) -> dict[str, float]:
    """AUROC, AUPR-In, AUPR-Out and FPR95 of one score on ID (``inside``) and OOD (``outside``) samples."""
    s_in, s_out = inside.double().flatten().cpu(), outside.double().flatten().cpu()
    return {"auroc": auroc(s_in, s_out), "aupr_in": average_precision(s_in, s_out),
            "aupr_out": average_precision(-s_out, -s_in), "fpr95": fpr_at_tpr(s_in, s_out, TPR_LEVEL)}


def auroc(positive: torch.Tensor, negative: torch.Tensor) -> float:
    """(Σ mid-ranks of the positives − P(P+1)/2) / (PQ): the Mann–Whitney AUROC, ties ½."""
    scores = torch.cat([positive, negative]).double()
    values, group, counts = torch.unique(scores, sorted=True, return_inverse=True, return_counts=True)
    below = counts.cumsum(0) - counts  # samples strictly below each distinct value
    mid_rank = below.double() + (counts.double() + 1.0) / 2.0
    p, q = positive.shape[0], negative.shape[0]
    rank_sum = mid_rank[group[:p]].sum()
    return float((rank_sum - p * (p + 1) / 2.0) / (p * q))


def _cumulative(positive: torch.Tensor, negative: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(TP_j, FP_j) at the distinct thresholds, highest first: counts with score ≥ t_j (float64)."""
    values, group = torch.unique(torch.cat([positive, negative]).double(), sorted=True, return_inverse=True)
    u, p = int(values.shape[0]), positive.shape[0]
    group = u - 1 - group
    is_pos = torch.zeros(group.shape[0], dtype=torch.float64)
    is_pos[:p] = 1.0
    tp = torch.zeros(u, dtype=torch.float64).index_add_(0, group, is_pos).cumsum(0)
    fp = torch.zeros(u, dtype=torch.float64).index_add_(0, group, 1.0 - is_pos).cumsum(0)
    return tp, fp


def average_precision(positive: torch.Tensor, negative: torch.Tensor) -> float:
    """Σ_j (R_j − R_{j−1}) · TP_j / (TP_j + FP_j), R_j = TP_j / P, R_0 = 0 (higher score = positive)."""
    tp, fp = _cumulative(positive, negative)
    recall = tp / positive.shape[0]
    return float((torch.diff(recall, prepend=recall.new_zeros(1)) * tp / (tp + fp)).sum())


def fpr_at_tpr(positive: torch.Tensor, negative: torch.Tensor, level: float = TPR_LEVEL) -> float:
    """FP_j / Q at the first (highest) threshold with TP_j / P ≥ ``level``."""
    tp, fp = _cumulative(positive, negative)
    first = int((tp / positive.shape[0] < level).sum())
    return float(fp[first] / negative.shape[0])


def _check_logits(x: Any, name: str) -> torch.Tensor:
    x = as_tensor(x, name)
    if x.dim() != 2 or x.shape[1] < 1:
        raise ValueError(f"{name} must be 2-D (N, K), got shape {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise ValueError(f"{name} is empty; need at least one sample")
    if not x.is_floating_point():
        x = x.double()
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} contain NaN or inf; remove or fix those rows")
    return x.detach().double().cpu()
