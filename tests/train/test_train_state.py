"""The epoch's running sums a mid-epoch checkpoint holds (metacal/train/train_state.py): they round-trip, the learner's
diagnostics keep their names, and a checkpoint written before the learner named them is read under those names."""

from __future__ import annotations

import torch

from metacal.train.train_state import EpochProgress, host_values


def test_progress_round_trips_with_the_learners_named_diagnostics():
    acc = EpochProgress(loss_sum=torch.tensor(1.5, dtype=torch.float64), count=3, meta_count=2,
                        meta_sum=torch.tensor(0.25, dtype=torch.float64), gammas=[torch.tensor([1.0, 2.0])])
    acc.diagnostics = {"dJ_dgamma_offset": [0.5, torch.tensor(-0.25)], "meta_grad_norm": [torch.tensor(2.0)]}
    saved = acc.to_dict(elapsed=4.0)
    assert saved["diagnostics"] == {"dJ_dgamma_offset": [0.5, -0.25], "meta_grad_norm": [2.0]}
    back = EpochProgress.from_dict(saved)
    assert (back.loss_sum, back.meta_sum, back.count, back.meta_count, back.elapsed) == (1.5, 0.25, 3, 2, 4.0)
    assert torch.equal(back.gamma_values(), torch.tensor([1.0, 2.0]))
    back.diagnostics["dJ_dgamma_offset"].append(torch.tensor(1.0))  # the resumed epoch goes on adding
    assert host_values(back.diagnostics["dJ_dgamma_offset"]).tolist() == [0.5, -0.25, 1.0]


def test_a_checkpoint_from_before_the_names_is_read_under_them():
    old = {"loss_sum": 1.0, "meta_sum": 0.0, "count": 2, "meta_count": 2, "gammas": torch.empty(0), "elapsed": 1.0,
           "offset_grads": [-1.0, 2.0], "meta_grad_norms": [3.0, 4.0], "level_grads": []}
    back = EpochProgress.from_dict(old)
    assert back.diagnostics == {"dJ_dgamma_offset": [-1.0, 2.0], "meta_grad_norm": [3.0, 4.0]}
    assert back.gamma_values() is None
