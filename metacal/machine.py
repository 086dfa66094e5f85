"""The machine that trains or writes a page: platform, CPU, core count, torch's CPU kernel path, Python/torch/numpy
versions (read, never typed), for a run's runtime.json and the results pages."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_model() -> str:
    """CPU model name from /proc/cpuinfo (Linux), else platform.processor(), else "unknown"."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def cpu_kernels() -> str:
    """The vector instruction set torch's CPU kernels use here (``torch.backends.cpu.get_cpu_capability()``:
    e.g. AVX2, AVX512). Runs on paths that differ round differently, so the same seed trains to slightly
    different numbers (README, quickstart); "unknown" where torch cannot say."""
    import torch

    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except (AttributeError, RuntimeError):
        return "unknown"


def machine_info() -> dict[str, str]:
    """Platform string, CPU model, logical cores, torch's CPU kernel path, Python, torch (with CUDA availability)
    and numpy versions."""
    import numpy
    import torch

    cuda = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return {
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cores": str(os.cpu_count()),
        "cpu kernels": cpu_kernels(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda device": cuda,
        "numpy": numpy.__version__,
    }


def machine_markdown() -> str:
    """One Markdown bullet per entry of :func:`machine_info`."""
    return "\n".join(f"- {k}: {v}" for k, v in machine_info().items()) + "\n"
