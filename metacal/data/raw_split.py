"""A split's inputs in the raw format a finished run's ``predict_proba`` takes, with their labels.

    import metacal.data
    x, y = metacal.data.raw_inputs("fashion_mnist")          # the test split: uint8 (10000, 1, 28, 28), int64
    probs = metacal.load("runs/<name>").predict_proba(x)     # numpy in, numpy out

The loaders yield model-ready inputs (images scaled and normalised); ``predict_proba`` takes the raw ones and
normalises them itself (:mod:`metacal.data.model_inputs`), so feeding it a loader's tensors would normalise twice.
Raw here means: images held in memory (CIFAR, SVHN, Fashion-MNIST) as their stored uint8 (N, C, H, W); images read
from files (Tiny-ImageNet, ``image_folder``) decoded to uint8 and put through the evaluation transform's geometric
steps (resize, centre crop) but not its scaling and normalisation; vectors (MNIST-1D, ``arrays``, the Gaussian
mixture) as stored, float32. Any other dataset gives its items as they come.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from metacal.registry import unknown_name

from .bundle import DataBundle, DataSubset
from .image_datasets import ImageArrayDataset, ImageFileDataset, VectorDataset, load_image

SPLITS = ("train", "val", "meta_val", "test")


def _geometric_steps(transform: Any) -> Any:
    """The steps of an evaluation transform before its scaling to float (torchvision v2 ``Compose``): the
    resize and crop that give the model's input size, on uint8. None when there are none."""
    steps = list(getattr(transform, "transforms", []))
    names = [type(step).__name__ for step in steps]
    cut = names.index("ToDtype") if "ToDtype" in names else len(steps)
    if not steps[:cut]:
        return None
    from torchvision.transforms import v2

    return v2.Compose(steps[:cut])


def _file_images(base: ImageFileDataset, positions: torch.Tensor) -> torch.Tensor:
    """uint8 images of ``base`` at ``positions``, decoded and resized / cropped as its evaluation view does."""
    geometric = _geometric_steps(base.transform)
    images = []
    for i in positions.tolist():
        image = load_image(base.paths[i], base.mode)
        images.append(image if geometric is None else geometric(image))
    return torch.stack(images) if images else torch.empty(0, dtype=torch.uint8)


def split_raw_inputs(bundle: DataBundle, split: str = "test") -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` of ``bundle``'s ``split`` (module docstring): raw inputs as numpy, int64 labels."""
    if split not in SPLITS:
        raise ValueError(unknown_name("split", split, SPLITS))
    data = getattr(bundle, split)
    if data is None:
        raise ValueError(f"{bundle.name} has no {split} split")
    base = data.dataset if isinstance(data, DataSubset) else data
    positions = data.index if isinstance(data, DataSubset) else torch.arange(len(data))
    if isinstance(base, (ImageArrayDataset, VectorDataset, ImageFileDataset)):  # each has targets, so the split has
        labels = torch.as_tensor(data.targets, dtype=torch.int64)
        if isinstance(base, ImageArrayDataset):
            x = base.images[positions]
        elif isinstance(base, VectorDataset):
            x = base.inputs[positions]
        else:
            x = _file_images(base, positions)
    else:  # a dataset of one's own: its items as they come
        items = [data[i] for i in range(len(data))]
        x = torch.stack([torch.as_tensor(item[0]) for item in items])
        labels = torch.as_tensor([int(item[1]) for item in items], dtype=torch.int64)
    return x.numpy(), labels.numpy()


def raw_inputs(name: str | DataBundle, split: str = "test", root: Any = None,
               **options: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)``: the raw inputs of dataset ``name``'s ``split`` (default the test split) as numpy, for
    ``predict_proba``, and their int64 labels. ``name`` is a dataset name, built with ``root`` and ``options``
    as :func:`metacal.data.build` takes them (use a run's ``data.options``, e.g. ``in_classes``, to get its
    classes), or a bundle already built. A split the dataset lacks is a one-line ValueError."""
    from .registry import build

    bundle = name if isinstance(name, DataBundle) else build(name, root=root, **options)
    return split_raw_inputs(bundle, split)
