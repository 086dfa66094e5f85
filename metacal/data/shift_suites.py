"""Shift suites and OOD sets: named, seeded, deterministic transforms of a bundle's splits, returned model-ready
(exactly what the run's evaluation loader yields). docs/conventions.md#shift lists every ladder.

Suites (:data:`SHIFT_SUITES`): ``corruptions`` (datasets whose splits are in-memory images (C, H, W): Fashion-MNIST,
CIFAR, SVHN; :mod:`metacal.data.corruptions`) and ``mnist1d_natural`` (MNIST-1D regenerated with moved nuisance
parameters, :mod:`metacal.data.mnist1d_shift`). Each has families × severities 1..5 (0 = the clean split); the
*fit* families (at most half) are those a shift-aware calibrator or a training-time controller may see
(perturbed validation sets, Tomani et al., CVPR 2021); the others are held out for judging.
OOD sets (:data:`OOD_SETS`): ``digits`` (far-OOD, :mod:`metacal.data.ood_digits`) and ``held_out_classes``
(``bundle.ood`` of a bundle built with ``in_classes``, :mod:`metacal.data.class_split`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from metacal.registry import Registry, unknown_name

from . import mnist1d_shift
from .bundle import DataBundle, DataSubset
from .class_split import RelabeledSubset
from .corruptions import CORRUPTIONS, corrupt
from .image_datasets import ImageArrayDataset, VectorDataset
from .model_inputs import model_inputs, normalise, to_unit
from .ood_digits import digits_as_images, digits_as_vectors
from .seeding import derive_seed, generator

SPLITS = ("train", "val", "meta_val", "test")


@dataclass(frozen=True)
class Suite:
    """A suite's families in their fixed order, the fit ones, and which bundles it applies to. ``combined``: families
    that move a fit family's parameters together with others (MNIST-1D's ``all``), so neither fit nor held out."""

    families: tuple[str, ...]
    fit: tuple[str, ...]
    applies: Callable[[DataBundle], bool]
    needs: str  # what the bundle must be, for the error message
    combined: tuple[str, ...] = ()


SHIFT_SUITES: Registry[Suite] = Registry("shift suite")
OOD_SETS: Registry[Callable[[DataBundle, int], torch.Tensor]] = Registry("OOD set")


def _base(data: Any) -> Any:
    return data.dataset if isinstance(data, DataSubset) else data


def _is_image_bundle(bundle: DataBundle) -> bool:
    return len(bundle.input_shape) == 3 and bundle.test is not None and isinstance(_base(bundle.test), ImageArrayDataset)


def _is_mnist1d(bundle: DataBundle) -> bool:
    return "generator" in bundle.info and bundle.test is not None and isinstance(_base(bundle.test), VectorDataset)


@SHIFT_SUITES.register("corruptions")
def _corruptions() -> Suite:
    # one fit family per group (noise, blur, photometric, geometric); each held-out family shares a group with one
    return Suite(tuple(CORRUPTIONS), ("gaussian_noise", "gaussian_blur", "contrast", "rotate"), _is_image_bundle,
                 "an image dataset held in memory (fashion_mnist, cifar10, cifar100, svhn)")


@SHIFT_SUITES.register("mnist1d_natural")
def _mnist1d_natural() -> Suite:
    return Suite(mnist1d_shift.FAMILIES, ("noise", "shear"), _is_mnist1d, "mnist1d", combined=("all",))


def check_suite(bundle: DataBundle, suite: str) -> None:
    """One-line ValueError for an unknown suite (did-you-mean) or one that does not apply to ``bundle``."""
    names = SHIFT_SUITES.available()
    fitting = [n for n in names if SHIFT_SUITES.get(n)().applies(bundle)]
    if suite not in SHIFT_SUITES:
        raise ValueError(unknown_name("shift suite", suite, names) + f" (for {bundle.name}: {', '.join(fitting) or 'none'})")
    entry = SHIFT_SUITES.get(suite)()
    if not entry.applies(bundle):
        raise ValueError(f"shift suite {suite!r} needs {entry.needs}, not {bundle.name!r}; suites for {bundle.name}: "
                         f"{', '.join(fitting) or 'none (not supported for this dataset)'}")


def suite_families(bundle: DataBundle, suite: str) -> list[str]:
    """Every family of ``suite``, in its fixed order."""
    check_suite(bundle, suite)
    return list(SHIFT_SUITES.get(suite)().families)


def fit_families(bundle: DataBundle, suite: str) -> list[str]:
    """The families a shift-aware calibrator or training-time controller may see (at most half); the rest are held out."""
    check_suite(bundle, suite)
    return list(SHIFT_SUITES.get(suite)().fit)


def held_out_families(bundle: DataBundle, suite: str) -> list[str]:
    """The families no shift-aware calibrator or controller sees, in any part: neither fit nor combined (a family
    that moves a fit family's parameters along with others is not held out)."""
    check_suite(bundle, suite)
    entry = SHIFT_SUITES.get(suite)()
    return [f for f in entry.families if f not in entry.fit and f not in entry.combined]


def prepare(bundle: DataBundle, suite: str, families: list[str] | None = None, progress: bool | None = None) -> None:
    """Make what ``suite`` reads ready before it is used: MNIST-1D's shifted sets of ``families`` (default all)
    are generated and cached once, with a progress bar on a terminal (:func:`mnist1d_shift.build_cache`); the
    corruptions need nothing."""
    if suite == "mnist1d_natural":
        mnist1d_shift.build_cache(bundle.info["generator"], families or suite_families(bundle, suite),
                                  progress=progress)


def _split(bundle: DataBundle, split: str) -> Any:
    if split not in SPLITS:
        raise ValueError(unknown_name("split", split, SPLITS))
    data = getattr(bundle, split)
    if data is None:
        raise ValueError(f"{bundle.name} has no {split} split")
    return data


def _positions(data: Any) -> torch.Tensor:
    return data.index if isinstance(data, DataSubset) else torch.arange(len(data))


def _image_split(bundle: DataBundle, data: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Unit-range float images (N, C, H, W) and labels of an in-memory image split."""
    base = _base(data)
    if not isinstance(base, ImageArrayDataset):
        raise ValueError(f"{bundle.name}: shift suites are not supported for this dataset (images not in memory)")
    return to_unit(base.images[_positions(data)]), torch.as_tensor(data.targets, dtype=torch.int64)


def _mnist1d_split(bundle: DataBundle, data: Any, family: str, severity: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and labels at the split's positions of the regenerated set, filtered/relabelled like the split."""
    pos, base = _positions(data), _base(data)
    if severity == 0:
        return base.inputs[pos], torch.as_tensor(data.targets, dtype=torch.int64)
    arrays = mnist1d_shift.shifted_arrays(bundle.info["generator"], family, severity)
    key = "_test" if base is _base(bundle.test) else ""
    x, y = arrays[f"x{key}"][pos], arrays[f"y{key}"][pos]
    if isinstance(data, RelabeledSubset):  # translation reorders labels: keep the split's classes only
        y = data.label_map[y]
        x, y = x[y >= 0], y[y >= 0]
    return x, y


def _check_family(bundle: DataBundle, suite: str, family: str, severity: int) -> None:
    families = suite_families(bundle, suite)
    if family not in families:
        raise ValueError(unknown_name(f"{suite} family", family, families))
    if isinstance(severity, bool) or not isinstance(severity, (int, np.integer)) or not 0 <= severity <= 5:
        raise ValueError(f"severity must be an integer 0..5, got {severity!r}")


def shifted_split(bundle: DataBundle, suite: str, family: str, severity: int, split: str = "test",
                  seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Model-ready inputs and int64 labels of ``split`` under ``family`` at ``severity`` (0: the clean split, bit for
    bit what its evaluation loader yields); random families draw from a CPU generator seeded by ``seed``."""
    _check_family(bundle, suite, family, severity)
    data = _split(bundle, split)
    if suite == "mnist1d_natural":
        return _mnist1d_split(bundle, data, family, int(severity))
    images, labels = _image_split(bundle, data)
    return normalise(bundle, corrupt(images, family, int(severity), seed)), labels


def perturbed_split(bundle: DataBundle, suite: str, split: str = "val", seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Every sample of ``split`` once, each under a (fit family, severity 1..5) drawn uniformly per sample from a
    generator seeded by ``seed`` (Tomani et al., CVPR 2021: calibrate on a validation set perturbed at mixed levels)."""
    fit = fit_families(bundle, suite)
    data = _split(bundle, split)
    prepare(bundle, suite, fit)
    n = len(data)
    draw = generator(seed, 0)
    which = torch.randint(len(fit), (n,), generator=draw)
    level = torch.randint(1, 6, (n,), generator=draw)
    noise_seed = derive_seed(seed, 1)
    if suite == "mnist1d_natural":
        x, y = _mnist1d_split(bundle, data, fit[0], 0)
        x = x.clone()
        for f, family in enumerate(fit):  # the fit families keep every sample's label and position
            for s in range(1, 6):
                rows = (which == f) & (level == s)
                if bool(rows.any()):
                    x[rows] = _mnist1d_split(bundle, data, family, s)[0][rows]
        return x, y
    images, labels = _image_split(bundle, data)
    out = images.clone()
    for f, family in enumerate(fit):
        for s in range(1, 6):
            rows = (which == f) & (level == s)
            if bool(rows.any()):
                out[rows] = corrupt(images[rows], family, s, noise_seed)
    return normalise(bundle, out), labels


def default_suite(bundle: DataBundle) -> str:
    """The one shift suite that applies to ``bundle`` (corruptions for in-memory images, mnist1d_natural for
    MNIST-1D); a one-line ValueError for a dataset that has none."""
    fitting = [n for n in SHIFT_SUITES.available() if SHIFT_SUITES.get(n)().applies(bundle)]
    if not fitting:
        raise ValueError(f"dataset {bundle.name!r} has no shift suite (suites: {', '.join(SHIFT_SUITES.available())})")
    return fitting[0]


def shifted_held_out(bundle: DataBundle, split: str, seed: int) -> torch.utils.data.TensorDataset:
    """``split`` (meta_val or val) perturbed at mixed severities of its dataset's suite's fit families
    (:func:`perturbed_split`), as a dataset: what ``auto.measure_on: [meta_val_shifted]`` measures, the
    training-time analogue of perturbation temperature scaling. The held-out families stay unseen."""
    return torch.utils.data.TensorDataset(*perturbed_split(bundle, default_suite(bundle), split, seed))


@OOD_SETS.register("digits")
def _digits(bundle: DataBundle, seed: int = 0) -> torch.Tensor:
    if _is_image_bundle(bundle):
        c, h, w = bundle.input_shape
        return normalise(bundle, digits_as_images(c, h, w))
    return digits_as_vectors(bundle.input_shape)


@OOD_SETS.register("held_out_classes")
def _held_out(bundle: DataBundle, seed: int = 0) -> torch.Tensor:
    if bundle.ood is None:
        raise ValueError(f"{bundle.name} has no held-out classes; build it with in_classes=[...] "
                         "(data.options.in_classes)")
    base = _base(bundle.ood)
    if isinstance(base, ImageArrayDataset):
        return normalise(bundle, to_unit(base.images[_positions(bundle.ood)]))
    if isinstance(base, VectorDataset):
        return base.inputs[_positions(bundle.ood)]
    return torch.stack([bundle.ood[i][0] for i in range(len(bundle.ood))])


def ood_inputs(bundle: DataBundle, name: str, seed: int = 0) -> torch.Tensor:
    """Model-ready inputs of OOD set ``name`` for ``bundle``'s model."""
    if name not in OOD_SETS:
        raise ValueError(unknown_name("OOD set", name, OOD_SETS.available()))
    return OOD_SETS.get(name)(bundle, seed)

__all__ = ["OOD_SETS", "SHIFT_SUITES", "check_suite", "default_suite", "fit_families", "held_out_families",
           "model_inputs", "ood_inputs", "perturbed_split", "prepare", "shifted_held_out", "shifted_split",
           "suite_families"]
