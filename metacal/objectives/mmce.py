"""MMCE — maximum mean calibration error (Kumar, Sarawagi & Jain 2018, ICML), weighted and unweighted.

r_i = top-label confidence, c_i = 1[argmax = y_i], Laplacian kernel k(r, r') = exp(−|r − r'| / 0.4).

Weighted (MMCE_w, default), with m = #correct, n = #incorrect::

    MMCE_w² = Σ_{i,j∈C} (1−r_i)(1−r_j) k_ij / m² + Σ_{i,j∈W} r_i r_j k_ij / n² − 2 Σ_{i∈C,j∈W} (1−r_i) r_j k_ij / (m n)

i.e. ‖(1/m)Σ_C (1−r_i)φ(r_i) − (1/n)Σ_W r_j φ(r_j)‖² in the kernel's RKHS (≥ 0). Unweighted (MMCE_m)::

    MMCE_m² = (1/N²) Σ_{i,j} (c_i − r_i)(c_j − r_j) k_ij

MMCE is the norm of a kernel mean embedding, so both variants return sqrt(max(MMCE², 0) + 1e-10) (the 1e-10
keeps the gradient of the root finite; the smallest value is therefore 1e-5, "zero" for practical purposes).

Differences from the reference code — Kumar et al.'s TensorFlow code (aviralkumar2907/MMCE) and its PyTorch
port in torrvision/focal_calibration, which behave alike (docs/conventions.md#mmce):

* Normalisation of MMCE_w: we divide by m², n², mn once, as written above. Both codes average each block
  (already /m², /n², /(mn)) and then divide by m² + 1e-5, n² + 1e-5, mn + 1e-5 again — effectively 1/m⁴, 1/n⁴,
  1/(mn)². Their values are far smaller than ours, and λ values tuned with them (2–9 in CE + λ·MMCE) are far
  too large here.
* Root of MMCE_m: both codes return the squared value Σ/N² for the unweighted variant (the root only for the
  weighted one); we take the root for both, so our MMCE_m is the square root of theirs.

Other choices (documented):

* MMCE_w is undefined when a batch has no correct or no incorrect sample (m = 0 or n = 0, and so for N = 1);
  like Kumar et al.'s code we return 0 then (a tensor connected to the graph, zero gradient).
* Kernel width 0.4 (= 2 × 0.2 in Kumar et al.'s code) is the ``kernel_width`` keyword.
"""

from __future__ import annotations

import torch

from ._inputs import check_logits_targets, check_positive, hard_correct, probabilities, top_confidence

ROOT_EPS = 1e-10


def laplacian_kernel(r: torch.Tensor, width: float = 0.4) -> torch.Tensor:
    """k(r_i, r_j) = exp(−|r_i − r_j| / width), shape (N, N)."""
    return torch.exp(-(r.unsqueeze(1) - r.unsqueeze(0)).abs() / width)


def mmce_from_confidence(
    conf: torch.Tensor, correct: torch.Tensor, weighted: bool = True, kernel_width: float = 0.4
) -> torch.Tensor:
    """MMCE (weighted or unweighted) from confidences r (N,) and 0/1 correctness c (N,)."""
    correct = correct.to(conf.dtype)
    kernel = laplacian_kernel(conf, kernel_width)
    if weighted:
        m = correct.sum()
        n = (1 - correct).sum()
        defined = ((m > 0) & (n > 0)).to(conf.dtype)  # no host sync: 0 switches the result off
        # signed weights: +(1−r_i)/m on correct samples, −r_j/n on incorrect ones; MMCE_w² = vᵀ K v
        vec = correct * (1 - conf) / m.clamp_min(1) - (1 - correct) * conf / n.clamp_min(1)
    else:
        defined = torch.ones((), dtype=conf.dtype, device=conf.device)
        vec = (correct - conf) / conf.shape[0]
    squared = vec @ kernel @ vec
    return defined * torch.sqrt(squared.clamp_min(0.0) + ROOT_EPS)


def mmce(
    logits: torch.Tensor,
    targets: torch.Tensor,
    weighted: bool = True,
    kernel_width: float = 0.4,
) -> torch.Tensor:
    """MMCE of N×K logits (Kumar et al. 2018); ``weighted=True`` is MMCE_w, kernel width 0.4 (their code)."""
    check_logits_targets(logits, targets)
    kernel_width = check_positive("kernel_width", kernel_width)
    conf = top_confidence(probabilities(logits))
    return mmce_from_confidence(conf, hard_correct(logits, targets), bool(weighted), kernel_width)
