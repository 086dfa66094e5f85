"""experiments/benchmark/kernels.py, cuda_graphs.py and graph_equivalence.py on a machine without CUDA."""

from __future__ import annotations

import pytest
import torch


def test_kernel_count_orders_the_steps_by_the_work_they_do():
    """On the CPU the count is aten calls per step: the meta steps add a tangent pass (jvp) or a double
    backward (higher) to the focal step, which adds the γ-Net to the plain step; ``head`` adds a meta-val
    forward only, so it sits between focal and jvp."""
    from experiments.benchmark.kernels import bench_steps

    n = bench_steps(torch.device("cpu"), steps=1)
    assert 0 < n["plain"] < n["focal"] < n["head"] < n["jvp"] < n["higher"]
    assert n["jvp"] > 2 * n["focal"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the probe would run")
def test_cuda_graph_probe_skips_in_one_line_without_cuda(capsys):
    from experiments.benchmark.cuda_graphs import main

    assert main([]) == 0
    assert capsys.readouterr().out.strip().splitlines() == ["cuda_graphs: no CUDA device here; nothing measured"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the comparison would run")
def test_graph_equivalence_skips_in_one_line_without_cuda(capsys):
    from experiments.benchmark.graph_equivalence import main

    assert main([]) == 0
    assert capsys.readouterr().out.strip().splitlines() == ["graph_equivalence: no CUDA device here; nothing compared"]
