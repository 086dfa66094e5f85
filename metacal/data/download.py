"""Downloads of public datasets (``data.options.download=true``) with one clear error when they fail.

A missing dataset's message says how to download it as the caller spells it (:func:`download_hint`).

The datasets download through torchvision; a network failure there surfaces as a bare ``URLError``, a
``RuntimeError`` listing mirrors, or an ``OSError``. :func:`downloading` turns any of them into
:class:`DownloadError`, whose one-line message names the dataset, the URL, the reason and the way out.
"""

from __future__ import annotations

import urllib.error
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from metacal.wording import current

from .errors import DataNotFoundError
from .paths import ENV_VAR


def download_hint() -> str:
    """How to ask for the download: ``download=True`` (:func:`metacal.data.build`), ``--set
    data.options.download=true`` (command line), ``overrides=["data.options.download=true"]`` (a trainer
    config from Python)."""
    return current().option("data.options", "download", True)


class DownloadError(FileNotFoundError):
    """A dataset could not be downloaded (a FileNotFoundError: the data stays missing)."""

    def __init__(self, dataset: str, url: str, reason: str, target: str | Path) -> None:
        self.dataset, self.url, self.reason, self.target = dataset, url, reason, str(target)
        super().__init__(
            f"could not download {dataset} from {url} into {target}: {reason}; check the network or proxy, "
            f"or download the files yourself and point data.root (or ${ENV_VAR}) at them")

    def __str__(self) -> str:  # FileNotFoundError would format (errno, strerror)
        return str(self.args[0])

    def __reduce__(self):  # picklable across processes
        return (type(self), (self.dataset, self.url, self.reason, self.target))


def failure_reason(err: BaseException) -> str:
    """The reason of a failed download in a few words (HTTP status, resolver or socket error, checksum…)."""
    if isinstance(err, urllib.error.HTTPError):
        return f"HTTP {err.code} {err.reason}"
    if isinstance(err, urllib.error.URLError):
        return str(err.reason)
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[-1] if lines else type(err).__name__  # torchvision's mirror list ends with the last error


@contextmanager
def downloading(dataset: str, url: str, target: str | Path) -> Iterator[None]:
    """Run a download; its failure becomes :class:`DownloadError` (a missing-data error passes unchanged)."""
    try:
        yield
    except (DataNotFoundError, DownloadError):
        raise
    except (urllib.error.URLError, OSError, RuntimeError) as err:
        raise DownloadError(dataset, url, failure_reason(err), target) from None
