"""Cheap, reversible substitution of a module's parameters/buffers (the lean core of functional_call).

The meta backends run two extra forwards per iteration — the meta-val forward (real θ', scratch BN
buffers) and the forward-mode JVP (old θ as dual tensors, scratch BN buffers). ``torch.func.functional_call``
re-resolves names, checks ties and builds accessors on every call (tens of ms of Python per step for a
small ResNet); here the slots are resolved once and swapping is a few dict assignments.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from torch import nn


class TensorSlots:
    """Every (submodule, attribute) that holds each parameter / buffer of ``model``, by canonical name.

    Tied tensors (the same Parameter under several names) are swapped in all their slots together."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        canonical = {id(p): n for n, p in model.named_parameters()}
        canonical.update({id(b): n for n, b in model.named_buffers()})
        self.slots: dict[str, list[tuple[dict, str]]] = {}
        for module_name, module in model.named_modules(remove_duplicate=False):
            for store in (module._parameters, module._buffers):
                for leaf, tensor in store.items():
                    if tensor is None:
                        continue
                    self.slots.setdefault(canonical[id(tensor)], []).append((store, leaf))
        self.buffer_names = [n for n, _ in model.named_buffers()]

    def scratch_buffers(self) -> dict[str, torch.Tensor]:
        """Clones of all buffers: extra train-mode forwards then use batch statistics and update these
        copies, never the real running statistics (updated once per iteration, by the real forward)."""
        named = dict(self.model.named_buffers())
        return {n: named[n].clone() for n in self.buffer_names}

    @contextmanager
    def swapped(self, tensors: dict[str, torch.Tensor]) -> Iterator[None]:
        saved = []
        try:
            for name, tensor in tensors.items():
                for store, leaf in self.slots[name]:
                    saved.append((store, leaf, store[leaf]))
                    store[leaf] = tensor
            yield
        finally:
            for store, leaf, original in reversed(saved):
                store[leaf] = original
