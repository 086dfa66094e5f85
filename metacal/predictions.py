"""A classifier's per-sample predictions and their ``.npz`` file (``predictions/{val,test}.npz`` of a run).

The file holds ``labels`` (N integers in [0, K)) and either ``logits`` (N×K) or ``probs`` (N×K, entries in
[0, 1], rows summing to 1 within ``PROB_SUM_ATOL``); if both are present, ``logits`` are used. An optional
``gamma`` (N,) holds the per-sample focal-loss γ that a γ-Net predicted for each sample. :meth:`Predictions.save`
writes ``logits`` as float32 (or ``probs`` as float64), ``labels`` as int64 and ``gamma`` as float32 with
``np.savez`` (uncompressed), atomically.

Optional ``perturbed_logits`` (M×K) and ``perturbed_labels`` (M integers in [0, K)) hold the same split's
predictions under input perturbations (mixed severities), for calibrators fitted on both such as perturbation
temperature scaling; they are checked like the main arrays, must come together and are read into
``Predictions.perturbed``. Optional ``noisy_labels`` (N integers in [0, K)) hold the same samples' labels noised as
a run's training labels were (data.options.noise_rate: metacal/data/label_noise.py), and ``posteriors`` (N×K, rows
summing to 1) the true class posteriors where the data has them (gaussian_mixture). A probability-only companion is written as its log-probabilities. The trainer, ``python -m metacal.evaluate``, ``metacal.report`` and
the ablation studies (``experiments.ablations`` in the checkout) all read it with :func:`load_predictions`.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from metacal.atomic_io import write_with_atomic
from metacal.metrics.inputs import PROB_SUM_ATOL

LOG_EPS = 1e-12


@dataclass(frozen=True)
class Predictions:
    """``probs`` (N×K float64), ``labels`` (N int64), ``logits`` (N×K, None when only probabilities exist),
    ``gamma`` (N, None without a γ-Net), ``perturbed`` (the same split under input perturbations, None when
    absent), ``noisy_labels`` (N, the labels noised as the training labels were, None without label noise),
    ``posteriors`` (N×K float64, the true P(y | x), None where unknown). With logits, probs = softmax(logits) in
    float64."""

    probs: torch.Tensor
    labels: torch.Tensor
    logits: torch.Tensor | None = None
    gamma: torch.Tensor | None = None
    perturbed: Predictions | None = None
    noisy_labels: torch.Tensor | None = None
    posteriors: torch.Tensor | None = None

    @classmethod
    def from_logits(cls, logits: torch.Tensor, labels: torch.Tensor, gamma: torch.Tensor | None = None,
                    perturbed: Predictions | None = None) -> Predictions:
        """p_ik = exp(z_ik) / Σ_j exp(z_ij), computed in float64."""
        return cls(torch.softmax(logits.double(), dim=1), labels.long(), logits, gamma, perturbed)

    @property
    def num_classes(self) -> int:
        return self.probs.shape[1]

    def logits_for_scaling(self) -> torch.Tensor:
        """The logits, or log-probabilities (clamped at 1e-12) when only probs exist: softmax(log p / T) ∝ p^(1/T),
        so temperature scaling acts on them as on logits."""
        return self.logits if self.logits is not None else self.probs.clamp_min(LOG_EPS).log()

    def save(self, path: str | Path) -> None:
        """Write the ``.npz`` described in the module docstring (parent directories created, atomic replace)."""
        arrays: dict[str, np.ndarray] = {}
        if self.logits is not None:
            arrays["logits"] = self.logits.detach().cpu().numpy().astype(np.float32)
        else:
            arrays["probs"] = self.probs.detach().cpu().numpy().astype(np.float64)
        arrays["labels"] = self.labels.detach().cpu().numpy().astype(np.int64)
        if self.gamma is not None:
            arrays["gamma"] = self.gamma.detach().cpu().numpy().astype(np.float32)
        if self.perturbed is not None:
            arrays["perturbed_logits"] = self.perturbed.logits_for_scaling().detach().cpu().numpy().astype(np.float32)
            arrays["perturbed_labels"] = self.perturbed.labels.detach().cpu().numpy().astype(np.int64)
        if self.noisy_labels is not None:
            arrays["noisy_labels"] = self.noisy_labels.detach().cpu().numpy().astype(np.int64)
        if self.posteriors is not None:
            arrays["posteriors"] = self.posteriors.detach().cpu().numpy().astype(np.float64)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_with_atomic(path, lambda buffer: np.savez(buffer, **arrays))


def load_predictions(path: str | Path) -> Predictions:
    """Read and validate a predictions ``.npz``; FileNotFoundError / ValueError with a one-line message."""
    path = Path(path)
    arrays = _read_arrays(path)
    if "labels" not in arrays:
        raise ValueError(f"{path}: missing key 'labels' (found: {', '.join(sorted(arrays)) or 'none'})")
    key = "logits" if "logits" in arrays else "probs" if "probs" in arrays else None
    if key is None:
        raise ValueError(f"{path}: missing key 'logits' or 'probs' (found: {', '.join(sorted(arrays))})")
    scores, labels = _checked(path, arrays[key], arrays["labels"], key, "labels", None)
    if key == "probs":
        _check_probs(path, scores)
    gamma = _gamma(path, arrays, scores.shape[0])
    perturbed = _perturbed(path, arrays, scores.shape[1])
    truth = _truth(path, arrays, scores)
    t_scores, t_labels = torch.from_numpy(scores), torch.from_numpy(labels)
    if key == "logits":
        return replace(Predictions.from_logits(t_scores, t_labels, gamma, perturbed), **truth)
    return Predictions(t_scores, t_labels, None, gamma, perturbed, **truth)


def _truth(path: Path, arrays: dict[str, np.ndarray], scores: np.ndarray) -> dict[str, torch.Tensor]:
    """The optional ``noisy_labels`` and ``posteriors``, checked like the main labels and probabilities."""
    out: dict[str, torch.Tensor] = {}
    if "noisy_labels" in arrays:
        _, noisy = _checked(path, scores, arrays["noisy_labels"], "logits", "noisy_labels", None)
        out["noisy_labels"] = torch.from_numpy(noisy)
    if "posteriors" in arrays:
        post = arrays["posteriors"]
        if post.shape != scores.shape or not _numeric(post):
            raise ValueError(f"{path}: 'posteriors' must be {scores.shape[0]}×{scores.shape[1]} numbers like the "
                             f"predictions, got shape {post.shape} dtype {post.dtype}")
        post = post.astype(np.float64)
        if not np.all(np.isfinite(post)):
            raise ValueError(f"{path}: 'posteriors' contains NaN or inf")
        _check_probs(path, post, "posteriors")
        out["posteriors"] = torch.from_numpy(post)
    return out


def _checked(path: Path, scores: np.ndarray, labels: np.ndarray, key: str, label_key: str,
             k: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(scores as float64, labels as int64) after the checks of the module docstring: N×K numeric and finite
    (K = ``k`` when given), N integer labels in [0, K); one-line ValueErrors naming ``path`` and the keys."""
    if scores.ndim != 2 or scores.shape[0] == 0 or scores.shape[1] < 2:
        raise ValueError(f"{path}: '{key}' must be N×K with N ≥ 1 and K ≥ 2, got shape {scores.shape}")
    if k is not None and scores.shape[1] != k:
        raise ValueError(f"{path}: '{key}' must have K = {k} columns like the main predictions, got {scores.shape}")
    if not _numeric(scores):
        raise ValueError(f"{path}: '{key}' must be numeric, got dtype {scores.dtype}")
    if labels.ndim != 1 or labels.shape[0] != scores.shape[0]:
        raise ValueError(f"{path}: '{label_key}' must have shape ({scores.shape[0]},) to match '{key}' "
                         f"{scores.shape}, got {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer):
        if not np.issubdtype(labels.dtype, np.floating) or not np.all(np.isfinite(labels)) or np.any(labels % 1):
            raise ValueError(f"{path}: '{label_key}' must be integers, got dtype {labels.dtype}")
    scores = scores.astype(np.float64)
    if not np.all(np.isfinite(scores)):
        bad = int((~np.isfinite(scores)).any(axis=1).sum())
        raise ValueError(f"{path}: '{key}' contains NaN or inf in {bad} row(s)")
    k = scores.shape[1]
    if labels.min() < 0 or labels.max() >= k:
        raise ValueError(f"{path}: '{label_key}' must lie in [0, {k - 1}] for K = {k}, got [{labels.min()}, "
                         f"{labels.max()}]")
    return scores, labels.astype(np.int64)


def _perturbed(path: Path, arrays: dict[str, np.ndarray], k: int) -> Predictions | None:
    """The optional ``perturbed_logits`` / ``perturbed_labels`` pair as a Predictions (both or neither)."""
    have = [key for key in ("perturbed_logits", "perturbed_labels") if key in arrays]
    if not have:
        return None
    if len(have) == 1:
        missing = "perturbed_labels" if have == ["perturbed_logits"] else "perturbed_logits"
        raise ValueError(f"{path}: '{have[0]}' without '{missing}'; store both or neither")
    scores, labels = _checked(path, arrays["perturbed_logits"], arrays["perturbed_labels"], "perturbed_logits",
                              "perturbed_labels", k)
    return Predictions.from_logits(torch.from_numpy(scores), torch.from_numpy(labels))


def _read_arrays(path: Path) -> dict[str, np.ndarray]:
    """Every array of the archive, without pickle (object arrays are refused)."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file; pass a .npz with 'labels' and 'logits' or 'probs'")
    try:
        data = np.load(path, allow_pickle=False)
        if isinstance(data, np.lib.npyio.NpzFile):
            with data:
                return {key: np.asarray(data[key]) for key in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path}: cannot read as .npz ({type(exc).__name__}: {exc})".replace("\n", " ")) from None
    raise ValueError(f"{path}: expected an .npz archive (np.savez), got a single .npy array")


def _numeric(array: np.ndarray) -> bool:
    return np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)


def _check_probs(path: Path, probs: np.ndarray, key: str = "probs") -> None:
    """Entries in [0, 1] and rows summing to 1, both within ``PROB_SUM_ATOL``."""
    if probs.min() < -PROB_SUM_ATOL or probs.max() > 1 + PROB_SUM_ATOL:
        raise ValueError(f"{path}: '{key}' must lie in [0, 1], got [{probs.min():.4g}, {probs.max():.4g}]")
    dev = float(np.abs(probs.sum(axis=1) - 1).max())
    if dev > PROB_SUM_ATOL:
        raise ValueError(f"{path}: '{key}' rows must sum to 1 (tolerance {PROB_SUM_ATOL:g}); max deviation {dev:.3g}")


def _gamma(path: Path, arrays: dict[str, np.ndarray], n: int) -> torch.Tensor | None:
    """The optional ``gamma`` array as float64: N finite numbers."""
    if "gamma" not in arrays:
        return None
    gamma = arrays["gamma"]
    if gamma.shape != (n,) or not _numeric(gamma):
        raise ValueError(f"{path}: 'gamma' must be {n} numbers (one per sample), got shape {gamma.shape} "
                         f"dtype {gamma.dtype}")
    gamma = gamma.astype(np.float64)
    if not np.all(np.isfinite(gamma)):
        raise ValueError(f"{path}: 'gamma' contains NaN or inf in {int((~np.isfinite(gamma)).sum())} sample(s)")
    return torch.from_numpy(gamma)
