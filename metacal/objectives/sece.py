"""SECE — smooth expected calibration error (Wang & Golebiowski 2024, TMLR; §4.2, eq. 6–8, 13).

With c_i the top-label confidence and a_j a per-sample accuracy::

    K(c_i, c_j) = exp(−(c_i − c_j)² / (2h²))                        (eq. 7, Gaussian kernel, h = 0.01)
    Â_i         = Σ_j K(c_i, c_j) a_j / Σ_j K(c_i, c_j)             (eq. 6 numerator, normalised as eq. 13)
    SECE        = (1/N) Σ_i |Â_i − c_i|                             (eq. 8)

Choices (documented, the paper does not fix them):

* ``include_self=True`` (default): the sum over j includes j = i, as in eq. 13 where the kernel
  estimate at z_t = c_i sums over all M points. Then Σ_j K ≥ 1, Â_i is always defined (also for N = 1),
  and h → 0 with distinct confidences gives Â_i = a_i, i.e. SECE → mean_i |a_i − c_i| (the
  "single-example bin" of §4.2). ``include_self=False`` is the leave-one-out estimate (needs N ≥ 2;
  h → 0 then gives the nearest neighbour's accuracy).
* The normalised weights are computed as a softmax over j of −(c_i − c_j)²/(2h²), which equals eq. 13
  exactly but never divides 0 by 0 when every off-diagonal kernel value underflows (h = 0.01 in float32).
* |·| is the plain absolute value: its gradient at an exact tie Â_i = c_i is 0 (torch's sign(0)), finite,
  so no smoothing is needed; tests use gradcheck away from such ties.
* h → ∞ makes all weights uniform, Â_i → ā (mean accuracy), so SECE → (1/N) Σ_i |ā − c_i|, which equals
  |ā − c̄| when all confidences lie on the same side of ā (e.g. an over-confident model).

Memory O(N²): fine for meta-validation batches of 128–1000.
"""

from __future__ import annotations

import torch

from ._inputs import check_logits_targets, check_positive, hard_correct, probabilities, top_confidence
from .soft_accuracy import soft_accuracy_from_probs

ACCURACY_MODES = ("soft", "hard")


def kernel_accuracy(
    conf: torch.Tensor, acc: torch.Tensor, bandwidth: float = 0.01, include_self: bool = True
) -> torch.Tensor:
    """Â_i = Σ_j K(c_i,c_j) a_j / Σ_j K(c_i,c_j) with the Gaussian kernel of bandwidth h (Wang & Golebiowski
    2024, eq. 13)."""
    diff = conf.unsqueeze(1) - conf.unsqueeze(0)  # (N, N): c_i − c_j
    log_kernel = -(diff * diff) / (2.0 * bandwidth * bandwidth)
    if not include_self:
        eye = torch.eye(conf.shape[0], dtype=torch.bool, device=conf.device)
        log_kernel = log_kernel.masked_fill(eye, float("-inf"))
    weights = torch.softmax(log_kernel, dim=1)  # row i: K(c_i, ·) / Σ_j K(c_i, c_j)
    return weights @ acc


def sece_from_confidence(
    conf: torch.Tensor, acc: torch.Tensor, bandwidth: float = 0.01, *, include_self: bool = True
) -> torch.Tensor:
    """SECE from 1-D confidences c (N,) and accuracies a (N,) in [0, 1] (hard 0/1 or soft).

    Returns the scalar (1/N) Σ_i |Â_i − c_i| (Wang & Golebiowski 2024, eq. 8), differentiable w.r.t. ``conf`` and ``acc``.
    ``bandwidth`` h = 0.01 is the paper's grid-searched value (Wang & Golebiowski 2024, §5, "Gaussian kernel with bandwidth
    of 0.01"). See the module docstring for ``include_self``.
    """
    if not isinstance(conf, torch.Tensor) or not isinstance(acc, torch.Tensor):
        raise ValueError("conf and acc must be torch tensors")
    if conf.dim() != 1 or acc.dim() != 1 or conf.shape != acc.shape:
        raise ValueError(
            f"conf and acc must be 1-D tensors of equal length, got {tuple(conf.shape)} and {tuple(acc.shape)}"
        )
    if conf.shape[0] == 0:
        raise ValueError("SECE needs at least one sample, got empty tensors")
    if not include_self and conf.shape[0] < 2:
        raise ValueError("SECE with include_self=False needs at least 2 samples; use include_self=True")
    if not conf.is_floating_point():
        raise ValueError(f"conf must be floating point, got {conf.dtype}")
    bandwidth = check_positive("bandwidth", bandwidth)
    acc = acc.to(dtype=conf.dtype, device=conf.device)
    smoothed = kernel_accuracy(conf, acc, bandwidth, include_self)
    return (smoothed - conf).abs().mean()


def sece(
    logits: torch.Tensor,
    targets: torch.Tensor,
    bandwidth: float = 0.01,
    accuracy: str = "soft",
    t_a: float = 100.0,
    *,
    include_self: bool = True,
) -> torch.Tensor:
    """SECE of N×K logits against integer targets (Wang & Golebiowski 2024, §4.2); a scalar tensor.

    Args:
        bandwidth: Gaussian kernel width h; 0.01 (Wang & Golebiowski 2024, §5, grid-searched).
        accuracy: ``"soft"`` — a_j from the all-pairs soft rank (Wang & Golebiowski 2024, §4.2, as in DECE), differentiable;
            ``"hard"`` — a_j = 1[argmax = y] (eq. 13's binary accuracy), gradient only through confidences.
        t_a: soft-rank sharpness for ``accuracy="soft"``; 100 (Bohdal et al. 2021).
        include_self: include j = i in the kernel sums (default; see module docstring).
    """
    check_logits_targets(logits, targets)
    if accuracy not in ACCURACY_MODES:
        raise ValueError(f"accuracy must be one of {ACCURACY_MODES}, got {accuracy!r}")
    t_a = check_positive("t_a", t_a)
    probs = probabilities(logits)
    conf = top_confidence(probs)
    if accuracy == "soft":
        acc = soft_accuracy_from_probs(probs, targets, t_a)
    else:
        acc = hard_correct(logits, targets)
    return sece_from_confidence(conf, acc, bandwidth, include_self=include_self)
