"""SB-ECE — soft-binned ECE, binned and label-binned (Karandikar et al. 2021, §4.1, eq. 8–12).

Anchors ξ_j = (j + ½)/M (bin centres), membership u_ij = softmax_j(−(c_i − ξ_j)² / T), c_i = top-label
confidence, a_i = 1[argmax = y_i] (hard, as in the paper; the gradient flows through the confidences)::

    S_j = Σ_i u_ij,   C_j = Σ_i u_ij c_i / max(S_j, ε),   A_j = Σ_i u_ij a_i / max(S_j, ε),   ε = 1e-5
    SB-ECE_bin,p = (Σ_j (S_j/N) |A_j − C_j|^p)^{1/p}                               (eq. 11)
    SB-ECE_lb,p  = ((1/N) Σ_i Σ_j u_ij |A_j − c_i|^p)^{1/p}                          (eq. 12)

As T → 0 the membership becomes the nearest anchor, i.e. the equal-width bin [j/M, (j+1)/M] holding c, and
SB-ECE → the hard ECE_bin,p / ECE_lb,p of eq. 6–7. For the binned variant the anchors, ε = 1e-5, the weights
S_j/ΣS (= S_j/N, memberships sum to 1) and the ℓ2 root follow google/uncertainty-baselines
(``experimental/caltrain/secondary_losses.py``); p = 2 is their default.

Label-binned variant: three deliberate differences from that reference (docs/conventions.md#sb-ece).
(1) We take the ℓ_p root of eq. 12; the reference returns the squared value. (2) Our anchors are the centres
(j + ½)/M of M equal-width bins on [0, 1]; the reference puts them at the centres of M bins on [1/K, 1].
(3) We use the softmax memberships as they are; the reference smooths them to (1 − 1e-5)·u + 1e-5/M.
Because d√X = dX/(2√X), the gradient of our root is 1/(2·SB-ECE_lb) times that of the square (≈ 10× at
SB-ECE_lb = 0.05): a loss weight β tuned with the reference must be scaled by about 2·SB-ECE_lb here.

Temperature: T must be positive. The reference code's "decay" option sets T = 1/(ln(d)·M²), which is negative
for a decay factor d < 1; the intended value is T = 1/(M² ln(1/d)) — the membership ratio between adjacent
anchors at a bin centre is then d. Our default T = 1/(15² · ln 10⁴) ≈ 4.83e-4 is that formula with the
decay factor d = 1e-4 used with the reference code and M = 15 (Karandikar et al. 2021 fix M = 15 and tune T).
:func:`temperature_from_decay` computes T for other (d, M).

The ℓ_p root is taken with a safe gradient: at an exactly zero sum (every gap 0, e.g. all-correct batch with
confidence 1) the value is 0 and the gradient 0 instead of NaN.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from ._inputs import check_logits_targets, check_positive, hard_correct, probabilities, top_confidence

BIN_SIZE_FLOOR = 1e-5


def temperature_from_decay(decay: float = 1e-4, num_bins: int = 15) -> float:
    """T such that u_{j±1}/u_j = ``decay`` for a confidence at anchor ξ_j: T = 1/(M² ln(1/d)), 0 < d < 1."""
    if not 0.0 < decay < 1.0:
        raise ValueError(f"decay must lie in (0, 1), got {decay}")
    return 1.0 / (num_bins * num_bins * math.log(1.0 / decay))


DEFAULT_TEMPERATURE = temperature_from_decay(1e-4, 15)  # ≈ 4.825e-4


def soft_bin_anchors_membership(conf: torch.Tensor, num_bins: int, temperature: float) -> torch.Tensor:
    """u_ij = softmax_j(−(c_i − ξ_j)²/T), ξ_j = (j + ½)/M; shape (N, M)."""
    anchors = (torch.arange(num_bins, dtype=conf.dtype, device=conf.device) + 0.5) / num_bins
    dist = conf.unsqueeze(1) - anchors
    return torch.softmax(-(dist * dist) / temperature, dim=1)


def _safe_root(total: torch.Tensor, p: int) -> torch.Tensor:
    if p == 1:
        return total
    positive = total > 0
    safe = torch.where(positive, total, torch.ones_like(total))
    return torch.where(positive, safe ** (1.0 / p), torch.zeros_like(total))


def _check(logits: torch.Tensor, targets: torch.Tensor, num_bins: int, temperature: float, p: int) -> float:
    check_logits_targets(logits, targets)
    if int(num_bins) != num_bins or num_bins < 1:
        raise ValueError(f"num_bins must be a positive integer, got {num_bins}")
    if p not in (1, 2):
        raise ValueError(f"p must be 1 or 2, got {p}")
    return check_positive("temperature", temperature)


def _bin_stats(conf: torch.Tensor, acc: torch.Tensor, num_bins: int, temperature: float):
    membership = soft_bin_anchors_membership(conf, num_bins, temperature)
    size = membership.sum(dim=0)  # S_j
    denom = size.clamp_min(BIN_SIZE_FLOOR)
    bin_conf = (membership * conf.unsqueeze(1)).sum(dim=0) / denom  # C_j
    bin_acc = (membership * acc.unsqueeze(1)).sum(dim=0) / denom  # A_j
    return membership, size, bin_conf, bin_acc


def sbece_from_confidence(
    conf: torch.Tensor, acc: torch.Tensor, num_bins: int = 15, temperature: float = DEFAULT_TEMPERATURE, p: int = 2
) -> torch.Tensor:
    """SB-ECE_bin,p (eq. 11) from confidences (N,) and accuracies (N,)."""
    _, size, bin_conf, bin_acc = _bin_stats(conf, acc.to(conf.dtype), num_bins, temperature)
    weights = size / size.sum()
    return _safe_root((weights * (bin_acc - bin_conf).abs() ** p).sum(), p)


def sbece_label_from_confidence(
    conf: torch.Tensor, acc: torch.Tensor, num_bins: int = 15, temperature: float = DEFAULT_TEMPERATURE, p: int = 2
) -> torch.Tensor:
    """SB-ECE_lb,p (eq. 12) from confidences (N,) and accuracies (N,)."""
    membership, _, _, bin_acc = _bin_stats(conf, acc.to(conf.dtype), num_bins, temperature)
    per_pair = (bin_acc.unsqueeze(0) - conf.unsqueeze(1)).abs() ** p  # (N, M): |A_j − c_i|^p
    return _safe_root((membership * per_pair).sum() / conf.shape[0], p)


def _on_logits(
    from_confidence: Callable[..., torch.Tensor],
    logits: torch.Tensor,
    targets: torch.Tensor,
    num_bins: int,
    temperature: float,
    p: int,
) -> torch.Tensor:
    """``from_confidence``(c, a) of N×K logits after the checks: c_i = max_k p_ik, a_i = 1[argmax = y_i]."""
    temperature = _check(logits, targets, num_bins, temperature, p)
    conf = top_confidence(probabilities(logits))
    return from_confidence(conf, hard_correct(logits, targets), int(num_bins), temperature, p)


def sbece(
    logits: torch.Tensor, targets: torch.Tensor,
    num_bins: int = 15, temperature: float = DEFAULT_TEMPERATURE, p: int = 2,
) -> torch.Tensor:
    """Soft-binned ECE_bin,p (Karandikar et al. 2021, eq. 11) of N×K logits; M = 15 (their App. E), p = 2,
    T ≈ 4.83e-4."""
    return _on_logits(sbece_from_confidence, logits, targets, num_bins, temperature, p)


def sbece_label(
    logits: torch.Tensor, targets: torch.Tensor,
    num_bins: int = 15, temperature: float = DEFAULT_TEMPERATURE, p: int = 2,
) -> torch.Tensor:
    """Soft-label-binned ECE_lb,p (Karandikar et al. 2021, eq. 12; the variant they train with) of N×K logits."""
    return _on_logits(sbece_label_from_confidence, logits, targets, num_bins, temperature, p)
