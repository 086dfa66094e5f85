"""Per-process runtime settings of a training run: torch threads, deterministic algorithms and, on CPU,
an allocator that keeps freed memory for reuse.

Why the allocator: PyTorch's CPU tensors come from malloc. glibc maps large blocks fresh and gives freed
memory back to the OS, so every training step faults in (and zeroes) much of what it allocates, again
and again; ``python scripts/bench_meta_step.py --malloc glibc`` (vs the default ``--malloc retain``)
measures the difference, page faults per step included. jemalloc or tcmalloc (``LD_PRELOAD``) avoid it too.
"""

from __future__ import annotations

import ctypes

import torch

# glibc mallopt parameters (malloc.h) and the largest mmap threshold it accepts on 64-bit systems
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX = -1, -3, 32 * 2**20


def retain_freed_memory() -> bool:
    """glibc: serve blocks up to 32 MiB from the heap and never trim it, so freed tensor memory is reused
    instead of returned to the OS and faulted in again (``mallopt``; the same as the environment variables
    MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1073741824). Process-wide and permanent; the
    resident size then stays at its peak. Returns False where it does not apply (no glibc)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    ok = libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX) == 1
    return ok and libc.mallopt(_M_TRIM_THRESHOLD, 2**30) == 1


def configure_process(run_cfg, device: torch.device) -> None:
    """Apply ``run.torch_threads``, ``run.deterministic`` and, for a CPU device, ``run.malloc_retain``."""
    if run_cfg.torch_threads is not None:
        torch.set_num_threads(run_cfg.torch_threads)
    if run_cfg.deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
    if run_cfg.malloc_retain and device.type == "cpu":
        retain_freed_memory()
