"""metacal.train.process_settings: what a run sets per process, and that retaining freed memory stops the page
faults of re-allocation (checked in fresh processes: the setting is process-wide)."""

import platform
from types import SimpleNamespace

import pytest
import torch

import metacal.train.process_settings as settings


def run_cfg(**overrides):
    base = dict(torch_threads=None, deterministic=False, malloc_retain=True)
    return SimpleNamespace(**{**base, **overrides})


@pytest.mark.parametrize(("device", "enabled", "expected"), [
    ("cpu", True, 1), ("cpu", False, 0), ("cuda", True, 0),
])
def test_configure_process_retains_freed_memory_only_for_cpu_runs(monkeypatch, device, enabled, expected):
    calls = []
    monkeypatch.setattr(settings, "retain_freed_memory", lambda: calls.append(1) or True)
    settings.configure_process(run_cfg(malloc_retain=enabled), torch.device(device))
    assert len(calls) == expected


def test_configure_process_sets_threads():
    settings.configure_process(run_cfg(torch_threads=2), torch.device("cpu"))
    assert torch.get_num_threads() == 2  # the autouse fixture restores the previous count


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt settings are glibc's")
def test_retain_freed_memory_stops_page_faults_of_reallocation():
    """In a fresh process (the setting is process-wide): a step that holds eight 8 MiB tensors at once and
    then frees them all (as a training step does with its activations) faults its 64 MiB in again every
    time with glibc's static defaults (128 KiB mmap and trim thresholds, pinned by the environment: the
    dynamic thresholds depend on what the imports happened to free), and not at all once
    ``retain_freed_memory`` has overridden them."""
    import os
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    code = textwrap.dedent("""
        import sys, torch
        from experiments.benchmark.memory import minor_faults
        from metacal.train.process_settings import retain_freed_memory
        if sys.argv[1] == "retain":
            assert retain_freed_memory()
        def step():
            return [torch.ones(2 * 2**20) for _ in range(8)]  # 8 × 8 MiB alive together, freed on return
        for _ in range(3):
            step()
        before = minor_faults()
        for _ in range(10):
            step()
        print(minor_faults() - before)
    """)
    faults = {}
    for mode in ("default", "retain"):
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072", MALLOC_TRIM_THRESHOLD_="131072")
        out = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, check=True,
                             env=env, cwd=Path(__file__).resolve().parents[2])  # the checkout: experiments/
        faults[mode] = int(out.stdout.strip().splitlines()[-1])
    assert faults["default"] > 10 * 8 * 1500, faults  # 8 × 2,048 fresh pages per step
    assert faults["retain"] < 500, faults
