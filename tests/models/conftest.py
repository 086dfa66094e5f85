"""Build each (possibly large) model once per test session (tests/conftest.py already runs every
test on one intra-op thread, which is many times faster on the shared 2-core machine)."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
from torch import nn

from metacal import models


@pytest.fixture(scope="session")
def get_model() -> Callable[..., nn.Module]:
    cache: dict[tuple, nn.Module] = {}

    def get(name: str, num_classes: int = 10, in_channels: int = 3, **options: Any) -> nn.Module:
        key = (name, num_classes, in_channels, tuple(sorted(options.items())))
        if key not in cache:
            torch.manual_seed(0)
            cache[key] = models.build(name, num_classes, in_channels, **options)
        return cache[key]

    return get
