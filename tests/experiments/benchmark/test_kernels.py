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


def test_without_fashion_mnist_the_trainer_rows_are_left_out_in_one_line(monkeypatch, tmp_path, capsys):
    """The bench rows need no data (stubbed here: they are counted above); the trainer's rows read Fashion-MNIST."""
    import json

    import experiments.benchmark.kernels as kernels

    monkeypatch.setattr(kernels, "bench_steps", lambda device, steps: {"plain": 7.0})
    monkeypatch.setenv("METACAL_NO_SYSTEM_DATASETS", "1")
    monkeypatch.setenv("METACAL_DATA", str(tmp_path / "empty"))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert kernels.main(["--steps", "1", "--cpu", "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    left_out = [line for line in lines if line.startswith("the trainer's rows are left out: ")]
    assert len(left_out) == 1 and "dataset 'fashion_mnist' not found" in left_out[0]
    assert json.loads(lines[-1]) == {"device": "cpu", "unit": "aten calls", "bench": {"plain": 7.0}, "trainer": {}}
