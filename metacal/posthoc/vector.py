"""Vector scaling (Guo et al. 2017, §4.2): q = softmax(w ⊙ z + b), one scale w_k and one intercept b_k per
class, fitted on held-out LOGITS by minimum mean NLL (L-BFGS, float64; :mod:`metacal.posthoc.affine`).

Unregularised by default, as in Guo et al. and Kull et al. 2019's "VS"; ``reg_mu`` > 0 adds μ/K Σ b_k².
Temperature scaling is the special case w = (1/T)·1, b = 0. netcal's ``LogisticCalibration`` (method
"mle") fits the same family on ln p instead of z; on logits that are log-probabilities the two coincide.
"""

from __future__ import annotations

from .affine import MAX_ITER, AffineCalibrator


class VectorScaling(AffineCalibrator):
    """softmax(w ⊙ z + b); ``weight`` is the K-vector w. ``reg_mu``: intercept penalty μ (default 0)."""

    diagonal = True
    name = "vector scaling"

    def __init__(self, reg_mu: float = 0.0, max_iter: int = MAX_ITER) -> None:
        super().__init__(max_iter)
        if not float(reg_mu) >= 0:
            raise ValueError(f"reg_mu must be ≥ 0, got {reg_mu}")
        self.reg_mu = float(reg_mu)

    @staticmethod
    def min_samples(num_classes: int) -> int:
        """2K: one fitting sample per parameter."""
        return 2 * num_classes

    def _regularisation(self, x, y) -> tuple[float, float]:
        return 0.0, self.reg_mu
