"""experiments.benchmark.memory: the saved-tensor meter counts each storage once and releases it with the graph;
the RSS high-water mark rises by what a step allocates."""

import gc
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from experiments.benchmark.memory import SavedTensorMeter, rss_available, rss_mb


def test_saved_tensor_meter_counts_storages_once_and_releases_them():
    meter = SavedTensorMeter()
    x = torch.randn(1000, requires_grad=True)  # 4,000 bytes
    with torch.autograd.graph.saved_tensors_hooks(meter.pack, meter.unpack):
        y = x.exp()  # exp saves its output: 4,000 bytes
        z = (y * y).sum()  # mul saves y twice: the same storage, counted once
    assert meter.live == 4000 and meter.peak == 4000
    assert len(meter.refs) == 1 and next(iter(meter.refs.values()))[0] == 3
    z.backward()  # frees the graph's saved tensors
    del y, z
    gc.collect()
    assert meter.live == 0 and meter.refs == {}
    assert meter.peak == 4000
    meter.reset()
    assert meter.peak == 0
    torch.testing.assert_close(x.grad, 2 * torch.exp(2 * x.detach()))


def test_saved_tensor_meter_distinct_storages_add_up():
    meter = SavedTensorMeter()
    a = torch.randn(256, requires_grad=True)
    b = torch.randn(512, dtype=torch.float64, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(meter.pack, meter.unpack):
        out = (a.exp().sum() + b.exp().sum())
    assert meter.peak == 256 * 4 + 512 * 8
    del out


@pytest.mark.skipif(not rss_available(), reason="needs Linux /proc/self/clear_refs")
def test_rss_high_water_mark_sees_a_large_allocation():
    """In a fresh process (a long-lived test process has other threads allocating): after a reset the mark
    equals the current RSS, and touching a 64 MiB array raises it by at least 60 MiB."""
    code = textwrap.dedent("""
        import numpy as np
        from experiments.benchmark.memory import reset_rss_peak, rss_mb
        base = reset_rss_peak()
        at_reset = rss_mb("VmHWM:") - base
        block = np.ones(64 * 2**20 // 8)  # 64 MiB, touched
        print(at_reset, rss_mb("VmHWM:") - base)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[3])  # the checkout: experiments/
    at_reset, grown = map(float, out.stdout.split())
    assert abs(at_reset) < 2.0
    assert grown >= 60
    with pytest.raises(OSError):
        rss_mb("NoSuchField:")
