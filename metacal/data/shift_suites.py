"""Shift suites: named, seeded, deterministic transforms of a bundle's splits, returned model-ready (exactly what
the run's evaluation loader yields). docs/conventions.md#shift lists every ladder.

A suite is a :class:`ShiftSuite` registered in :data:`SHIFT_SUITES`: its families × severities 1..5 (0 = the clean
split), the *fit* families (at most half) that a shift-aware calibrator or a training-time controller may see
(perturbed validation sets, Tomani et al., CVPR 2021) — the others are held out for judging —, which bundles it
applies to, and how it builds a shifted split. Built in: ``corruptions`` (in-memory images: Fashion-MNIST, CIFAR,
SVHN; metacal/data/corruption_suite.py) and ``mnist1d_natural`` (MNIST-1D regenerated with moved nuisance
parameters, metacal/data/mnist1d_shift.py). This module only asks the suite; it names none.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from metacal.registry import Registry, unknown_name

from .bundle import DataBundle, DataSubset
from .image_datasets import ImageArrayDataset
from .model_inputs import model_inputs  # noqa: F401  (model-ready inputs of raw arrays, with the suites' API)
from .seeding import derive_seed, generator

SPLITS = ("train", "val", "meta_val", "test")
SEVERITY_LEVELS = range(1, 6)


def base_of(data: Any) -> Any:
    """The dataset under a split (a :class:`DataSubset` holds positions of it)."""
    return data.dataset if isinstance(data, DataSubset) else data


def positions(data: Any) -> torch.Tensor:
    """The split's positions in :func:`base_of`."""
    return data.index if isinstance(data, DataSubset) else torch.arange(len(data))


def is_image_bundle(bundle: DataBundle) -> bool:
    """Images (C, H, W) held in memory, with a test split: what the image suites and OOD sets work on."""
    return len(bundle.input_shape) == 3 and bundle.test is not None and isinstance(base_of(bundle.test),
                                                                                  ImageArrayDataset)


class ShiftSuite:
    """One suite (module docstring). ``families``: every family in its fixed order; ``fit``: those a shift-aware
    calibrator may see; ``combined``: families that move a fit family's parameters together with others (neither fit
    nor held out); ``needs``: what a bundle must be, for the error message. A suite works on a split in a form of its
    own: :meth:`clean` gives it, :meth:`rows` shifts some of its rows, :meth:`ready` makes it model-ready."""

    name: str = ""
    needs: str = ""

    def families(self) -> tuple[str, ...]:
        raise NotImplementedError

    def fit(self) -> tuple[str, ...]:
        raise NotImplementedError

    def combined(self) -> tuple[str, ...]:
        return ()

    def applies(self, bundle: DataBundle) -> bool:
        raise NotImplementedError

    def prepare(self, bundle: DataBundle, families: list[str] | None, progress: bool | None) -> None:
        """Make what ``families`` (None: all) read ready before they are used (nothing to do by default)."""

    def clean(self, bundle: DataBundle, data: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """The split's inputs, in the suite's working form, and its int64 labels."""
        raise NotImplementedError

    def rows(self, bundle: DataBundle, data: Any, x: torch.Tensor, rows: torch.Tensor, family: str, severity: int,
             seed: int) -> torch.Tensor:
        """``x[rows]`` (the clean split in working form) under ``family`` at ``severity`` 1..5."""
        raise NotImplementedError

    def ready(self, bundle: DataBundle, x: torch.Tensor) -> torch.Tensor:
        """Working form → model-ready inputs."""
        return x

    def shifted(self, bundle: DataBundle, data: Any, family: str, severity: int,
                seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Model-ready inputs and labels of the split under ``family`` at ``severity`` (0: the clean split)."""
        x, y = self.clean(bundle, data)
        if severity == 0:
            return self.ready(bundle, x), y
        return self.ready(bundle, self.rows(bundle, data, x, torch.ones(len(x), dtype=torch.bool), family,
                                            severity, seed)), y


#: the suites by name (:func:`register_suite`)
SHIFT_SUITES: Registry[ShiftSuite] = Registry("shift suite")


def register_suite(suite: ShiftSuite) -> ShiftSuite:
    """Add ``suite`` to :data:`SHIFT_SUITES` under its ``name``."""
    SHIFT_SUITES.register(suite.name)(suite)  # type: ignore[arg-type]
    return suite


def suite_of(suite: str) -> ShiftSuite:
    return SHIFT_SUITES.get(suite)  # type: ignore[return-value]


def check_suite(bundle: DataBundle, suite: str) -> None:
    """One-line ValueError for an unknown suite (did-you-mean) or one that does not apply to ``bundle``."""
    names = SHIFT_SUITES.available()
    fitting = [n for n in names if suite_of(n).applies(bundle)]
    if suite not in SHIFT_SUITES:
        raise ValueError(unknown_name("shift suite", suite, names) + f" (for {bundle.name}: {', '.join(fitting) or 'none'})")
    entry = suite_of(suite)
    if not entry.applies(bundle):
        raise ValueError(f"shift suite {suite!r} needs {entry.needs}, not {bundle.name!r}; suites for {bundle.name}: "
                         f"{', '.join(fitting) or 'none (not supported for this dataset)'}")


def suite_families(bundle: DataBundle, suite: str) -> list[str]:
    """Every family of ``suite``, in its fixed order."""
    check_suite(bundle, suite)
    return list(suite_of(suite).families())


def fit_families(bundle: DataBundle, suite: str) -> list[str]:
    """The families a shift-aware calibrator or training-time controller may see (at most half); the rest are held out."""
    check_suite(bundle, suite)
    return list(suite_of(suite).fit())


def held_out_families(bundle: DataBundle, suite: str) -> list[str]:
    """The families no shift-aware calibrator or controller sees, in any part: neither fit nor combined (a family
    that moves a fit family's parameters along with others is not held out)."""
    check_suite(bundle, suite)
    entry = suite_of(suite)
    return [f for f in entry.families() if f not in entry.fit() and f not in entry.combined()]


def prepare(bundle: DataBundle, suite: str, families: list[str] | None = None, progress: bool | None = None) -> None:
    """Make what ``suite`` reads for ``families`` (default all) ready before it is used: MNIST-1D's shifted sets
    are generated and cached once, with a progress bar on a terminal; the corruptions need nothing."""
    suite_of(suite).prepare(bundle, families, progress)


def _split(bundle: DataBundle, split: str) -> Any:
    if split not in SPLITS:
        raise ValueError(unknown_name("split", split, SPLITS))
    data = getattr(bundle, split)
    if data is None:
        raise ValueError(f"{bundle.name} has no {split} split")
    return data


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
    return suite_of(suite).shifted(bundle, _split(bundle, split), family, int(severity), seed)


def perturbed_split(bundle: DataBundle, suite: str, split: str = "val", seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Every sample of ``split`` once, each under a (fit family, severity 1..5) drawn uniformly per sample from a
    generator seeded by ``seed`` (Tomani et al., CVPR 2021: calibrate on a validation set perturbed at mixed levels)."""
    fit = fit_families(bundle, suite)
    data = _split(bundle, split)
    prepare(bundle, suite, fit)
    entry = suite_of(suite)
    n = len(data)
    draw = generator(seed, 0)
    which = torch.randint(len(fit), (n,), generator=draw)
    level = torch.randint(1, 6, (n,), generator=draw)
    noise_seed = derive_seed(seed, 1)
    x, y = entry.clean(bundle, data)
    out = x.clone()
    for f, family in enumerate(fit):  # the fit families keep every sample's label and position
        for s in SEVERITY_LEVELS:
            rows = (which == f) & (level == s)
            if bool(rows.any()):
                out[rows] = entry.rows(bundle, data, x, rows, family, s, noise_seed)
    return entry.ready(bundle, out), y


def default_suite(bundle: DataBundle) -> str:
    """The one shift suite that applies to ``bundle`` (corruptions for in-memory images, mnist1d_natural for
    MNIST-1D); a one-line ValueError for a dataset that has none."""
    fitting = [n for n in SHIFT_SUITES.available() if suite_of(n).applies(bundle)]
    if not fitting:
        raise ValueError(f"dataset {bundle.name!r} has no shift suite (suites: {', '.join(SHIFT_SUITES.available())})")
    return fitting[0]


def shifted_held_out(bundle: DataBundle, split: str, seed: int) -> torch.utils.data.TensorDataset:
    """``split`` (meta_val or val) perturbed at mixed severities of its dataset's suite's fit families
    (:func:`perturbed_split`), as a dataset: what ``auto.measure_on: [meta_val_shifted]`` measures, the
    training-time analogue of perturbation temperature scaling. The held-out families stay unseen."""
    return torch.utils.data.TensorDataset(*perturbed_split(bundle, default_suite(bundle), split, seed))


__all__ = ["SHIFT_SUITES", "ShiftSuite", "base_of", "check_suite", "default_suite", "fit_families",
           "held_out_families", "is_image_bundle", "model_inputs", "perturbed_split", "positions", "prepare",
           "register_suite", "shifted_held_out", "shifted_split", "suite_families"]
