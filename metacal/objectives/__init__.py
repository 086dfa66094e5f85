"""Differentiable calibration objectives (meta-validation losses); see CONTRACTS.md."""

from .soft_accuracy import soft_rank_accuracy
from .sece import sece, sece_from_confidence

__all__ = ["soft_rank_accuracy", "sece", "sece_from_confidence"]
