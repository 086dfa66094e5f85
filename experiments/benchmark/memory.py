"""Peak-memory meters for the benchmarks (CPU has no allocator statistics to read).

* :class:`SavedTensorMeter` — live and peak bytes of tensors that autograd graphs hold for backward,
  each storage counted once while any graph keeps it (``torch.autograd.graph.saved_tensors_hooks``).
* :func:`reset_rss_peak` / :func:`rss_mb` — the process's resident set size and its high-water mark
  (Linux ``/proc/self/status``; the mark is reset by writing 5 to ``/proc/self/clear_refs``). RSS follows
  live tensor memory only when freed blocks go back to the OS, e.g. with ``MALLOC_MMAP_THRESHOLD_=65536``.
* :func:`minor_faults` — page faults served without I/O so far: each first touch of a freshly mapped page.
  PyTorch's CPU tensors come from malloc, and glibc maps large blocks fresh and returns freed memory to the
  OS, so a step that allocates much pays a fault (and the zeroing of a page) per 4 KiB it touches anew.
"""

from __future__ import annotations

import resource
from pathlib import Path

import torch


class SavedTensorMeter:
    """Use as ``with saved_tensors_hooks(meter.pack, meter.unpack): ...``; ``peak`` is in bytes."""

    def __init__(self) -> None:
        self.live = 0
        self.peak = 0
        self.refs: dict[int, list[int]] = {}  # storage pointer -> [references, bytes]

    def reset(self) -> None:
        self.peak = self.live

    def pack(self, tensor: torch.Tensor) -> "_Saved":
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        entry = self.refs.get(key)
        if entry is None:
            self.refs[key] = [1, storage.nbytes()]
            self.live += storage.nbytes()
            self.peak = max(self.peak, self.live)
        else:
            entry[0] += 1
        return _Saved(self, key, tensor)

    @staticmethod
    def unpack(saved: "_Saved") -> torch.Tensor:
        return saved.tensor


class _Saved:
    """One saved tensor; releasing the last reference to a storage lowers the meter's live bytes."""

    __slots__ = ("meter", "key", "tensor")

    def __init__(self, meter: SavedTensorMeter, key: int, tensor: torch.Tensor) -> None:
        self.meter, self.key, self.tensor = meter, key, tensor

    def __del__(self) -> None:
        entry = self.meter.refs.get(self.key)
        if entry is None:
            return
        entry[0] -= 1
        if entry[0] == 0:
            self.meter.live -= entry[1]
            del self.meter.refs[self.key]


def rss_available() -> bool:
    """Whether the RSS high-water mark can be reset and read (Linux)."""
    return Path("/proc/self/clear_refs").exists() and Path("/proc/self/status").exists()


def rss_mb(key: str = "VmRSS:") -> float:
    """A size field of /proc/self/status in MiB: ``"VmRSS:"`` (now) or ``"VmHWM:"`` (high-water mark)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) / 1024
    raise OSError(f"{key} not in /proc/self/status")


def reset_rss_peak() -> float:
    """Reset the RSS high-water mark to the current RSS and return that RSS in MiB."""
    Path("/proc/self/clear_refs").write_text("5")
    return rss_mb("VmRSS:")


def minor_faults() -> int:
    """Minor page faults of this process so far (``getrusage``)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
