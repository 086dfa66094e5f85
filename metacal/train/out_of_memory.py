"""Running out of accelerator memory: one line that names the batch sizes, the device and its memory, and the
setting to lower, instead of torch's traceback; nothing is saved, so the last checkpoint stays as it was.

The command line exits with :data:`EXIT_OUT_OF_MEMORY` (metacal/train/cli.py). A training step holds
``data.batch_size`` samples per process (and a learner's own global batch, a meta step's ``meta.batch_size``);
an evaluation ``data.eval_batch_size`` (as does the automatic scalar's measurement, which runs inside a step)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import torch

from metacal.wording import current

from metacal.meta.learners import global_batch

from .config import Config

#: the trainer's exit status when the accelerator ran out of memory
EXIT_OUT_OF_MEMORY = 3


class OutOfDeviceMemory(RuntimeError):
    """The accelerator ran out of memory during a step or an evaluation (the message says what to lower)."""


def device_memory(device: torch.device) -> str:
    """``cuda:0 (NVIDIA H100 80GB HBM3, 79.1 GiB, 77.0 GiB in use by torch)``; the device alone elsewhere."""
    if device.type != "cuda" or not torch.cuda.is_available():
        return str(device)
    gib = 2.0**30
    total = torch.cuda.get_device_properties(device).total_memory / gib
    used = torch.cuda.memory_reserved(device) / gib
    return f"{device} ({torch.cuda.get_device_name(device)}, {total:.1f} GiB, {used:.1f} GiB in use by torch)"


def out_of_memory_message(cfg: Config, device: torch.device, phase: str, where: str) -> str:
    """The one line of :class:`OutOfDeviceMemory` for ``phase`` "training" (a step) or "evaluation"."""
    d, say = cfg.data, current().in_config()
    sizes = f"data.batch_size={d.batch_size}, data.eval_batch_size={d.eval_batch_size}"
    own = global_batch(cfg)  # the learner's own global batch, e.g. meta.batch_size
    if own is not None:
        sizes += f", {own[0]}={own[1]}"
    if phase == "training":
        lower = f"lower data.batch_size ({say.option('data', 'batch_size', max(1, d.batch_size // 2))})"
        if own is not None:
            section, key = own[0].split(".")
            lower += f" or {own[0]} ({say.option(section, key, max(1, own[1] // 2))})"
    else:
        lower = (f"lower data.eval_batch_size "
                 f"({say.option('data', 'eval_batch_size', max(1, d.eval_batch_size // 2))})")
    return (f"out of memory on {device_memory(device)} in {phase} at {where} with {sizes}; {lower}; "
            "nothing was saved after the last checkpoint")


@contextmanager
def naming_batch_sizes(cfg: Config, device: torch.device, phase: str, where: Callable[[], str]) -> Iterator[None]:
    """Turn ``torch.OutOfMemoryError`` (``torch.cuda.OutOfMemoryError``) raised inside the block into
    :class:`OutOfDeviceMemory`; ``where()`` names the point (epoch, step) when it happens."""
    try:
        yield
    except torch.OutOfMemoryError:
        raise OutOfDeviceMemory(out_of_memory_message(cfg, device, phase, where())) from None
