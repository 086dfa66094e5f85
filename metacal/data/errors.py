"""The one error raised when a dataset's files are not where we looked."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable


class DataNotFoundError(FileNotFoundError):
    """A dataset's files are missing. The message names the dataset, every place looked and the fix.

    >>> raise DataNotFoundError("cifar10", ["/data/cifar-10-batches-py"], "pass download=True")
    """

    def __init__(self, dataset: str, looked: Iterable[str | Path], fix: str, layout: str = "") -> None:
        self.dataset = dataset
        self.looked = [str(p) for p in looked]
        self.fix = fix
        self.layout = layout
        where = ", ".join(self.looked) if self.looked else "(no candidate locations)"
        message = f"dataset {dataset!r} not found; looked in: {where}."
        if layout:
            message += f" Expected layout: {layout}."
        message += f" To get it: {fix}."
        super().__init__(message)

    def __str__(self) -> str:  # FileNotFoundError would format (errno, strerror)
        return str(self.args[0])

    def __reduce__(self):  # picklable across DataLoader worker processes
        return (type(self), (self.dataset, self.looked, self.fix, self.layout))


class DataFormatError(ValueError):
    """A user's data that cannot be used as it is (``image_folder``, ``arrays``, :func:`metacal.data.from_datasets`).

    The message is one line: the file or folder, what is wrong, and what to change, e.g.
    ``/data/pets/train/cat: empty class folder (no image files); add images or remove the folder``.
    """
