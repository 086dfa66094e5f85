"""MNIST-1D (Greydanus 2020), generated locally with ``mnist1d.data.make_dataset`` (never downloaded).

Generator arguments are the package defaults except ``num_samples`` (default 20,000) and ``seed`` (ours).
make_dataset splits 80/20 into its own train/test, used here as the official train/test
(20,000 → 16,000 train → 12,800 / 1,600 / 1,600, and 4,000 test). Inputs (1, 40) float32, already
standardised by the generator (mean 0, std 1 over the whole set). Generation takes seconds, so the
arrays are cached as ``<cache>/mnist1d/<hash of args>.npz`` with cache = ``root``, ``$METACAL_DATA``
or ``$XDG_CACHE_HOME/metacal`` (``~/.cache/metacal`` without XDG_CACHE_HOME; :mod:`metacal.data.paths`). make_dataset reseeds numpy's and python's global RNGs; we restore them.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import random
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from .bundle import DataBundle, DataSubset
from .image_datasets import VectorDataset
from .paths import data_home
from .registry import DATASETS
from .splits import DEFAULT_SPLIT, split_indices

_FIXED = ("url",)  # generator arguments that do not change the data


def generator_args(num_samples: int = 20_000, seed: int = 0, **overrides: Any) -> dict[str, Any]:
    """mnist1d's default arguments with our sample count, seed and any overrides (unknown keys raise)."""
    from mnist1d.data import get_dataset_args

    args = {k: v for k, v in get_dataset_args(as_dict=True).items() if k not in _FIXED}
    unknown = sorted(set(overrides) - set(args))
    if unknown:
        raise ValueError(f"unknown mnist1d generator argument(s) {', '.join(unknown)}; valid: {', '.join(args)}")
    args.update(overrides, num_samples=int(num_samples), seed=int(seed))
    return args


def cache_path(args: dict[str, Any], cache_dir: Path) -> Path:
    try:
        version = importlib.metadata.version("mnist1d")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    key = json.dumps({"args": args, "mnist1d": version}, sort_keys=True, default=str)
    return cache_dir / "mnist1d" / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.npz"


def generate(args: dict[str, Any]) -> dict[str, np.ndarray]:
    """Run the generator, leaving numpy's and python's global random state as they were."""
    from mnist1d.data import make_dataset
    from mnist1d.utils import ObjectView

    np_state, py_state = np.random.get_state(), random.getstate()
    try:
        data = make_dataset(ObjectView(dict(args)))
    finally:
        np.random.set_state(np_state)
        random.setstate(py_state)
    return {k: np.asarray(data[k]) for k in ("x", "y", "x_test", "y_test")}


def load_or_generate(args: dict[str, Any], cache_dir: Path | None, use_cache: bool = True) -> dict[str, np.ndarray]:
    path = cache_path(args, cache_dir or data_home())
    if use_cache and path.is_file():
        try:
            with np.load(path) as stored:
                return {k: stored[k] for k in ("x", "y", "x_test", "y_test")}
        except (OSError, KeyError, ValueError):
            pass  # unreadable cache: regenerate and overwrite
    arrays = generate(args)
    if use_cache:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".npz", delete=False) as tmp:
                np.savez(tmp, **arrays)
            os.replace(tmp.name, path)  # atomic: concurrent ranks never see a half-written file
        except OSError:
            pass  # a read-only cache only costs regeneration time
    return arrays


@DATASETS.register("mnist1d")
def build_mnist1d(root=None, seed: int = 0, split: Sequence[float] = DEFAULT_SPLIT, fold_meta_val: bool = False,
                  split_seed: int | None = None, num_samples: int = 20_000, cache: bool = True,
                  generator_overrides: dict[str, Any] | None = None) -> DataBundle:
    """MNIST-1D with ``num_samples`` generated samples (seeded by ``seed``), inputs (1, 40)."""
    if num_samples < 10:
        raise ValueError(f"num_samples must be at least 10 (one per class), got {num_samples}")
    args = generator_args(num_samples, seed, **(generator_overrides or {}))
    arrays = load_or_generate(args, Path(root).expanduser() if root is not None else None, cache)
    train = VectorDataset(torch.from_numpy(arrays["x"]).float().unsqueeze(1), torch.from_numpy(arrays["y"]))
    test = VectorDataset(torch.from_numpy(arrays["x_test"]).float().unsqueeze(1), torch.from_numpy(arrays["y_test"]))
    s = seed if split_seed is None else split_seed
    idx = split_indices(len(train), split, s, fold_meta_val)
    length = int(train.inputs.shape[-1])
    return DataBundle("mnist1d", DataSubset(train, idx.train), DataSubset(train, idx.val),
                      DataSubset(train, idx.meta_val), DataSubset(test, range(len(test))), 10, (1, length),
                      (0.0,), (1.0,), [str(d) for d in range(10)],
                      {"split": tuple(split), "split_seed": s, "fold_meta_val": fold_meta_val, "generator": args})
