"""Synthetic K-class data with known Bayes posteriors: x | y=k ~ N(μ_k, σ² I_d), y ~ Categorical(π).

True posterior (Bayes' rule): P(y=k | x) = softmax_k( −‖x − μ_k‖² / (2σ²) + log π_k ), the shared
Gaussian normaliser cancelling. Exposed per sample as ``dataset.posteriors`` (N×K, float32, computed in
float64 from the stored float32 inputs), so the Bayes classifier is perfectly calibrated on every split.

Means ("separation" s = distance between class means):
- d ≥ K: centred simplex corners μ_k = (s/√2)(e_k − 1/K), every pair at distance s;
- 2 ≤ d < K: a regular K-gon in the first two coordinates, neighbours at distance s;
- d = 1: points on a line at spacing s.
Defaults K = 10, d = 10, s = 3, σ = 1 give a Bayes error near 0.30 — hard enough for calibration to matter.
Inputs have shape (1, d) like other sequence data (C, L).
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

from .bundle import DataBundle, DataSubset
from .image_datasets import VectorDataset
from .registry import DATASETS
from .seeding import generator
from .splits import DEFAULT_SPLIT, split_indices


def class_means(num_classes: int, dim: int, separation: float) -> torch.Tensor:
    """(K, d) float64 means laid out as in the module docstring."""
    k, d, s = num_classes, dim, float(separation)
    means = torch.zeros(k, d, dtype=torch.float64)
    if d >= k:
        means[:, :k] = (s / math.sqrt(2.0)) * (torch.eye(k, dtype=torch.float64) - 1.0 / k)
    elif d >= 2:
        angle = 2 * math.pi * torch.arange(k, dtype=torch.float64) / k
        radius = s / (2 * math.sin(math.pi / k))
        means[:, 0], means[:, 1] = radius * torch.cos(angle), radius * torch.sin(angle)
    else:
        means[:, 0] = s * (torch.arange(k, dtype=torch.float64) - (k - 1) / 2)
    return means


def bayes_log_posteriors(x: torch.Tensor, means: torch.Tensor, sigma: float, priors: torch.Tensor) -> torch.Tensor:
    """log P(y | x) for x of shape (N, d) (or (N, 1, d)), computed in float64."""
    x = x.reshape(len(x), -1).to(torch.float64)
    sq_dist = torch.cdist(x, means.to(torch.float64)).square()
    return torch.log_softmax(-sq_dist / (2 * sigma**2) + priors.to(torch.float64).log(), dim=1)


def sample(n: int, means: torch.Tensor, sigma: float, priors: torch.Tensor, gen: torch.Generator) -> VectorDataset:
    labels = torch.multinomial(priors.to(torch.float64), n, replacement=True, generator=gen)
    noise = torch.randn(n, means.shape[1], generator=gen, dtype=torch.float64)
    x = (means[labels] + sigma * noise).to(torch.float32)
    post = bayes_log_posteriors(x, means, sigma, priors).exp().to(torch.float32)
    return VectorDataset(x.unsqueeze(1), labels, post)


def _check(num_classes, dim, separation, sigma, n_train, n_test, priors) -> torch.Tensor:
    if num_classes < 2 or dim < 1:
        raise ValueError(f"need num_classes >= 2 and dim >= 1, got {num_classes} and {dim}")
    if not (separation >= 0 and sigma > 0):
        raise ValueError(f"need separation >= 0 and sigma > 0, got {separation} and {sigma}")
    if n_train < 1 or n_test < 1:
        raise ValueError(f"need n_train, n_test >= 1, got {n_train} and {n_test}")
    if priors is None:
        return torch.full((num_classes,), 1.0 / num_classes, dtype=torch.float64)
    p = torch.as_tensor(priors, dtype=torch.float64)
    if p.shape != (num_classes,) or (p <= 0).any() or abs(float(p.sum()) - 1) > 1e-6:
        raise ValueError(f"priors must be {num_classes} positive numbers summing to 1, got {priors!r}")
    return p


@DATASETS.register("gaussian_mixture")
def build_gaussian_mixture(root=None, seed: int = 0, split: Sequence[float] = DEFAULT_SPLIT,
                           fold_meta_val: bool = False, split_seed: int | None = None, num_classes: int = 10,
                           dim: int = 10, separation: float = 3.0, sigma: float = 1.0, n_train: int = 20_000,
                           n_test: int = 10_000, priors: Sequence[float] | None = None) -> DataBundle:
    """Gaussian mixture with true posteriors; ``root`` is unused (nothing is read or written)."""
    p = _check(num_classes, dim, separation, sigma, n_train, n_test, priors)
    means = class_means(num_classes, dim, separation)
    train = sample(n_train, means, sigma, p, generator(seed, 0))
    test = sample(n_test, means, sigma, p, generator(seed, 1))
    s = seed if split_seed is None else split_seed
    idx = split_indices(n_train, split, s, fold_meta_val)
    return DataBundle("gaussian_mixture", DataSubset(train, idx.train), DataSubset(train, idx.val),
                      DataSubset(train, idx.meta_val), DataSubset(test, range(n_test)), num_classes, (1, dim),
                      (0.0,), (1.0,), [str(k) for k in range(num_classes)],
                      {"split": tuple(split), "split_seed": s, "fold_meta_val": fold_meta_val,
                       "means": means, "sigma": sigma, "priors": p})
