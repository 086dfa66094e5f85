"""The ``corruptions`` shift suite: every registered corruption family (:mod:`metacal.data.corruptions`, its geometric
ones from :mod:`metacal.data.corruptions_geometric`) applied to an in-memory image split (Fashion-MNIST, CIFAR, SVHN)
in unit range, then normalised as the run's evaluation loader does. The fit families are those registered with
``fit=True``, one per group (noise, blur, photometric, geometric); each held-out family shares a group with one.
"""

from __future__ import annotations

from typing import Any

import torch

from . import corruptions_geometric  # noqa: F401  (registers rotate, translate, zoom after the others)
from .bundle import DataBundle
from .corruptions import CORRUPTIONS, corrupt, families
from .image_datasets import ImageArrayDataset
from .model_inputs import normalise, to_unit
from .shift_suites import ShiftSuite, base_of, is_image_bundle, positions, register_suite


class CorruptionSuite(ShiftSuite):
    """Image corruptions (module docstring); the working form is unit-range float images (N, C, H, W)."""

    name = "corruptions"
    needs = "an image dataset held in memory (fashion_mnist, cifar10, cifar100, svhn)"

    def families(self) -> tuple[str, ...]:
        return tuple(families())

    def fit(self) -> tuple[str, ...]:
        return tuple(name for name, family in CORRUPTIONS.entries() if family.fit)

    def applies(self, bundle: DataBundle) -> bool:
        return is_image_bundle(bundle)

    def clean(self, bundle: DataBundle, data: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Unit-range float images and labels of an in-memory image split."""
        base = base_of(data)
        if not isinstance(base, ImageArrayDataset):
            raise ValueError(f"{bundle.name}: shift suites are not supported for this dataset (images not in memory)")
        return to_unit(base.images[positions(data)]), torch.as_tensor(data.targets, dtype=torch.int64)

    def rows(self, bundle: DataBundle, data: Any, x: torch.Tensor, rows: torch.Tensor, family: str, severity: int,
             seed: int) -> torch.Tensor:
        return corrupt(x[rows], family, severity, seed)

    def ready(self, bundle: DataBundle, x: torch.Tensor) -> torch.Tensor:
        return normalise(bundle, x)


register_suite(CorruptionSuite())
