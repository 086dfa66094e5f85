"""KDE-ECE (Zhang, Kailkhura, Han 2020, "Mix-n-Match", Theorem/eq. for ECE^d with d = 1;
reference code Mix-n-Match-Calibration; docs/conventions.md#metrics).

Top-label confidences c_i with correctness a_i. Densities by a triweight kernel with reflection at 0 and 1::

    f_all(x) ∝ Σ_i [K_h(x − c_i) + K_h(x + c_i) + K_h(x − (2 − c_i))]          (all samples)
    f_cor(x) ∝ same sum over the correct samples
    acc(x)   = min(ā · f_cor(x) / f_all(x), 1)     (ā overall accuracy; both densities normalised)
    KDE-ECE  = ∫_0^1 |x − acc(x)| f_all(x) dx / ∫_0^1 f_all(x) dx    (trapezoid rule on a uniform grid)

Bandwidth (as the reference): h = std(c_i of correct samples; population std like np.std) · (2N)^(−1/5),
where, as in KDEpy, h is the kernel's standard deviation — the triweight K(u) = 35/32 (1 − u²)³ on |u| ≤ 1 has std 1/3, so its support
is ±3h. Fallbacks (the reference would divide by 0): fewer than two distinct correct confidences → std of
all confidences; still 0 → h = 1e-3.
Differences from the reference code, on purpose: grid points where f_all vanishes contribute 0 (the
reference carries the previous integrand forward), and the densities are evaluated exactly on the grid
instead of by FFT binning.
"""

from __future__ import annotations

import torch

from .inputs import array_inputs, check_conf_correct, check_probs_labels, top_label

TRIWEIGHT_STD = 1.0 / 3.0
MIN_BANDWIDTH = 1e-3


def triweight(u: torch.Tensor) -> torch.Tensor:
    """Triweight kernel 35/32 (1 − u²)³ on |u| ≤ 1 (0 outside)."""
    return (35.0 / 32.0) * (1.0 - u * u).clamp_min(0.0).pow(3)


def reflected_kde(points: torch.Tensor, grid: torch.Tensor, bandwidth: float, chunk: int = 4096) -> torch.Tensor:
    """Σ_i K_h over the points and their mirror images at 0 and 1, evaluated on ``grid`` (unnormalised)."""
    radius = bandwidth / TRIWEIGHT_STD  # support half-width 3h
    out = torch.zeros_like(grid)
    # mirror images only matter for points within the kernel's support of a boundary
    centres = torch.cat([points, -points[points < radius], 2.0 - points[points > 1.0 - radius]])
    for start in range(0, centres.shape[0], chunk):  # chunks bound memory at grid × chunk
        c = centres[start : start + chunk]
        out += triweight((grid.unsqueeze(1) - c.unsqueeze(0)) / radius).sum(dim=1)
    return out / radius


def kde_bandwidth(conf: torch.Tensor, correct: torch.Tensor) -> float:
    """h = std(conf of correct) · (2N)^(−1/5) with the fallbacks of the module docstring."""
    n = conf.shape[0]
    pos = conf[correct > 0.5]
    spread = float(pos.std(correction=0)) if pos.shape[0] >= 2 else 0.0
    if not spread > 0.0:
        spread = float(conf.std(correction=0)) if n >= 2 else 0.0
    h = spread * (2.0 * n) ** -0.2
    return h if h > 0.0 else MIN_BANDWIDTH


@array_inputs("conf", "correct")
def kde_ece_from_confidence(
    conf: torch.Tensor, correct: torch.Tensor, bandwidth: float | None = None, grid_size: int = 2049
) -> torch.Tensor:
    """KDE-ECE of 1-D confidences and 0/1 correctness (module docstring); a 0-dim tensor."""
    check_conf_correct(conf, correct)
    conf = conf.detach().double()
    correct = correct.detach().to(dtype=conf.dtype, device=conf.device)
    h = kde_bandwidth(conf, correct) if bandwidth is None else float(bandwidth)
    grid = torch.linspace(0.0, 1.0, grid_size, dtype=conf.dtype, device=conf.device)
    f_all = reflected_kde(conf, grid, h)
    f_cor = reflected_kde(conf[correct > 0.5], grid, h)
    # ā f_cor/n_cor ÷ f_all/N = f_cor/f_all for the unnormalised sums
    live = f_all > 1e-12 * f_all.max()
    acc = torch.where(live, f_cor / f_all.clamp_min(1e-300), torch.zeros_like(f_all)).clamp_max(1.0)
    integrand = torch.where(live, (grid - acc).abs() * f_all, torch.zeros_like(f_all))
    return torch.trapezoid(integrand, grid) / torch.trapezoid(f_all, grid)


@array_inputs("probs", "labels")
def kde_ece(probs: torch.Tensor, labels: torch.Tensor, bandwidth: float | None = None) -> torch.Tensor:
    """KDE-ECE of the top-label confidence of N×K probabilities (fraction, float64 0-dim tensor)."""
    check_probs_labels(probs, labels)
    conf, _, correct = top_label(probs, labels)
    return kde_ece_from_confidence(conf, correct, bandwidth)
