"""Raw inputs → model-ready tensors, with the arithmetic of a bundle's evaluation transform.

Images (bundles with input_shape (C, H, W)): uint8 0..255 (scaled by 1/255 as torchvision's
``ToDtype(float32, scale=True)``) or float in [0, 1], shaped (N, H, W) when C = 1, (N, C, H, W) or (N, H, W, C);
then (x − mean) / std per channel (``Normalize``). Other bundles (sequences, feature vectors): (N, *input_shape)
numbers, returned as float32 unchanged (their loaders yield the stored inputs as they are); NaN or infinite
values are refused.

What the rules need of a bundle is its :class:`InputSpec` (kind, input shape, mean, std): :func:`input_spec`
reads it from a bundle, and a finished run stores it in its ``predictor.json`` (:mod:`metacal.run.predictor_info`),
so :func:`model_inputs` takes either, and a run's network can be fed without its dataset on the machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

import numpy as np
import torch

from .bundle import DataBundle, DataSubset
from .image_datasets import VectorDataset


KINDS = ("image", "vector")


@dataclass(frozen=True)
class InputSpec:
    """How raw inputs become model inputs: ``kind`` "image" ((C, H, W), uint8 or [0, 1], then normalised by
    ``mean``/``std`` per channel) or "vector" ((N, *input_shape) numbers as given)."""

    kind: str
    input_shape: tuple[int, ...]
    mean: tuple[float, ...]
    std: tuple[float, ...]

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"input kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.kind == "image" and len(self.input_shape) != 3:
            raise ValueError(f"image inputs need input_shape (C, H, W), got {tuple(self.input_shape)}")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "input_shape": list(self.input_shape), "mean": list(self.mean),
                "std": list(self.std)}

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> "InputSpec":
        """The spec of :meth:`to_dict`'s record; a missing key is a one-line ValueError."""
        missing = [k for k in ("kind", "input_shape", "mean", "std") if k not in record]
        if missing:
            raise ValueError(f"input spec lacks {', '.join(missing)}")
        return cls(str(record["kind"]), tuple(int(v) for v in record["input_shape"]),
                   tuple(float(v) for v in record["mean"]), tuple(float(v) for v in record["std"]))


def input_spec(bundle: DataBundle) -> InputSpec:
    """The bundle's :class:`InputSpec`: images when input_shape is (C, H, W) and the splits are not vectors."""
    shape = tuple(int(v) for v in bundle.input_shape)
    stored = bundle.val.dataset if isinstance(bundle.val, DataSubset) else bundle.val
    kind = "vector" if len(shape) != 3 or isinstance(stored, VectorDataset) else "image"
    return InputSpec(kind, shape, tuple(float(v) for v in bundle.mean), tuple(float(v) for v in bundle.std))


Source = Union[DataBundle, InputSpec]


def to_unit(images: torch.Tensor) -> torch.Tensor:
    """uint8 → float32 in [0, 1] with torchvision's arithmetic (``ToDtype(float32, scale=True)``: x · (1/255))."""
    return images.to(torch.float32).mul_(1.0 / 255)


def normalise(source: Source, images: torch.Tensor) -> torch.Tensor:
    """(x − mean) / std per channel (``source``: a bundle or an InputSpec), torchvision ``Normalize``'s
    arithmetic in the images' dtype."""
    mean = torch.as_tensor(source.mean, dtype=images.dtype).view(-1, 1, 1)
    std = torch.as_tensor(source.std, dtype=images.dtype).view(-1, 1, 1)
    return images.sub(mean).div_(std)


def _as_tensor(raw: Any) -> torch.Tensor:
    if isinstance(raw, torch.Tensor):
        return raw.detach().cpu()
    array = np.asarray(raw)
    if array.dtype.kind not in "biuf":
        raise ValueError(f"inputs must be numbers, got dtype {array.dtype}")
    return torch.from_numpy(np.ascontiguousarray(array))


def _channels_first(x: torch.Tensor, shape: tuple[int, int, int]) -> torch.Tensor:
    c, h, w = shape
    want = f"(N, {h}, {w}), (N, 1, {h}, {w}) or (N, {h}, {w}, 1)" if c == 1 else f"(N, {c}, {h}, {w}) or (N, {h}, {w}, {c})"
    if x.dim() == 3 and c == 1 and tuple(x.shape[1:]) == (h, w):
        return x.unsqueeze(1)
    if x.dim() == 4 and tuple(x.shape[1:]) == (c, h, w):
        return x
    if x.dim() == 4 and tuple(x.shape[1:]) == (h, w, c):
        return x.permute(0, 3, 1, 2)
    raise ValueError(f"images must have shape {want} for this model; got {tuple(x.shape)}")


def model_inputs(source: Source, raw: Any) -> torch.Tensor:
    """``raw`` (numpy array or tensor) as the model's inputs for ``source``, a bundle or its
    :class:`InputSpec` (rules in the module docstring)."""
    x = _as_tensor(raw)
    spec = source if isinstance(source, InputSpec) else input_spec(source)
    shape = spec.input_shape
    if spec.kind == "vector":
        if tuple(x.shape[1:]) != shape or x.dim() != len(shape) + 1:
            raise ValueError(f"inputs must have shape (N, {', '.join(map(str, shape))}); got {tuple(x.shape)}")
        x = x.to(torch.float32)
        finite = torch.isfinite(x).flatten(1).all(1)
        if not bool(finite.all()):  # the network would turn them into NaN probabilities and an arbitrary label
            first = int((~finite).nonzero()[0])
            raise ValueError(f"inputs must be finite; sample {first} has NaN or infinite values")
        return x
    x = _channels_first(x, shape)  # type: ignore[arg-type]
    if x.dtype == torch.uint8:
        unit = to_unit(x)
    elif x.is_floating_point():
        unit = x.to(torch.float32)
        if unit.numel() and not (float(unit.min()) >= 0.0 and float(unit.max()) <= 1.0):
            raise ValueError(f"float images must be in [0, 1] (got {float(unit.min()):g}..{float(unit.max()):g}); "
                             "pass uint8 0..255 or divide by 255")
    else:
        raise ValueError(f"images must be uint8 0..255 or float in [0, 1], got {x.dtype}")
    return normalise(spec, unit.contiguous())
