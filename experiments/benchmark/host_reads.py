"""Counting the host reads of training steps: every call that hands a tensor's value to Python or copies it to
the host (``Tensor.item``, ``tolist``, ``__float__``, ``__int__``, ``__bool__``, ``cpu``) — on a GPU each one
makes the CPU wait until the device has finished every queued kernel.

:class:`HostReadCounter` patches those methods on ``torch.Tensor`` while it is entered and counts calls only
while ``counting`` is True. :func:`counted_steps` switches it on for the body of the training loop and off while
the loader produces the next batch, so the count covers the iterations — step, finiteness bookkeeping, running
sums, TensorBoard, progress bar, stop signals, periodic checkpoints — and leaves out the data loading and the
epoch-end evaluation, which read by design."""

from __future__ import annotations

from collections import Counter
import sys
from contextlib import contextmanager
from typing import Any, Iterator

import torch

#: The tensor methods that read a value back to the host.
READS = ("item", "tolist", "__float__", "__int__", "__bool__", "cpu")
#: Callers whose reads are host-side bookkeeping (see the module docstring), by path fragment.
HOST_SIDE = ("/torch/optim/", "/torch/utils/data/", "/metacal/data/")


class HostReadCounter:
    """``with HostReadCounter() as counter:`` patches :data:`READS`; ``counter.calls`` counts them by name while
    ``counter.counting`` is True (nested reads inside a counted read, e.g. ``__float__`` calling ``item``, are
    counted once); ``counter.steps`` is the number of loop iterations :func:`counted_steps` saw."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.counting = False
        self.steps = 0
        self._depth = 0
        self._saved: dict[str, Any] = {}

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    def per_step(self) -> float:
        """Reads per counted iteration (0 before any)."""
        return self.total / self.steps if self.steps else 0.0

    def _wrap(self, name: str, original: Any) -> Any:
        def counted(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if self.counting and self._depth == 0:
                caller = sys._getframe(1).f_code.co_filename.replace("\\", "/")
                if not any(part in caller for part in HOST_SIDE):
                    self.calls[name] += 1
            self._depth += 1
            try:
                return original(tensor, *args, **kwargs)
            finally:
                self._depth -= 1

        return counted

    def __enter__(self) -> "HostReadCounter":
        for name in READS:
            self._saved[name] = getattr(torch.Tensor, name)
            setattr(torch.Tensor, name, self._wrap(name, self._saved[name]))
        return self

    def __exit__(self, *exc: Any) -> None:
        for name, original in self._saved.items():
            setattr(torch.Tensor, name, original)
        self._saved.clear()


class CountedLoader:
    """A training loader whose iteration switches ``counter.counting`` off while the next batch is produced and
    on while the loop body runs (and off again when the loop asks for a batch it will not use)."""

    def __init__(self, loader: Any, counter: HostReadCounter) -> None:
        self.loader, self.counter = loader, counter

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Any]:
        return _counted_iteration(self.loader, self.counter)


def _counted_iteration(batches: Any, counter: HostReadCounter) -> Iterator[Any]:
    iterator = iter(batches)
    try:
        while True:
            counter.counting = False
            try:
                batch = next(iterator)
            except StopIteration:
                return
            counter.steps += 1
            counter.counting = True
            yield batch
    finally:
        counter.counting = False


@contextmanager
def counted_steps(counter: HostReadCounter) -> Iterator[HostReadCounter]:
    """Within this block, :func:`metacal.train.train` counts the host reads of its training iterations (the
    run's train loader and accelerate's ``skip_first_batches`` of a resume are wrapped in :class:`CountedLoader`);
    the last iteration of an epoch may be counted once more than it ran when the loop stops at
    ``run.max_steps_per_epoch`` (the loop asks for no further batch then)."""
    from metacal.train import loop

    original_setup = loop.setup

    def setup(*args: Any, **kwargs: Any) -> Any:
        run = original_setup(*args, **kwargs)
        run.train_loader = CountedLoader(run.train_loader, counter)
        original_skip = run.accelerator.skip_first_batches
        run.accelerator.skip_first_batches = lambda loader, n: CountedLoader(
            original_skip(getattr(loader, "loader", loader), n), counter)
        return run

    loop.setup = setup
    try:
        with counter:
            yield counter
    finally:
        loop.setup = original_setup
