"""Your own arrays: ``data.name: arrays`` with ``data.root: PATH.npz`` — for tabular data and frozen embeddings.

The file (``numpy.savez``) holds ``x_train`` (N, …) features of any shape and ``y_train`` (N,) integer labels
0..K−1, optionally ``x_test``/``y_test`` (same feature shape) and ``classes`` (K names). Features are read as
float32, finite; ``input_shape`` is ``x_train.shape[1:]`` ((N,) becomes (N, 1)), so an ``mlp`` takes any
shape and a 1-d CNN takes (N, C, L). The official training set is split 8:1:1 as every dataset
(:mod:`metacal.data.user_data`); without ``x_test`` the bundle has no test set. K is ``num_classes``, else the
number of ``classes`` names, else max(y_train) + 1; a label outside 0..K−1 is named with its index
(``PATH: y_train[17] = 12 is outside 0..9 (num_classes 10)``).

``standardize=True`` subtracts the per-feature mean and divides by the per-feature standard deviation of
the train split (not val / meta-val / test; a constant feature is divided by 1), the usual preprocessing
of tabular features for an MLP. Python users call :func:`arrays_bundle` with arrays in memory.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from .bundle import DataBundle
from .errors import DataFormatError, DataNotFoundError
from .image_datasets import VectorDataset
from .registry import DATASETS
from .splits import DEFAULT_SPLIT, split_indices
from .user_data import check_labels, from_datasets, infer_num_classes

KEYS = ("x_train", "y_train", "x_test", "y_test", "classes")
LAYOUT = "an .npz file (numpy.savez) with x_train, y_train and optionally x_test, y_test, classes"
_SAVE = "np.savez(path, x_train=..., y_train=..., x_test=..., y_test=...)"


def read_npz(path: str | Path | None) -> dict[str, np.ndarray]:
    """The arrays of ``path`` by name, every failure one line naming the file and what to change."""
    if path is None:
        raise DataFormatError(f"dataset 'arrays' needs data.root (--set data.root=PATH.npz): the path of {LAYOUT}")
    path = Path(path).expanduser()
    if not path.exists():
        raise DataNotFoundError("arrays", [path], f"set data.root to your .npz file, written with {_SAVE}", LAYOUT)
    if not path.is_file():
        raise DataFormatError(f"{path}: is a directory; data.root of 'arrays' is {LAYOUT}")
    try:
        with np.load(path, allow_pickle=False) as stored:
            if not hasattr(stored, "files"):
                raise DataFormatError(f"{path}: holds a single array (.npy); write {LAYOUT}: {_SAVE}")
            unknown = sorted(set(stored.files) - set(KEYS))
            if unknown:
                raise DataFormatError(f"{path}: unknown array(s) {', '.join(unknown)}; it may hold only "
                                      f"{', '.join(KEYS)} ({LAYOUT})")
            return {key: stored[key] for key in stored.files}
    except AttributeError:  # np.load returned a plain array (a .npy file): no context manager
        raise DataFormatError(f"{path}: holds a single array (.npy); write {LAYOUT}: {_SAVE}") from None
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        if isinstance(err, DataFormatError):
            raise
        reason = " ".join(str(err).split()) or type(err).__name__
        raise DataFormatError(f"{path}: not a readable .npz file ({reason}); write it with {_SAVE}") from None


def check_features(x: Any, where: str) -> torch.Tensor:
    """float32 (N, …) features; a 1-d array is N scalar features → (N, 1). Finite values only."""
    array = np.asarray(x)
    if array.dtype.kind not in "biuf":
        raise DataFormatError(f"{where}: features must be numbers; got dtype {array.dtype}")
    if array.ndim == 0 or len(array) == 0:
        raise DataFormatError(f"{where}: no samples (shape {array.shape})")
    if array.ndim == 1:
        array = array[:, None]
    values = torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))
    finite = torch.isfinite(values.reshape(len(values), -1)).all(dim=1)
    if not bool(finite.all()):
        row = int(torch.nonzero(~finite)[0])
        raise DataFormatError(f"{where}: non-finite value (NaN or inf) in row {row} ({int((~finite).sum())} such "
                              "rows); impute or drop them")
    return values


def _pair(x: Any, y: Any, name: str, where: str, num_classes: int | None,
          why: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    features = check_features(x, f"{where}, x_{name}")
    labels = check_labels(y, where, num_classes, f"y_{name}", why)
    if len(features) != len(labels):
        raise DataFormatError(f"{where}: x_{name} has {len(features)} rows but y_{name} has {len(labels)} labels; "
                              "give one label per row")
    return features, labels


def arrays_bundle(x_train: Any, y_train: Any, x_test: Any = None, y_test: Any = None, *,
                  classes: Sequence[str] | None = None, num_classes: int | None = None, standardize: bool = False,
                  seed: int = 0, split: Sequence[float] = DEFAULT_SPLIT, fold_meta_val: bool = False,
                  split_seed: int | None = None, train_subset: int | None = None, name: str = "arrays",
                  where: str = "arrays") -> DataBundle:
    """The bundle of in-memory arrays (what ``data.name: arrays`` builds from its file); ``where`` names the
    source in error messages."""
    if classes is not None:
        classes = [str(c) for c in np.asarray(classes).reshape(-1).tolist()]
    why = None
    if num_classes is None and classes is not None and len(classes) >= 2:  # K = the number of class names
        num_classes, why = len(classes), f"{len(classes)} names in classes"
    known = num_classes if isinstance(num_classes, (int, np.integer)) and num_classes >= 2 else None
    x, y = _pair(x_train, y_train, "train", where, known, why)
    k = infer_num_classes(y, where, num_classes, "y_train", why)
    if (x_test is None) != (y_test is None):
        given, missing = ("x_test", "y_test") if y_test is None else ("y_test", "x_test")
        raise DataFormatError(f"{where}: has {given} but no {missing}; give both or neither")
    test = None
    if x_test is not None:
        xt, yt = _pair(x_test, y_test, "test", where, k, why)
        if xt.shape[1:] != x.shape[1:]:
            raise DataFormatError(f"{where}: x_test has feature shape {tuple(xt.shape[1:])} but x_train has "
                                  f"{tuple(x.shape[1:])}")
        test = (xt, yt)
    s = seed if split_seed is None else split_seed
    mean = std = None
    if standardize:  # statistics of the train split only: val, meta-val and test are held out
        rows = x[split_indices(len(x), split, s, fold_meta_val).train]
        mean, std = rows.mean(dim=0), rows.std(dim=0, unbiased=False)
        std = torch.where(std > 0, std, torch.ones_like(std))
        x = (x - mean) / std
        test = ((test[0] - mean) / std, test[1]) if test is not None else None
    info = {"standardize": standardize, "feature_mean": mean, "feature_std": std}
    return from_datasets(VectorDataset(x, y), test=None if test is None else VectorDataset(*test),
                         num_classes=k, classes=classes, name=name, seed=seed, split=split,
                         fold_meta_val=fold_meta_val, split_seed=split_seed, train_subset=train_subset, **info)


@DATASETS.register("arrays")
def build_arrays(root=None, seed: int = 0, split: Sequence[float] = DEFAULT_SPLIT, fold_meta_val: bool = False,
                 split_seed: int | None = None, num_classes: int | None = None,
                 standardize: bool = False) -> DataBundle:
    """``root``: the .npz file. ``num_classes``: K when a class has no training sample (default: the number of
    ``classes`` names, else max label + 1)."""
    arrays = read_npz(root)
    path = str(Path(root).expanduser())
    for key in ("x_train", "y_train"):
        if key not in arrays:
            held = ", ".join(arrays) or "no arrays"
            raise DataFormatError(f"{path}: no array '{key}' (it holds {held}); write {LAYOUT}: {_SAVE}")
    return arrays_bundle(arrays["x_train"], arrays["y_train"], arrays.get("x_test"), arrays.get("y_test"),
                         classes=arrays.get("classes"), num_classes=num_classes, standardize=standardize,
                         seed=seed, split=split, fold_meta_val=fold_meta_val, split_seed=split_seed, where=path)
