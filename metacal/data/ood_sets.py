"""OOD sets: inputs of no class the run knows, model-ready for its network (:data:`OOD_SETS`): ``digits`` (far-OOD,
:mod:`metacal.data.ood_digits`) and ``held_out_classes`` (``bundle.ood`` of a bundle built with ``in_classes``,
:mod:`metacal.data.class_split`). docs/conventions.md#shift."""

from __future__ import annotations

from typing import Callable

import torch

from metacal.registry import Registry, unknown_name

from .bundle import DataBundle
from .image_datasets import ImageArrayDataset, VectorDataset
from .model_inputs import normalise, to_unit
from .ood_digits import digits_as_images, digits_as_vectors
from .shift_suites import base_of, is_image_bundle, positions

OOD_SETS: Registry[Callable[[DataBundle, int], torch.Tensor]] = Registry("OOD set")


@OOD_SETS.register("digits")
def _digits(bundle: DataBundle, seed: int = 0) -> torch.Tensor:
    if is_image_bundle(bundle):
        c, h, w = bundle.input_shape
        return normalise(bundle, digits_as_images(c, h, w))
    return digits_as_vectors(bundle.input_shape)


@OOD_SETS.register("held_out_classes")
def _held_out(bundle: DataBundle, seed: int = 0) -> torch.Tensor:
    if bundle.ood is None:
        raise ValueError(f"{bundle.name} has no held-out classes; build it with in_classes=[...] "
                         "(data.options.in_classes)")
    base = base_of(bundle.ood)
    if isinstance(base, ImageArrayDataset):
        return normalise(bundle, to_unit(base.images[positions(bundle.ood)]))
    if isinstance(base, VectorDataset):
        return base.inputs[positions(bundle.ood)]
    return torch.stack([bundle.ood[i][0] for i in range(len(bundle.ood))])


def ood_inputs(bundle: DataBundle, name: str, seed: int = 0) -> torch.Tensor:
    """Model-ready inputs of OOD set ``name`` for ``bundle``'s model."""
    if name not in OOD_SETS:
        raise ValueError(unknown_name("OOD set", name, OOD_SETS.available()))
    return OOD_SETS.get(name)(bundle, seed)
