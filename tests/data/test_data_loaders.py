"""make_loader (seeded plain DataLoader) and InfiniteLoader (endless, reshuffled, resumable, sharded)."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from metacal.data.loaders import InfiniteLoader, make_loader


def index_data(n: int) -> TensorDataset:
    """Item i = (tensor([i, 2i]) as float, label i % 3): batches reveal which indices they hold."""
    i = torch.arange(n)
    return TensorDataset(torch.stack([i, 2 * i], 1).float(), i % 3)


def ids(batch) -> list[int]:
    return batch[0][:, 0].long().tolist()


def test_make_loader_is_a_seeded_plain_dataloader():
    ds = index_data(20)
    a, b = make_loader(ds, 4, shuffle=True, seed=3), make_loader(ds, 4, shuffle=True, seed=3)
    assert type(a) is DataLoader and a.pin_memory == torch.cuda.is_available()
    epoch_a1, epoch_b1 = [i for x in a for i in ids(x)], [i for x in b for i in ids(x)]
    assert epoch_a1 == epoch_b1 and sorted(epoch_a1) == list(range(20))
    epoch_a2 = [i for x in a for i in ids(x)]
    assert epoch_a2 != epoch_a1 and sorted(epoch_a2) == list(range(20))  # reshuffled each epoch
    c = make_loader(ds, 4, shuffle=True, seed=4)
    assert [i for x in c for i in ids(x)] != epoch_a1
    plain = make_loader(ds, 6, shuffle=False, seed=0, drop_last=True)
    assert [ids(x) for x in plain] == [list(range(0, 6)), list(range(6, 12)), list(range(12, 18))]
    with pytest.raises(ValueError, match="batch_size"):
        make_loader(ds, 0, shuffle=True)


def test_make_loader_can_be_sharded_by_accelerate():
    """accelerate's prepare_data_loader splits one seeded epoch into disjoint per-process shards."""
    pytest.importorskip("accelerate")
    from accelerate.data_loader import prepare_data_loader

    ds, shards = index_data(40), []
    for rank in range(2):
        loader = make_loader(ds, 4, shuffle=True, seed=3)
        prepared = prepare_data_loader(loader, device=torch.device("cpu"), num_processes=2, process_index=rank,
                                       put_on_device=False)
        shards.append([i for batch in prepared for i in ids(batch)])
    assert len(shards[0]) == len(shards[1]) == 20
    assert not set(shards[0]) & set(shards[1]) and set(shards[0]) | set(shards[1]) == set(range(40))


def test_infinite_runs_past_the_end_with_fresh_permutations():
    loader = InfiniteLoader(index_data(50), batch_size=8, seed=1, drop_last=False)
    assert loader.batches_per_pass == 7
    passes = []
    for _ in range(5):
        order = [i for _ in range(loader.batches_per_pass) for i in ids(next(loader))]
        assert sorted(order) == list(range(50))  # every pass is a permutation
        passes.append(order)
    assert len({tuple(p) for p in passes}) == 5  # and passes differ (not a replay)
    assert loader.state_dict()["pass_index"] == 5 and loader.state_dict()["position"] == 0
    x, y = next(loader)
    assert x.shape == (8, 2) and x.dtype == torch.float32 and y.dtype == torch.int64
    assert torch.equal(y, x[:, 0].long() % 3)  # default collation keeps inputs and labels paired


def test_drop_last_gives_full_batches_and_independent_of_global_rng():
    a = InfiniteLoader(index_data(50), batch_size=8, seed=2)
    torch.manual_seed(1)
    first = [ids(next(a)) for _ in range(12)]
    assert all(len(b) == 8 for b in first)
    assert len(set(sum(first[:6], []))) == 48  # one pass: 6 batches, no repeats
    b = InfiniteLoader(index_data(50), batch_size=8, seed=2)
    torch.manual_seed(99)
    torch.rand(5)
    assert [ids(next(b)) for _ in range(12)] == first
    c = InfiniteLoader(index_data(50), batch_size=8, seed=3)
    assert [ids(next(c)) for _ in range(12)] != first


@pytest.mark.parametrize("num_workers", [0, 2])
def test_state_dict_resume_continues_identically(num_workers):
    ds = index_data(30)
    ref = InfiniteLoader(ds, batch_size=4, seed=7, num_workers=num_workers)
    for _ in range(10):  # 7 batches per pass: stop in the middle of pass 1
        next(ref)
    state = ref.state_dict()
    assert (state["pass_index"], state["position"]) == (1, 3)
    expected = [ids(next(ref)) for _ in range(12)]
    resumed = InfiniteLoader(ds, batch_size=4, seed=7, num_workers=num_workers)
    next(resumed)  # consumed some of its own stream first: load_state_dict must reset it
    resumed.load_state_dict(state)
    assert [ids(next(resumed)) for _ in range(12)] == expected
    if num_workers:  # workers do not change the stream
        plain = InfiniteLoader(ds, batch_size=4, seed=7)
        plain.load_state_dict(state)
        assert [ids(next(plain)) for _ in range(12)] == expected


def test_state_dict_rejects_other_settings():
    state = InfiniteLoader(index_data(30), batch_size=4, seed=7).state_dict()
    with pytest.raises(ValueError, match="batch_size"):
        InfiniteLoader(index_data(30), batch_size=5, seed=7).load_state_dict(state)
    with pytest.raises(ValueError, match="seed"):
        InfiniteLoader(index_data(30), batch_size=4, seed=8).load_state_dict(state)


def test_rank_slices_are_disjoint_every_pass():
    ds, world = index_data(50), 3
    loaders = [InfiniteLoader(ds, batch_size=4, seed=5, rank=r, world_size=world) for r in range(world)]
    assert all(ld.batches_per_pass == 4 for ld in loaders)  # 16 per rank → 4 batches of 4
    for p in range(3):
        per_rank = [set(i for _ in range(4) for i in ids(next(ld))) for ld in loaders]
        assert all(len(s) == 16 for s in per_rank)
        assert not (per_rank[0] & per_rank[1] or per_rank[0] & per_rank[2] or per_rank[1] & per_rank[2])
        # together they are the first 48 positions of the pass's shared permutation
        assert set.union(*per_rank) == set(loaders[0].permutation(p)[:48].tolist())
    # one saved state (e.g. rank 0's) resumes any rank; the rank is kept
    state = loaders[0].state_dict()
    fresh = InfiniteLoader(ds, batch_size=4, seed=5, rank=2, world_size=world)
    fresh.load_state_dict(state)
    assert fresh.rank == 2 and ids(next(fresh)) == ids(next(loaders[2]))


def test_bad_infinite_settings_raise():
    with pytest.raises(ValueError, match="fewer than batch_size"):
        InfiniteLoader(index_data(10), batch_size=8, seed=0, world_size=2)
    with pytest.raises(ValueError, match="rank"):
        InfiniteLoader(index_data(10), batch_size=2, seed=0, rank=2, world_size=2)
