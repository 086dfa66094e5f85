"""Damped Newton's method for the affine calibration fit of :mod:`metacal.posthoc.affine` when K is small.

The map is written per class i as logits z_ni = Σ_a Θ_ia φ_nia: for a full W, Θ = [W | b] (K×(K+1)) and
φ_ni = (x_n, 1) for every class; for a diagonal W, Θ = [w | b] (K×2) and φ_ni = (x_ni, 1). With
q = softmax(z), R = (Q − Y)/N and D the ODIR weights (λ/(K(K−1)) on off-diagonal W_ij, μ/K on b_i, 0 else):

    ∇L = Σ_n R_ni φ_nia + 2 D ⊙ Θ
    ∇²L = (1/N) Σ_n [δ_ij q_ni − q_ni q_nj] φ_nia φ_njb + 2 diag(D)

(the Hessian of multinomial logistic regression, e.g. Böhning 1992). Every iterate is kept gauge-fixed
(G = P Θ, P the linear projection of :func:`metacal.posthoc.affine.gauge_fixed`); L(Θ) = L(PΘ), so the
gradient and Hessian in Θ are Pᵀ∇L(G) and Pᵀ∇²L(G) P, singular along the K + 1 (diagonal W: 1) directions
softmax ignores; the step is their least-squares solution, followed by a backtracking (Armijo) line search.
The reference code (dirichletcal) also fits with Newton's method for K ≤ 36. ``scripts/bench_posthoc.py
--predictions runs/sweep_fmo/ce/seed0/predictions/val.npz`` (6,000 validation logits of an over-confident
Fashion-MNIST CE model, K = 10, one core): 0.14–0.19 s per fit against 0.16–4.4 s for L-BFGS-B at
λ = μ = 100 … 10⁻⁴; the cross-validated matrix scaling 3.9 s against 24.6 s, Dirichlet 3.6 s against 31.4 s.
On well-conditioned synthetic logits (the script's default data) L-BFGS is 1.1–1.7× faster per fit; it is at
small λ on real, over-confident logits, where L is badly conditioned, that L-BFGS needs thousands of steps.
The Hessian costs N·K²·m² per step (m = K + 1 for a full W), so :mod:`metacal.posthoc.affine` uses this engine
only up to ``NEWTON_MAX_CLASSES`` classes and L-BFGS beyond.
"""

from __future__ import annotations

import numpy as np

NEWTON_MAX_CLASSES = 20  # Hessian (K(K+1))² = 176k entries at K = 20; CIFAR-100's K = 100 would need 10⁸
ARMIJO = 1e-4  # sufficient-decrease constant of the line search


def _features(x: np.ndarray, diagonal: bool) -> np.ndarray:
    """φ of the module docstring, N×K×m."""
    n, k = x.shape
    ones = np.ones((n, k, 1))
    if diagonal:
        return np.concatenate([x[:, :, None], ones], axis=2)
    return np.concatenate([np.broadcast_to(x[:, None, :], (n, k, k)), ones], axis=2)


def _gauge(theta: np.ndarray, diagonal: bool) -> np.ndarray:
    """P Θ for one Θ (K×m) or a stack (…×K×m): b − mean(b); a full W loses its mean off-diagonal per column."""
    k = theta.shape[-2]
    out = theta.copy()
    out[..., :, -1] -= out[..., :, -1].mean(axis=-1, keepdims=True)
    if not diagonal:
        w = out[..., :, :k]
        off = w * (1.0 - np.eye(k))
        w -= (off.sum(axis=-2, keepdims=True) / (k - 1))
    return out


def fit_newton(x: np.ndarray, y: np.ndarray, diagonal: bool, reg_lambda: float, reg_mu: float,
               theta0: np.ndarray, tolerance_grad: float, max_iter: int) -> tuple[np.ndarray, float]:
    """(gauge-fixed Θ minimising L from ``theta0``, L there); stops when every |∂L/∂Θ| < ``tolerance_grad``,
    when the line search can no longer lower L (the float64 floor) or after ``max_iter`` steps."""
    n, k = x.shape
    phi = _features(x, diagonal)
    m = phi.shape[2]
    d = k * m
    onehot = np.zeros((n, k))
    onehot[np.arange(n), y] = 1.0
    weights = np.zeros((k, m))
    weights[:, -1] = reg_mu / k
    if not diagonal:
        weights[:, :k] = reg_lambda / (k * (k - 1)) * (1.0 - np.eye(k))
    proj = _gauge(np.eye(d).reshape(d, k, m), diagonal).reshape(d, d).T  # column e = P e_e

    def value(theta: np.ndarray) -> tuple[float, np.ndarray]:
        logits = np.einsum("nia,ia->ni", phi, theta)
        logits -= logits.max(axis=1, keepdims=True)
        log_q = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        return float(-(log_q * onehot).sum() / n + (weights * theta * theta).sum()), log_q

    theta = _gauge(theta0, diagonal)
    current, log_q = value(theta)
    for _ in range(max_iter):
        q = np.exp(log_q)
        grad = proj.T @ (np.einsum("ni,nia->ia", (q - onehot) / n, phi) + 2.0 * weights * theta).reshape(-1)
        if np.abs(grad).max() < tolerance_grad:
            break
        scaled = q[:, :, None] * phi  # N×K×m
        flat = scaled.reshape(n, d)
        hess = -(flat.T @ flat) / n
        blocks = np.matmul(scaled.transpose(1, 2, 0), phi.transpose(1, 0, 2)) / n  # K×m×m, Σ_n q_ni φ_ni φ_niᵀ
        for i in range(k):
            hess[i * m:(i + 1) * m, i * m:(i + 1) * m] += blocks[i]
        hess = proj.T @ (hess + np.diag(2.0 * weights.reshape(-1))) @ proj
        step = -np.linalg.lstsq(hess, grad, rcond=None)[0].reshape(k, m)
        slope, t = float(grad @ step.reshape(-1)), 1.0
        while t > 1e-12:
            trial = _gauge(theta + t * step, diagonal)
            trial_value, trial_log_q = value(trial)
            if trial_value <= current + ARMIJO * t * slope:
                break
            t *= 0.5
        else:
            break  # no decrease along the Newton direction: L is at its float64 floor
        theta, current, log_q = trial, trial_value, trial_log_q
    return theta, current
