"""metacal.distributed: no-ops without a process group; with two gloo processes the in-place mean, sum and
broadcast, the mean equal bit for bit to accelerate's ``reduce(..., "mean")`` (all-reduce sum, then ÷ n)."""

from __future__ import annotations

import pytest
import torch

from metacal import distributed


def test_one_process_is_a_no_op():
    t = torch.tensor([1.5, -2.0])
    distributed.average_over_processes([t])
    distributed.sum_over_processes([t])
    distributed.broadcast_from_main([t])
    assert distributed.world_size() == 1 and distributed.process_group_backend() is None
    assert torch.equal(t, torch.tensor([1.5, -2.0]))
    assert distributed.mean_over_processes(0.1, "cpu") == 0.1  # not rounded through float32


def _worker(rank: int, store: str, queue) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        values = torch.tensor([0.1, 1.0 / 3.0]) * (rank + 1)
        mean, total, main = values.clone(), values.clone(), values.clone()
        distributed.average_over_processes([mean])
        distributed.sum_over_processes([total])
        distributed.broadcast_from_main([main])
        reference = values.clone()  # what accelerate's reduce(values, "mean") does on a process group
        dist.all_reduce(reference, dist.ReduceOp.SUM)
        reference /= 2
        scalar = distributed.mean_over_processes(0.1 * (rank + 1), "cpu")
        tensors = [t.tolist() for t in (mean, total, main, reference)]  # plain lists: no shared memory to outlive
        queue.put((rank, distributed.world_size(), str(distributed.process_group_backend()), *tensors, scalar))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_processes(tmp_path):
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(r, str(tmp_path / "store"), queue)) for r in range(2)]
    for p in procs:
        p.start()
    results = dict((r[0], r[1:]) for r in (queue.get(timeout=120) for _ in procs))
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    base = torch.tensor([0.1, 1.0 / 3.0])
    for rank in (0, 1):
        n, backend, mean, total, main, reference, scalar = results[rank]
        assert (n, backend) == (2, "gloo")
        assert total == (base + 2 * base).tolist() and main == base.tolist()
        assert mean == reference == ((base + 2 * base) / 2).tolist()
        assert scalar == float((torch.tensor([0.1]) + torch.tensor([0.2])) / 2)
