"""Cheap, reversible substitution of a module's parameters/buffers (the lean core of functional_call).

The meta backends run two extra forwards per iteration — the meta-val forward (real θ', scratch BN
buffers) and the forward-mode JVP (old θ as dual tensors, scratch BN buffers; see
:meth:`TensorSlots.scratch_buffers`). ``torch.func.functional_call`` re-resolves names, checks ties and builds
accessors on every call (tens of ms of Python per step for a small ResNet); here the slots are resolved once
and swapping is a few dict assignments.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from torch import nn

from .replay import PLAIN_BATCHNORM


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
        # a plain BatchNorm's running statistics, by module: an extra train-mode forward needs no copy of them
        self.norm_buffers = [
            (module, [canonical[id(b)] for b in (module.running_mean, module.running_var, module.num_batches_tracked)
                      if b is not None])
            for module in model.modules()
            if type(module) in PLAIN_BATCHNORM and module.track_running_stats
        ]

    def scratch_buffers(self) -> dict[str, torch.Tensor | None]:
        """Buffers for an extra train-mode forward that must leave the real ones alone (the real running
        statistics are updated once per iteration, by the real forward).

        A plain BatchNorm in training mode gets ``None`` for its running statistics: it then normalises with
        the batch statistics, as it would with copies, and updates nothing. One in eval mode keeps the real
        ones, which it only reads. Every other buffer is a clone. (Copies of all buffers cost one kernel launch
        each, per extra forward, on a GPU.)"""
        named = dict(self.model.named_buffers())
        out: dict[str, torch.Tensor | None] = {}
        for module, names in self.norm_buffers:
            out.update({n: None if module.training else named[n] for n in names})
        return {n: out[n] if n in out else named[n].clone() for n in self.buffer_names}

    @contextmanager
    def swapped(self, tensors: dict[str, torch.Tensor | None]) -> Iterator[None]:
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
