"""Seeded data loaders.

``make_loader`` returns a plain :class:`torch.utils.data.DataLoader` (accelerate's ``prepare`` shards it
across processes); its shuffling draws from a ``torch.Generator`` seeded with ``seed``, so epoch e
of a run is the same permutation on every machine. With ``batched`` (default), an in-memory dataset is read
a whole batch at a time (:mod:`metacal.data.batched`): the same samples in the same order, the same tensors.

``InfiniteLoader`` streams batches forever (for the meta-validation stream of the bilevel step): pass p
is the permutation ``randperm(N)`` drawn from a generator seeded by (seed, p), so every pass is a fresh
permutation (unlike ``itertools.cycle``, which replays cached batches — a known issue of Bohdal et al.'s
code, docs/conventions.md#data-splits). With ``world_size`` > 1, rank r takes ``perm[r::world_size]`` truncated to
⌊N / world_size⌋ samples, so ranks see disjoint samples in every pass. ``state_dict()`` holds
(pass index, position) so a resumed run continues the same stream.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset
from torch.utils.data import default_collate

from .batched import as_batch, batched_view
from .seeding import generator as seeded_generator


def seed_worker(worker_id: int) -> None:
    """Seed numpy and python RNGs in a worker from torch's per-worker seed (set from the loader's generator)."""
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)


def make_loader(dataset: Dataset, batch_size: int, shuffle: bool, seed: int = 0, drop_last: bool = False,
                num_workers: int = 0, pin_memory: bool | None = None,
                collate_fn: Callable | None = None, batched: bool = True) -> DataLoader:
    """A plain DataLoader with seeded shuffling and worker seeding; ``pin_memory`` defaults to CUDA availability.
    ``batched``: whole batches from an in-memory dataset (:func:`batch_source`)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if num_workers < 0:
        raise ValueError(f"num_workers must be >= 0, got {num_workers}")
    dataset, collate_fn = batch_source(dataset, collate_fn, batched)
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last,
                      num_workers=num_workers,
                      pin_memory=torch.cuda.is_available() if pin_memory is None else pin_memory,
                      collate_fn=collate_fn, worker_init_fn=seed_worker if num_workers > 0 else None,
                      generator=torch.Generator().manual_seed(int(seed)), persistent_workers=num_workers > 0)


def batch_source(dataset: Dataset, collate_fn: Callable | None, batched: bool) -> tuple[Dataset, Callable | None]:
    """The dataset and collate function a loader reads: the :func:`~metacal.data.batched.batched_view` of an
    in-memory dataset (with ``batched`` and no collate function of the caller's), else the dataset as given."""
    view = batched_view(dataset) if batched and collate_fn is None else None
    return (dataset, collate_fn) if view is None else (view, as_batch)


def rank_batches(seed: int, num_samples: int, pass_index: int, batch_size: int, rank: int = 0,
                 world_size: int = 1, drop_last: bool = True) -> list[torch.Tensor]:
    """Index batches of one rank in one pass: ``randperm(N)`` seeded by (seed, pass), then
    ``perm[rank::world_size][:N // world_size]`` cut into batches (incomplete last one dropped if asked)."""
    perm = torch.randperm(num_samples, generator=seeded_generator(seed, pass_index))
    mine = perm[rank::world_size][:num_samples // world_size]
    batches = list(torch.split(mine, batch_size))
    if drop_last and batches and len(batches[-1]) < batch_size:
        batches.pop()
    return batches


class _BatchStream:
    """Index batches of one rank from (pass_index, position) onwards, forever. Holds no reference to the
    InfiniteLoader (a cycle would delay the worker shutdown until the garbage collector runs)."""

    def __init__(self, seed: int, num_samples: int, batch_size: int, rank: int, world_size: int,
                 drop_last: bool, pass_index: int, position: int) -> None:
        self.args = (seed, num_samples)
        self.kwargs = dict(batch_size=batch_size, rank=rank, world_size=world_size, drop_last=drop_last)
        self.pass_index, self.position = pass_index, position

    def __iter__(self) -> Iterator[list[int]]:
        p, pos = self.pass_index, self.position
        while True:
            for batch in rank_batches(*self.args, pass_index=p, **self.kwargs)[pos:]:
                yield batch.tolist()
            p, pos = p + 1, 0


class InfiniteLoader:
    """``next(loader)`` forever; a new seeded permutation every pass; resumable via ``state_dict``.

    ``drop_last`` (default True) drops each pass's incomplete final batch so all batches have
    ``batch_size`` samples. ``num_workers``/``pin_memory``/``collate_fn`` behave as in DataLoader; ``batched`` as
    in :func:`make_loader`.
    """

    def __init__(self, dataset: Dataset, batch_size: int, seed: int = 0, *, rank: int = 0, world_size: int = 1,
                 drop_last: bool = True, num_workers: int = 0, pin_memory: bool | None = None,
                 collate_fn: Callable | None = None, batched: bool = True) -> None:
        n = len(dataset)  # type: ignore[arg-type]
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if int(seed) < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
        self.per_rank = n // world_size
        if self.per_rank == 0:
            raise ValueError(f"dataset of {n} samples split over {world_size} rank(s) gives none per rank; it needs "
                             f"at least {world_size} samples")
        if drop_last and self.per_rank < batch_size:
            raise ValueError(f"dataset of {n} samples split over {world_size} rank(s) gives {self.per_rank} per "
                             f"rank, fewer than batch_size={batch_size}; pass batch_size <= {self.per_rank} or "
                             "drop_last=False")
        self.dataset, self.batch_size, self.seed = dataset, batch_size, int(seed)
        self.rank, self.world_size, self.drop_last = rank, world_size, drop_last
        self.num_samples = n
        self.num_workers = num_workers
        self.pin_memory = torch.cuda.is_available() if pin_memory is None else pin_memory
        self.source, self.collate_fn = batch_source(dataset, collate_fn, batched)
        self.collate_fn = self.collate_fn or default_collate
        self.pass_index, self.position = 0, 0
        self._iterator: Iterator | None = None

    @property
    def batches_per_pass(self) -> int:
        full, rest = divmod(self.per_rank, self.batch_size)
        return full if self.drop_last or rest == 0 else full + 1

    def permutation(self, pass_index: int) -> torch.Tensor:
        """The permutation of all N indices used in pass ``pass_index`` (identical on every rank)."""
        return torch.randperm(self.num_samples, generator=seeded_generator(self.seed, pass_index))

    def pass_batches(self, pass_index: int) -> list[torch.Tensor]:
        """This rank's index batches in pass ``pass_index``."""
        return rank_batches(self.seed, self.num_samples, pass_index, self.batch_size, self.rank,
                            self.world_size, self.drop_last)

    def _make_iterator(self) -> Iterator:
        stream = _BatchStream(self.seed, self.num_samples, self.batch_size, self.rank, self.world_size,
                              self.drop_last, self.pass_index, self.position)
        loader = DataLoader(self.source, batch_sampler=stream, num_workers=self.num_workers,
                            pin_memory=self.pin_memory, collate_fn=self.collate_fn,
                            worker_init_fn=seed_worker if self.num_workers > 0 else None,
                            generator=seeded_generator(self.seed, self.pass_index, self.position))
        return iter(loader)

    def close(self) -> None:
        """Stop worker processes now (they are also stopped when the loader is deleted)."""
        self._iterator = None

    def __iter__(self) -> "InfiniteLoader":
        return self

    def __next__(self) -> Any:
        if self._iterator is None:
            self._iterator = self._make_iterator()
        batch = next(self._iterator)
        self.position += 1
        if self.position == self.batches_per_pass:
            self.pass_index, self.position = self.pass_index + 1, 0
        return batch

    def state_dict(self) -> dict[str, int | bool]:
        """Stream position (batches already returned). Identical on all ranks, so one saved copy serves all."""
        return {"pass_index": self.pass_index, "position": self.position, "seed": self.seed,
                "batch_size": self.batch_size, "world_size": self.world_size, "num_samples": self.num_samples,
                "drop_last": self.drop_last, "rank": self.rank}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state``; the stream settings must match (the rank may differ, it is kept)."""
        for key in ("seed", "batch_size", "world_size", "num_samples", "drop_last"):
            if key in state and state[key] != getattr(self, key):
                raise ValueError(f"InfiniteLoader state has {key}={state[key]!r} but this loader has "
                                 f"{getattr(self, key)!r}; build the loader with the same settings to resume")
        pass_index, position = int(state["pass_index"]), int(state["position"])
        if pass_index < 0 or not 0 <= position < self.batches_per_pass:
            raise ValueError(f"invalid InfiniteLoader state: pass {pass_index}, position {position} "
                             f"(a pass has {self.batches_per_pass} batches)")
        self.pass_index, self.position = pass_index, position
        self._iterator = None
