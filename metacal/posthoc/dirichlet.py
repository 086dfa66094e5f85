"""Dirichlet calibration with ODIR (Kull et al. 2019, §3–4, "Dir-ODIR"): q = softmax(W ln p + b), a linear
layer on the log-probabilities followed by a softmax, with a full K×K matrix W and intercept b, fitted by
minimum mean NLL plus the ODIR penalty λ/(K(K−1)) Σ_{i≠j} W_ij² + μ/K Σ_i b_i² (:mod:`metacal.posthoc.affine`;
λ = μ by 5-fold cross-validation unless fixed, :mod:`metacal.posthoc.matrix`).

It takes logits like the other scaling methods and uses ln p = log_softmax(z) (exact, no clipping); with
probabilities only, pass ln p (``Predictions.logits_for_scaling`` clamps p at 1e-12). W = I, b = 0 is the
identity map, which is the fitted map in the limit of a calibrated model. For K = 2 the family is beta
calibration (Kull, Silva Filho & Flach 2017): logit q_1 = a ln p_1 − b ln p_0 + c.
"""

from __future__ import annotations

from .matrix import ODIRCalibrator


class DirichletCalibration(ODIRCalibrator):
    """softmax(W log_softmax(z) + b), ODIR-regularised (module docstring)."""

    log_probs = True
    name = "Dirichlet calibration"
