"""AvUC and soft AvUC (S-AvUC) — accuracy-versus-uncertainty calibration losses.

AvUC (Krishnan & Tickoo 2020; Karandikar et al. 2021, eq. 13–14). a_i = 1[argmax = y_i], c_i = top-label confidence,
h_i = predictive entropy (nats). Certain ⇔ h_i < κ, uncertain ⇔ h_i ≥ κ::

    n_AU = Σ_{A,U} c_i tanh h_i          n_IC = Σ_{I,C} (1 − c_i)(1 − tanh h_i)
    n_AC = Σ_{A,C} c_i (1 − tanh h_i)    n_IU = Σ_{I,U} (1 − c_i) tanh h_i
    AvUC = log(1 + (n_AU + n_IC) / (n_AC + n_IU))

S-AvUC (Karandikar et al. 2021, eq. 15–16) replaces the hard certain/uncertain split by the soft
uncertainty t = t_{κ,T}(h*) = logistic((1/T) log(h*(1 − κ) / ((1 − h*) κ))), h* = h / log K, and drops the
confidence factors::

    n'_AU = Σ_{a=1} t tanh h    n'_IC = Σ_{a=0} (1 − t)(1 − tanh h)
    n'_AC = Σ_{a=1} (1 − t)(1 − tanh h)    n'_IU = Σ_{a=0} t tanh h

As T → 0, t → 1[h* > κ] (hard threshold κ·log K nats).

Defaults and choices (documented):

* AvUC κ: no published default (Krishnan & Tickoo set it from the mean entropy of the first epochs; Karandikar et al. 2021
  tune it). ``kappa=None`` means half the maximum entropy, 0.5·log K nats — the hard counterpart of S-AvUC's
  κ = 0.5 on the normalised entropy. Pass a number (nats) to set it.
* S-AvUC κ = 0.5, T = 1: the member of the t_{κ,T} family that is the identity t(h*) = h* (Karandikar et al. 2021, §4.2);
  these are also the defaults of the reference ``soft_uncertainty`` in google/uncertainty-baselines. Karandikar et al. 2021
  tune both; no tuned values are published.
* The denominator is floored at 1e-5 as in the reference code (it is 0 only when every accurate sample is
  uncertain with c = 1 … or no such terms exist), so the loss stays finite.
* h* is clamped to [1e-6, 1 − 1e-6] inside the logit of t only (confidence exactly 1 gives h* = 0 and an
  infinite log); tanh(h) uses the exact entropy. Entropy is −Σ p log p from log_softmax (finite for ±1e4 logits).
* ``stop_confidence_gradient=True`` gives AvUC-GS (Karandikar et al. 2021, App. D): no gradient through the c_i factors.
"""

from __future__ import annotations

import math
from typing import Optional

import torch

from ._inputs import check_logits_targets, check_positive, hard_correct

DENOMINATOR_FLOOR = 1e-5
NORMALISED_ENTROPY_CLAMP = 1e-6


def _entropy_and_probs(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    log_probs = torch.log_softmax(logits, dim=1)
    probs = torch.exp(log_probs)
    return -(probs * log_probs).sum(dim=1), probs


def _log_ratio(bad: torch.Tensor, good: torch.Tensor) -> torch.Tensor:
    return torch.log1p(bad / good.clamp_min(DENOMINATOR_FLOOR))


def avuc(
    logits: torch.Tensor,
    targets: torch.Tensor,
    kappa: Optional[float] = None,
    *,
    stop_confidence_gradient: bool = False,
) -> torch.Tensor:
    """AvUC loss (Karandikar et al. 2021, eq. 13–14) of N×K logits; ``kappa`` = entropy threshold in nats
    (None → 0.5·log K)."""
    check_logits_targets(logits, targets)
    num_classes = logits.shape[1]
    if kappa is None:
        kappa = 0.5 * math.log(num_classes)
    elif not (float(kappa) >= 0.0) or math.isinf(float(kappa)):
        raise ValueError(f"kappa (entropy threshold in nats) must be a finite number >= 0, got {kappa}")
    entropy, probs = _entropy_and_probs(logits)
    conf = probs.max(dim=1).values
    if stop_confidence_gradient:
        conf = conf.detach()
    accurate = hard_correct(logits, targets)
    uncertain = (entropy >= kappa).to(logits.dtype)
    tanh_h = torch.tanh(entropy)
    n_au = (accurate * uncertain * conf * tanh_h).sum()
    n_ic = ((1 - accurate) * (1 - uncertain) * (1 - conf) * (1 - tanh_h)).sum()
    n_ac = (accurate * (1 - uncertain) * conf * (1 - tanh_h)).sum()
    n_iu = ((1 - accurate) * uncertain * (1 - conf) * tanh_h).sum()
    return _log_ratio(n_au + n_ic, n_ac + n_iu)


def soft_uncertainty(normalised_entropy: torch.Tensor, kappa: float = 0.5, temperature: float = 1.0) -> torch.Tensor:
    """t_{κ,T}(h*) = logistic((logit(h*) − logit(κ)) / T) (Karandikar et al. 2021, §4.2), h* clamped to [1e-6, 1 − 1e-6]."""
    h = normalised_entropy.clamp(NORMALISED_ENTROPY_CLAMP, 1.0 - NORMALISED_ENTROPY_CLAMP)
    logit_h = torch.log(h) - torch.log1p(-h)
    return torch.sigmoid((logit_h - math.log(kappa / (1.0 - kappa))) / temperature)


def savuc(
    logits: torch.Tensor,
    targets: torch.Tensor,
    kappa: float = 0.5,
    temperature: float = 1.0,
) -> torch.Tensor:
    """Soft AvUC (Karandikar et al. 2021, eq. 15–16) of N×K logits; κ ∈ (0, 1) on the normalised entropy, T > 0."""
    check_logits_targets(logits, targets)
    if not 0.0 < float(kappa) < 1.0:
        raise ValueError(f"kappa must lie in (0, 1) (threshold on entropy / log K), got {kappa}")
    temperature = check_positive("temperature", temperature)
    num_classes = logits.shape[1]
    if num_classes < 2:
        raise ValueError("S-AvUC needs at least 2 classes (entropy is normalised by log K)")
    entropy, _ = _entropy_and_probs(logits)
    t = soft_uncertainty(entropy / math.log(num_classes), float(kappa), temperature)
    accurate = hard_correct(logits, targets)
    tanh_h = torch.tanh(entropy)
    n_au = (accurate * t * tanh_h).sum()
    n_ic = ((1 - accurate) * (1 - t) * (1 - tanh_h)).sum()
    n_ac = (accurate * (1 - t) * (1 - tanh_h)).sum()
    n_iu = ((1 - accurate) * t * tanh_h).sum()
    return _log_ratio(n_au + n_ic, n_ac + n_iu)
