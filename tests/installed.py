"""Whether optional data is installed where metacal looks for it (``METACAL_NO_SYSTEM_DATASETS`` hides the system
copy, as CI's run without the Debian package does), so that tests needing it skip with the reason."""

from __future__ import annotations

import pytest


def fashion_mnist_installed() -> bool:
    """True when metacal's own lookup finds the four Fashion-MNIST IDX files."""
    from metacal.data import DataNotFoundError
    from metacal.data.fashion_mnist import find_fashion_mnist_files

    try:
        find_fashion_mnist_files()
    except DataNotFoundError:
        return False
    return True


requires_fashion_mnist = pytest.mark.skipif(
    not fashion_mnist_installed(), reason="Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)")
