"""metacal.meta.slots: the buffers an extra train-mode forward gets (the meta-val forward, the JVP pass).

Oracle: the same forward with clones of every buffer, which is what the slots handed out before they learned
to give a training-mode BatchNorm no running statistics at all."""

from __future__ import annotations

import torch
from torch import nn

from meta_nets import TinyBNCNN
from metacal.meta.slots import TensorSlots


class WithCounter(TinyBNCNN):
    """A buffer that is not a BatchNorm's, mutated by the forward: it must get a clone."""

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x, return_features=False):
        self.calls.add_(1)
        return super().forward(x, return_features)


def forward_with(slots, model, x, buffers):
    with torch.no_grad(), slots.swapped(buffers):
        return model(x)


def test_scratch_forward_equals_a_forward_with_cloned_buffers_and_touches_nothing():
    torch.manual_seed(0)
    model = WithCounter().train()
    x = torch.randn(8, 1, 6, 6)
    model(x)  # running statistics away from their initial values
    slots = TensorSlots(model)
    before = {n: b.clone() for n, b in model.named_buffers()}
    cloned = {n: b.clone() for n, b in model.named_buffers()}
    expected = forward_with(slots, model, x, cloned)
    scratch = slots.scratch_buffers()
    got = forward_with(slots, model, x, scratch)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    for name, b in model.named_buffers():  # the real buffers are untouched
        torch.testing.assert_close(b, before[name], rtol=0, atol=0, msg=name)
    norms = [n for n in scratch if n.startswith("body.") and ("running" in n or "num_batches" in n)]
    assert len(norms) == 6 and all(scratch[n] is None for n in norms)  # 2 BatchNorms × 3 statistics
    assert scratch["calls"] is not None and int(scratch["calls"]) == 2  # a clone, and it was the one mutated
    assert int(model.calls) == 1


def test_an_eval_mode_batchnorm_reads_its_real_running_statistics():
    torch.manual_seed(0)
    model = TinyBNCNN().train()
    x = torch.randn(8, 1, 6, 6)
    model(x)
    frozen = model.body[1].eval()  # a frozen BatchNorm inside a training network (fine-tuning)
    slots = TensorSlots(model)
    scratch = slots.scratch_buffers()
    assert scratch["body.1.running_mean"] is frozen.running_mean  # read, never written in eval mode
    assert scratch["body.4.running_mean"] is None
    expected = forward_with(slots, model, x, {n: b.clone() for n, b in model.named_buffers()})
    torch.testing.assert_close(forward_with(slots, model, x, scratch), expected, rtol=0, atol=0)
    assert isinstance(frozen, nn.BatchNorm2d) and not frozen.training
