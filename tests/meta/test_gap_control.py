"""metacal.auto_gamma in a training loop of one's own: the example of docs/auto_gamma.md runs as written, and on the
same seed, data and initial weights it moves γ exactly as metacal's trainer does with configs/methods/auto_gamma.yaml."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import ConcatDataset, TensorDataset

import metacal
from metacal.losses import build

REPO = Path(__file__).resolve().parents[2]
EPOCHS = 12


def readme_example() -> str:
    text = (REPO / "docs" / "auto_gamma.md").read_text()
    section = text[text.index("\n## Your own training loop\n"):]
    return re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)


def noisy_mixture(n: int, seed: int) -> TensorDataset:
    """Three overlapping Gaussian classes in 10 dimensions with 15% of labels flipped: an MLP fits them and turns
    over-confident on held-out data, so γ has to rise."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (n,), generator=g)
    x = torch.randn(n, 10, generator=g) + 1.5 * nn.functional.one_hot(y, 10).float()
    flip = torch.rand(n, generator=g) < 0.15
    y = torch.where(flip, torch.randint(0, 3, (n,), generator=g), y)
    return TensorDataset(x, y)


class EpochSeeded:
    """Batches in the order metacal's train loader gives them: pass e (from 0) is randperm(N) under a generator
    seeded with run.seed + e (accelerate's seedable sampler, metacal/train/setup.py)."""

    def __init__(self, dataset: TensorDataset, batch_size: int, seed: int = 0) -> None:
        self.dataset, self.batch_size, self.seed, self.epoch = dataset, batch_size, seed, 0

    def __iter__(self):
        perm = torch.randperm(len(self.dataset), generator=torch.Generator().manual_seed(self.seed + self.epoch))
        self.epoch += 1
        x, y = self.dataset.tensors
        for index in perm.split(self.batch_size):
            yield x[index], y[index]


@pytest.mark.slow
def test_the_readme_loop_moves_gamma_as_the_trainer_does(tmp_path, capsys):
    train, val, meta_val = noisy_mixture(512, 0), noisy_mixture(400, 1), noisy_mixture(400, 2)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 128), nn.ReLU(), nn.Linear(128, 3))
    trained_by_metacal = copy.deepcopy(model)

    # the user's loop: the page's block, its names given here; batches in the order of metacal's train loader
    train_loader = EpochSeeded(train, batch_size=128)
    held_out = ConcatDataset([meta_val, val])  # what measure_on: [meta_val, val] measures
    namespace = {"model": model, "held_out": held_out, "train_loader": train_loader, "epochs": EPOCHS}
    exec(readme_example(), namespace)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == EPOCHS and printed[0].startswith("0 {'gamma_trained': 1.0, 'gamma': ")
    auto = namespace["auto"]

    # the trainer on the same data, weights and seed
    result = metacal.fit(trained_by_metacal, train, val=val, meta_val=meta_val,
                         config=REPO / "configs" / "methods" / "auto_gamma.yaml", run_dir=tmp_path / "run",
                         overrides=[f"schedule.epochs={EPOCHS}", "eval.bootstrap=0", "logging.tensorboard=false",
                                    "logging.progress_bar=false", "logging.reliability_every=0"])
    history = [h["train"] for h in result.state.history]
    trainer_gammas = [h["auto_gamma"] for h in history]
    ours = [eval(line.split(" ", 1)[1])["gamma"] for line in printed]  # noqa: S307 (our own printed dicts)
    assert ours == trainer_gammas
    assert len(set(ours)) >= 3  # γ moved: the comparison is not of two constants
    assert auto.last["gap"] == pytest.approx(history[-1]["auto_gap"], abs=1e-6)


def test_bad_options_are_one_line_errors_naming_the_argument():
    held_out = noisy_mixture(50, 0)
    with pytest.raises(ValueError, match=r"^first_step \(the first step of the automatic gamma\) must be > 0"):
        metacal.auto_gamma(build("focal", gamma=1.0), held_out, first_step=0.0)
    with pytest.raises(ValueError, match=r"^start \(the start of gamma, 12.0\) must be in \[0.0, max = 10.0\]"):
        metacal.auto_gamma(build("focal", gamma=1.0), held_out, start=12.0)
    with pytest.raises(ValueError, match="measure_on belong to metacal's trainer"):
        metacal.auto_gamma(build("focal", gamma=1.0), held_out, measure_on=["val"])
    with pytest.raises(ValueError, match=r"^auto_gamma has no option\(s\) bnad; valid: start, first_step, band, "):
        metacal.auto_gamma(build("focal", gamma=1.0), held_out, bnad=1.0)
    with pytest.raises(ValueError, match="has none"):
        metacal.auto_gamma(build("ce"), held_out)


def test_it_owns_the_scalar_and_its_state_round_trips():
    torch.manual_seed(0)
    model, held_out = nn.Sequential(nn.Linear(10, 3)), noisy_mixture(200, 3)
    loss = build("label_smoothing", epsilon=0.0)
    auto = metacal.auto_gamma(loss, held_out, start=0.1, first_step=0.05)
    assert loss.epsilon == 0.1  # the start is written into the loss at once
    numbers = auto.update(model)
    assert numbers["epsilon_trained"] == 0.1 and loss.epsilon == numbers["epsilon"] == auto.value
    again = metacal.auto_gamma(build("label_smoothing", epsilon=0.0), held_out)
    again.load_state_dict(auto.state_dict())
    assert again.value == auto.value and again.loss.epsilon == auto.value and again.last == auto.last
