"""DECE — differentiable expected calibration error (Bohdal et al. 2021, "Meta-calibration"; docs/conventions.md#dece).

Soft binning of the top-label confidence c_i (DNDT binning layer, Yang et al. 2018) into M equal-width bins::

    β = (0, 1/M, …, (M−1)/M),   w = (1, …, M),   b = cumsum(−β)
    o_im = softmax_m((w_m c_i + b_m) / t_b)                           (→ one-hot of the hard bin as t_b → 0)

Soft accuracy a_i from the all-pairs soft rank (see :mod:`.soft_accuracy`, sharpness t_a). Then::

    S_m = Σ_i o_im,  conf_m = Σ_i o_im c_i / S_m,  acc_m = Σ_i o_im a_i / S_m
    DECE = Σ_m (S_m / N) |acc_m − conf_m|  =  (1/N) Σ_m |Σ_i o_im (a_i − c_i)|

Choices (documented):

* We evaluate the right-hand form, algebraically identical whenever S_m > 0; it never divides by S_m, so an
  empty bin contributes 0 instead of 0/0.
* ``membership_eps=1e-6`` (default) follows the reference code in adding ε = 1e-6 to every membership, but
  then divides each row by its true sum 1 + Mε (= 1 + 15ε), so memberships sum to 1. The reference divides by
  1 + (M + 1)ε (= 1 + 16ε) instead; DECE being linear in the memberships, its value is ours times
  (1 + 15ε)/(1 + 16ε), i.e. smaller by a factor 1 − 1e-6. The constant is not needed for stability here;
  ``membership_eps=0`` gives the plain soft binning (used by the limit tests).
* Bin boundaries: a confidence exactly on a cut point j/M gets membership ½/½ in the two neighbouring bins;
  as t_b → 0 every other confidence goes to its equal-width bin, so DECE → hard-binned ECE with soft accuracy,
  and with t_a → ∞ as well → the usual 15-bin ECE.

Defaults M = 15, t_a = 100, t_b = 0.01 (Bohdal et al. 2021).
"""

from __future__ import annotations

import torch

from ._inputs import check_logits_targets, check_positive, probabilities, top_confidence
from .soft_accuracy import soft_accuracy_from_probs


def soft_bin_membership(
    conf: torch.Tensor, num_bins: int = 15, t_b: float = 0.01, membership_eps: float = 1e-6
) -> torch.Tensor:
    """DNDT soft binning of confidences (N,) into ``num_bins`` equal-width bins → memberships (N, M), rows sum to 1."""
    steps = torch.arange(num_bins, dtype=conf.dtype, device=conf.device)
    slopes = steps + 1.0  # w = 1..M
    cuts = steps / num_bins  # β = 0, 1/M, ..., (M−1)/M
    offsets = torch.cumsum(-cuts, dim=0)  # b
    membership = torch.softmax((conf.unsqueeze(1) * slopes + offsets) / t_b, dim=1)
    if membership_eps > 0:
        membership = membership + membership_eps
        membership = membership / membership.sum(dim=1, keepdim=True)
    return membership


def dece_from_confidence(
    conf: torch.Tensor,
    acc: torch.Tensor,
    num_bins: int = 15,
    t_b: float = 0.01,
    membership_eps: float = 1e-6,
) -> torch.Tensor:
    """DECE from confidences (N,) and (soft) accuracies (N,): (1/N) Σ_m |Σ_i o_im (a_i − c_i)|."""
    membership = soft_bin_membership(conf, num_bins, t_b, membership_eps)
    gaps = membership.transpose(0, 1) @ (acc.to(conf.dtype) - conf)  # (M,)
    return gaps.abs().sum() / conf.shape[0]


def dece(
    logits: torch.Tensor,
    targets: torch.Tensor,
    num_bins: int = 15,
    t_a: float = 100.0,
    t_b: float = 0.01,
    *,
    membership_eps: float = 1e-6,
) -> torch.Tensor:
    """DECE of N×K logits against integer targets (Bohdal et al. 2021); a scalar tensor.

    Args:
        num_bins: M equal-width bins; 15.
        t_a: soft-rank sharpness of the accuracy; 100.
        t_b: soft-binning temperature; 0.01.
        membership_eps: the reference's add-and-renormalise constant (see module docstring); 1e-6.
    """
    check_logits_targets(logits, targets)
    if int(num_bins) != num_bins or num_bins < 1:
        raise ValueError(f"num_bins must be a positive integer, got {num_bins}")
    t_a = check_positive("t_a", t_a)
    t_b = check_positive("t_b", t_b)
    if membership_eps < 0:
        raise ValueError(f"membership_eps must be >= 0, got {membership_eps}")
    probs = probabilities(logits)
    conf = top_confidence(probs)
    acc = soft_accuracy_from_probs(probs, targets, t_a)
    return dece_from_confidence(conf, acc, int(num_bins), t_b, float(membership_eps))
