"""Derived seeds: one well-mixed 63-bit seed per tuple of integers (numpy SeedSequence), so streams
seeded by (seed, 0), (seed, 1), (seed + 1, 0) ... are independent and the same on every machine."""

from __future__ import annotations

import numpy as np
import torch


def derive_seed(*keys: int) -> int:
    """A 63-bit seed determined by ``keys`` (non-negative integers)."""
    if any(int(k) < 0 for k in keys):
        raise ValueError(f"seed keys must be non-negative integers, got {keys}")
    state = np.random.SeedSequence([int(k) for k in keys]).generate_state(2, dtype=np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


def generator(*keys: int) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with :func:`derive_seed` ``(*keys)``."""
    return torch.Generator().manual_seed(derive_seed(*keys))
