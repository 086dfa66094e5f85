"""A user's own datasets → :class:`DataBundle`: the assembly shared by ``image_folder``, ``arrays`` and the
Python API (:func:`from_datasets` takes any map-style ``Dataset`` of ``(input tensor, integer label)``).

Omitted val / meta-val parts are cut from ``train`` by the seeded split of :mod:`metacal.data.splits`
(8:1:1 when both are omitted; a part that is given takes nothing from train, e.g. ``val`` given → 9:0:1
of train). Labels must be integers 0..K−1; K is ``num_classes`` or, when omitted, max(train label) + 1,
and then every class 0..K−1 must occur in train (labels 1..10 are refused rather than read as 11 classes).
Every failure is one :class:`DataFormatError` line naming the split and what to change.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from .bundle import DataBundle, DataSubset, subset_split
from .errors import DataFormatError
from .splits import DEFAULT_SPLIT, check_fractions, split_indices


def labels_of(dataset: Dataset) -> torch.Tensor:
    """All labels of ``dataset``: its ``targets`` attribute when it has one (no item is loaded), else every
    item's second entry (this loads every input once)."""
    targets = getattr(dataset, "targets", None)
    if targets is not None:
        return torch.as_tensor(np.asarray(targets)) if not isinstance(targets, torch.Tensor) else targets
    return torch.as_tensor(np.asarray([_plain(dataset[i][1]) for i in range(len(dataset))]))  # type: ignore[arg-type]


def _plain(label: Any) -> Any:
    """A label as a python number (or nested list, which :func:`check_labels` then refuses)."""
    if isinstance(label, (torch.Tensor, np.ndarray)):
        return label.tolist()
    return label


def _span(classes: list[int]) -> str:
    """``class 10``, ``classes 10..11`` or ``classes 3, 5, 8, …``."""
    if len(classes) == 1:
        return f"class {classes[0]}"
    if classes == list(range(classes[0], classes[-1] + 1)):
        return f"classes {classes[0]}..{classes[-1]}"
    return "classes " + ", ".join(map(str, classes[:3])) + (", …" if len(classes) > 3 else "")


def _outside(where: str, array: str, values: torch.Tensor, bad: torch.Tensor, k: int, why: str,
             then: str = "") -> DataFormatError:
    """``<where>: y_train[17] = 12 is outside 0..9 (num_classes 10)``: the first offending label, by index."""
    i, count = int(torch.nonzero(bad)[0]), int(bad.sum())
    more = f"; {count} labels outside" if count > 1 else ""
    return DataFormatError(f"{where}: {array}[{i}] = {int(values[i])} is outside 0..{k - 1} ({why}{more}){then}")


def check_labels(labels: Any, where: str, num_classes: int | None = None, array: str = "labels",
                 why: str | None = None) -> torch.Tensor:
    """Class indices as int64 (N,): integers ≥ 0 (and < ``num_classes`` when given), one per sample.

    Accepts shape (N,) or (N, 1), integer or bool dtype, or floats that are whole numbers (0.0, 1.0, …).
    ``where`` names the source (a file), ``array`` the labels in it (``y_train``): a label out of range is
    named by its index, ``<where>: <array>[i] = v is outside 0..K-1 (<why>)``; ``why`` says where K comes
    from (default ``num_classes K``)."""
    at = f"{where}, {array}"
    values_np = np.asarray(labels.numpy() if isinstance(labels, torch.Tensor) else labels)
    if values_np.ndim == 2 and values_np.shape[1] == 1:
        values_np = values_np[:, 0]
    if values_np.ndim != 1:
        hint = " (one-hot? pass the class index per sample, e.g. y.argmax(1))" if values_np.ndim == 2 else ""
        raise DataFormatError(f"{at}: labels must be one class index per sample, shape (N,); got shape "
                              f"{values_np.shape}{hint}")
    if values_np.dtype.kind not in "biuf":
        raise DataFormatError(f"{at}: labels must be integers 0..K-1; got dtype {values_np.dtype}")
    if values_np.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(values_np) | (values_np != np.round(values_np)))
        if bad.size:
            i = int(bad[0])
            raise DataFormatError(f"{at}: labels must be integers 0..K-1; got the non-integer label "
                                  f"{values_np[i].item():g} at index {i} ({bad.size} in all)")
    values = torch.from_numpy(values_np.astype(np.int64))
    if num_classes is not None and values.numel():
        outside = (values < 0) | (values >= num_classes)
        if bool(outside.any()):
            raise _outside(where, array, values, outside, num_classes, why or f"num_classes {num_classes}")
    elif values.numel() and bool((values < 0).any()):  # K not known yet: the largest label + 1
        raise _outside(where, array, values, values < 0, max(int(values.max()) + 1, 2), "labels count from 0")
    return values


def infer_num_classes(train_labels: torch.Tensor, where: str, num_classes: int | None = None,
                      array: str = "labels", why: str | None = None) -> int:
    """``num_classes`` if given (every label must be below it), else max + 1 with every class present.

    When classes 0..c-1 (c ≥ 2) all occur, c does not, and the labels above the gap take no more distinct
    values than the gap is wide (``0..9`` and a stray ``12``), the first such label is named as out of range;
    otherwise the first missing class is (``1..10``: one-based labels)."""
    if num_classes is not None:
        if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)) or num_classes < 2:
            raise DataFormatError(f"num_classes must be an integer >= 2, got {num_classes!r}")
        check_labels(train_labels, where, int(num_classes), array, why)
        return int(num_classes)
    if train_labels.numel() == 0:
        raise DataFormatError(f"{where}: no training samples")
    k = int(train_labels.max()) + 1
    present = set(train_labels.unique().tolist())
    missing = sorted(set(range(k)) - present)
    fix = "data.options.num_classes"
    if missing and missing[0] >= 2 and len([v for v in present if v > missing[0]]) <= len(missing):
        c = missing[0]
        raise _outside(where, array, train_labels, train_labels > c, c,
                       f"{_span(missing)} never {'occurs' if len(missing) == 1 else 'occur'}",
                       f"; fix the label, or set num_classes={k} ({fix}) if classes really lack training samples")
    if missing:
        raise DataFormatError(
            f"{where}, {array}: no sample of class {missing[0]} ({len(missing)} of classes 0..{k - 1} missing; labels "
            f"found {int(train_labels.min())}..{k - 1}); labels must be 0..K-1 with every class present — relabel "
            f"them, or set num_classes ({fix}) if a class really has no training sample")
    if k < 2:
        raise DataFormatError(f"{where}, {array}: all training labels are {k - 1}; a classifier needs at least 2 "
                              "classes")
    return k


def _first_input(dataset: Dataset, where: str) -> torch.Tensor:
    try:
        item = dataset[0]
    except IndexError:
        raise DataFormatError(f"{where}: the dataset is empty") from None
    if not (isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], torch.Tensor)):
        kinds = ", ".join(type(v).__name__ for v in item) if isinstance(item, (tuple, list)) else type(item).__name__
        raise DataFormatError(f"{where}: items must be (input tensor, integer label) pairs; item 0 is ({kinds})")
    return item[0]


def from_datasets(train: Dataset, *, val: Dataset | None = None, meta_val: Dataset | None = None,
                  test: Dataset | None = None, eval_train: Dataset | None = None, num_classes: int | None = None,
                  classes: Sequence[str] | None = None, input_shape: Sequence[int] | None = None,
                  mean: Sequence[float] = (0.0,), std: Sequence[float] = (1.0,), name: str = "custom", seed: int = 0,
                  split: Sequence[float] = DEFAULT_SPLIT, fold_meta_val: bool = False, split_seed: int | None = None,
                  train_subset: int | None = None, **info: Any) -> DataBundle:
    """A :class:`DataBundle` from map-style datasets of ``(input tensor, integer label)``.

    ``eval_train``: the same samples as ``train`` without augmentation; val / meta-val cut from train read
    it (default: ``train`` itself). ``test=None`` leaves ``bundle.test`` None (no test set, nothing faked).
    ``input_shape`` defaults to the shape of the first input; ``classes`` to ``["0", …, "K-1"]``;
    ``train_subset=N`` keeps a seeded N-sample subset of the train part (:func:`subset_split`).
    """
    eval_train = train if eval_train is None else eval_train
    n = len(train)  # type: ignore[arg-type]
    if len(eval_train) != n:  # type: ignore[arg-type]
        raise DataFormatError(f"eval_train has {len(eval_train)} samples but train has {n}; they must be two views "
                              "of the same samples")
    _, f_val, f_meta = check_fractions(split)
    f_val, f_meta = (0.0 if val is not None else f_val), (0.0 if meta_val is not None else f_meta)
    if fold_meta_val and meta_val is not None:
        raise DataFormatError("fold_meta_val puts the meta-val part cut from train back into train; it cannot be "
                              "used with a meta_val dataset of its own")
    s = seed if split_seed is None else split_seed
    idx = split_indices(n, (1.0 - f_val - f_meta, f_val, f_meta), s, fold_meta_val)
    train_labels = check_labels(labels_of(train), name, array="train labels")
    k = infer_num_classes(train_labels, name, num_classes, array="train labels")
    parts = {"val": val, "meta_val": meta_val, "test": test}
    for part, dataset in parts.items():
        if dataset is not None and len(dataset) == 0:  # type: ignore[arg-type]
            raise DataFormatError(f"{name} {part}: the dataset is empty; give it samples or leave it out")
        if dataset is not None:
            check_labels(labels_of(dataset), name, k, array=f"{part} labels")
    if input_shape is None:
        input_shape = _first_input(eval_train, f"{name} train").shape
    shape = tuple(int(v) for v in input_shape)
    if len(shape) == 0:
        raise DataFormatError(f"{name} train: inputs must have at least one dimension (got scalars); "
                              "give each sample a feature vector")
    names = [str(c) for c in classes] if classes is not None else [str(c) for c in range(k)]
    if len(names) != k:
        raise DataFormatError(f"{name}: {len(names)} class names for {k} classes")
    bundle = DataBundle(
        name, DataSubset(train, idx.train),
        DataSubset(eval_train, idx.val) if val is None else val,
        DataSubset(eval_train, idx.meta_val) if meta_val is None else meta_val,
        test, k, shape, tuple(float(m) for m in mean), tuple(float(v) for v in std), names,
        {"split": tuple(split), "split_seed": s, "fold_meta_val": fold_meta_val,
         "given": [p for p, d in parts.items() if d is not None], **info})
    return bundle if train_subset is None else subset_split(bundle, train_subset, s)
