"""Calibration against the true class posterior p*(y | x), where the data has it (``gaussian_mixture``).

With p* known, a model's calibration can be measured per input instead of by binning labels (Chidambaram & Ge,
ICLR 2024, measure calibration this way on overlapping Gaussian classes):

- ``posterior_gap`` = E_x | p̂_ŷ(x) − p*_ŷ(x) |, ŷ = argmax_k p̂_k(x): how far the model's confidence is from the
  true probability that its prediction is correct. It bounds the true top-label calibration error from above
  (Jensen: |E[p* − p̂ | p̂]| ≤ E[|p* − p̂| | p̂]) and, unlike ECE, has no binning and no label noise in it.
- ``posterior_tv`` = E_x ½ Σ_k | p̂_k(x) − p*_k(x) |: the total-variation distance of the whole predicted
  distribution; ``posterior_gap`` ≤ ``posterior_tv`` per input (|P(A) − Q(A)| ≤ TV for any event A).
- ``bayes_error`` = E_x (1 − max_k p*_k(x)): the error of the Bayes classifier on these inputs.
"""

from __future__ import annotations

from typing import Any

import torch

from .inputs import as_tensor


def _pair(probs: Any, posteriors: Any) -> tuple[torch.Tensor, torch.Tensor]:
    p = as_tensor(probs, "probs").to(torch.float64)
    q = as_tensor(posteriors, "posteriors").to(torch.float64)
    if p.ndim != 2 or p.shape != q.shape:
        raise ValueError(f"probs and posteriors must both be N×K, got {tuple(p.shape)} and {tuple(q.shape)}")
    return p, q.to(p.device)


def posterior_gap(probs: Any, posteriors: Any) -> float:
    """E | p̂_ŷ − p*_ŷ | over the inputs, ŷ the model's top class (module docstring)."""
    p, q = _pair(probs, posteriors)
    conf, top = p.max(dim=1)
    return float((conf - q.gather(1, top.unsqueeze(1)).squeeze(1)).abs().mean())


def posterior_tv(probs: Any, posteriors: Any) -> float:
    """E ½ Σ_k | p̂_k − p*_k | over the inputs."""
    p, q = _pair(probs, posteriors)
    return float(0.5 * (p - q).abs().sum(dim=1).mean())


def bayes_error(posteriors: Any) -> float:
    """E (1 − max_k p*_k): the Bayes classifier's error on these inputs."""
    q = as_tensor(posteriors, "posteriors").to(torch.float64)
    return float(1.0 - q.max(dim=1).values.mean())


def true_posterior_summary(probs: Any, posteriors: Any) -> dict[str, float]:
    """``posterior_gap``, ``posterior_tv`` and ``bayes_error`` as one record."""
    return {"posterior_gap": posterior_gap(probs, posteriors), "posterior_tv": posterior_tv(probs, posteriors),
            "bayes_error": bayes_error(posteriors)}
