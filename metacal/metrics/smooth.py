"""Smooth, binning-free calibration errors of the top-label confidence: SECE (metric) and smECE.

* SECE metric (Wang & Golebiowski 2024, eq. 8/13) with HARD accuracy a_i = 1[ŷ_i = y_i] and a
  Gaussian kernel of bandwidth h = 0.01; computed by ``metacal.objectives.sece.sece_from_confidence``
  (the same code as the differentiable objective) for N ≤ ``CHUNK`` samples. That call holds N×N matrices,
  so larger N use ``sece_chunked`` — the identical formula (include_self=True, softmax-normalised kernel
  weights) evaluated ``ROWS`` rows at a time (tested equal to the objective's function).
* smECE (Błasiok & Nakkiran 2023): reflected-Gaussian kernel smoothing of the residuals with the
  bandwidth σ* fixed by σ* = smECE_σ*, computed by the reference package ``relplot`` (inputs converted to
  NumPy float64), so the numbers are the reference's by construction. relplot's module-wide default kernel
  (``relplot.config.use_logit_scaling = False``: reflected Gaussian) is assumed; changing that global changes
  the value.
"""

from __future__ import annotations

import numpy as np
import torch

from .inputs import array_inputs, check_conf_correct, check_probs_labels, top_label

SECE_BANDWIDTH = 0.01
CHUNK = 2048  # up to this N the objective's N×N computation is used (≈ 4M float64 entries per matrix)
ROWS = 256  # rows per step of the chunked computation (256 × N entries per matrix)


def sece_chunked(conf: torch.Tensor, acc: torch.Tensor, bandwidth: float, chunk: int = ROWS) -> torch.Tensor:
    """(1/N) Σ_i |Σ_j w_ij a_j − c_i| with w_i· = softmax_j(−(c_i − c_j)²/(2h²)) (Wang & Golebiowski 2024,
    eq. 8/13), chunked rows."""
    total = conf.new_zeros(())
    for start in range(0, conf.shape[0], chunk):
        rows = conf[start : start + chunk]
        logits = -((rows.unsqueeze(1) - conf.unsqueeze(0)) ** 2) / (2.0 * bandwidth * bandwidth)
        total = total + (torch.softmax(logits, dim=1) @ acc - rows).abs().sum()
    return total / conf.shape[0]


@array_inputs("conf", "correct")
def sece_metric_from_confidence(
    conf: torch.Tensor, correct: torch.Tensor, bandwidth: float = SECE_BANDWIDTH
) -> torch.Tensor:
    """SECE with hard accuracy (no gradient); a 0-dim tensor."""
    check_conf_correct(conf, correct)
    conf = conf.detach().double()
    correct = correct.detach().to(dtype=conf.dtype, device=conf.device)
    with torch.no_grad():
        if conf.shape[0] > CHUNK:
            return sece_chunked(conf, correct, bandwidth)
        from metacal.objectives.sece import sece_from_confidence

        return sece_from_confidence(conf, correct, bandwidth)


@array_inputs("probs", "labels")
def sece_metric(probs: torch.Tensor, labels: torch.Tensor, bandwidth: float = SECE_BANDWIDTH) -> torch.Tensor:
    """SECE (Wang & Golebiowski 2024, eq. 8) of N×K probabilities with hard accuracy."""
    check_probs_labels(probs, labels)
    conf, _, correct = top_label(probs, labels)
    return sece_metric_from_confidence(conf, correct, bandwidth)


@array_inputs("conf", "correct")
def smece_from_confidence(conf: torch.Tensor, correct: torch.Tensor) -> float:
    """smECE (relplot.smECE) of 1-D confidences and 0/1 correctness, a float."""
    try:
        import relplot
    except ImportError as exc:  # pragma: no cover - relplot is installed with metacal[test]
        raise ImportError("smECE needs the 'relplot' package: pip install relplot") from exc
    check_conf_correct(conf, correct)
    f = conf.detach().double().cpu().numpy()
    y = correct.detach().double().cpu().numpy()
    return float(relplot.smECE(np.clip(f, 0.0, 1.0), y))


@array_inputs("probs", "labels")
def smece(probs: torch.Tensor, labels: torch.Tensor) -> float:
    """smECE of the top-label confidence of N×K probabilities (fraction)."""
    check_probs_labels(probs, labels)
    conf, _, correct = top_label(probs, labels)
    return smece_from_confidence(conf, correct)
