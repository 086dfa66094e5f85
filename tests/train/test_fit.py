"""``metacal.fit``: one's own datasets and network from Python, into the CLI's run directory.

A stock torchvision ResNet-18 trains unedited (FLγ-SECE, its features read by a hook); without val/meta-val
the seeded 8:1:1 split is made (the saved val predictions are exactly the split's samples) and without test
the test entries are null; every registered loss and every meta method of configs/methods runs; a resume
through fit ends where an uninterrupted run ends, the CLI refuses it in one line and writes nothing; a
fine-tuning start from a checkpoint with a frozen layer keeps that layer at the checkpoint's values; bad
input is one line and leaves no run directory.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from safetensors.torch import load_file
from torch import nn
from torch.utils.data import Dataset, TensorDataset

import metacal
from metacal import losses, models
from metacal.data import DataFormatError
from metacal.data.splits import split_indices
from metacal.models import ContractError
from metacal.train import ConfigError

REPO = Path(__file__).resolve().parents[2]
METHODS = REPO / "configs" / "methods"
QUIET = ["logging.tensorboard=false", "logging.progress_bar=false", "logging.reliability_every=0",
         "run.torch_threads=1"]
ONE_EPOCH = ["schedule.epochs=1", "schedule.milestones=[1]"]
SMALL = ["data.batch_size=20", "data.eval_batch_size=50", "optim.lr=0.05"]
META_SMALL = "meta.batch_size=10"  # only with a meta step: otherwise the override is refused as doing nothing


def blobs(n: int, k: int = 4, dim: int = 8, seed: int = 0) -> TensorDataset:
    """k Gaussian blobs in R^dim (class c has mean 2·e_c), float32 inputs, int64 labels."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % k
    x = torch.randn(n, dim, generator=g) + 2.0 * nn.functional.one_hot(y, dim).float()
    return TensorDataset(x, y)


def mlp(k: int = 4, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return models.build("mlp", num_classes=k, in_channels=8, input_shape=(8,), hidden=[16])


@pytest.mark.slow
def test_stock_torchvision_resnet18_with_flgamma_sece_writes_the_cli_run_dir(tmp_path):
    import torchvision

    g = torch.Generator().manual_seed(1)
    y = torch.arange(100) % 4
    x = torch.randn(100, 3, 16, 16, generator=g) + 0.5 * y.view(-1, 1, 1, 1)
    test = TensorDataset(torch.randn(24, 3, 16, 16, generator=g), torch.arange(24) % 4)
    torch.manual_seed(0)
    net = torchvision.models.resnet18(num_classes=4)
    fc_before = net.fc.weight.detach().clone()
    run_dir = tmp_path / "run"
    result = metacal.fit(net, TensorDataset(x, y), test=test, config=METHODS / "flgamma_sece.yaml", run_dir=run_dir,
                         overrides=[*ONE_EPOCH, *SMALL, META_SMALL, "run.max_steps_per_epoch=2", "run.torch_threads=1",
                                    "logging.progress_bar=false"])
    # the CLI's run directory, file for file
    assert {p.name for p in run_dir.iterdir()} == {"config.yaml", "runtime.json", "tensorboard", "checkpoints",
                                                   "predictions", "metrics.json", "history.json", "reliability.png",
                                                   "calibration"}  # no predictor.json: the network is the caller's
    assert {p.name for p in (run_dir / "predictions").iterdir()} == {"val.npz", "test.npz"}
    assert (run_dir / "checkpoints" / "latest" / "model.safetensors").is_file()
    assert any((run_dir / "tensorboard").iterdir())
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert (saved["data"]["name"], saved["model"]["name"]) == ("python:TensorDataset", "python:ResNet")
    assert saved["loss"]["name"] == "focal" and saved["learner"] == "gamma_net"
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics == result.metrics and result.run_dir == run_dir
    # 8:1:1 of 100 → val 10; the given test set as is; γ-Net on the test features
    assert (metrics["val"]["n"], metrics["test"]["n"], metrics["test"]["num_classes"]) == (10, 24, 4)
    assert metrics["test"]["gamma_mean"] > 0 and metrics["test_after_ts"]["temperature"] > 0
    # the user's network was wrapped, not copied: trained in place, features = fc's input (512-d)
    assert result.model.net is net and result.model.feature_dim == 512
    assert not torch.equal(net.fc.weight.detach(), fc_before)
    # the two meta steps moved the γ-Net's bias away from τ·γ0 = 0.01
    assert abs(float(result.gamma_net.bias.detach()) - 0.01) > 1e-6


def test_without_val_and_test_the_seeded_split_is_made_and_test_is_null(tmp_path):
    train = blobs(100)
    run_dir = tmp_path / "run"
    result = metacal.fit(mlp(), train, config=METHODS / "ce.yaml", run_dir=run_dir,
                         overrides=[*ONE_EPOCH, *SMALL, *QUIET, "data.seed=3"])
    m = result.metrics
    assert m["test"] is None and m["test_after_ts"] is None and m["val"]["n"] == 10
    assert sorted(p.name for p in (run_dir / "predictions").iterdir()) == ["val.npz"]
    # the val predictions are exactly the samples of split_indices(100, seed=data.seed).val, in order
    val = np.load(run_dir / "predictions" / "val.npz")
    expected = split_indices(100, seed=3).val
    assert np.array_equal(val["labels"], train.tensors[1][expected].numpy())
    with torch.no_grad():
        result.model.eval()
        logits = result.model(train.tensors[0][expected]).numpy()
    np.testing.assert_allclose(val["logits"], logits, rtol=0, atol=1e-5)
    # 80 train samples, batch 20 → 4 steps
    assert result.state.global_step == 4


def _loss_cases() -> list[tuple[str, list[str]]]:
    """Every method config of configs/methods (the meta methods among them), then every registered loss the
    method configs do not name, as CE's replacement."""
    cases = [(f"configs/methods/{p.stem}", []) for p in sorted(METHODS.glob("*.yaml"))]
    named = {yaml.safe_load(p.read_text())["loss"]["name"] for p in METHODS.glob("*.yaml")}
    params = {"primary_plus_secondary": ["loss.params={secondary: mdca}"]}
    cases += [(f"loss {name}", [f"loss.name={name}", *params.get(name, [])])
              for name in losses.available() if name not in named]
    return cases


@pytest.mark.slow
@pytest.mark.parametrize("case", _loss_cases(), ids=lambda c: c[0])
def test_every_loss_and_meta_method(case, tmp_path, monkeypatch):
    from metacal.train import outputs

    monkeypatch.setattr(outputs, "plot_reliability", lambda *a, **k: None)  # 2/3 of a tiny run's time
    name, extra = case
    config = REPO / f"{name}.yaml" if name.startswith("configs/") else METHODS / "ce.yaml"
    meta = [META_SMALL] if yaml.safe_load(config.read_text()).get("learner") in ("gamma_net", "loss") else []
    # 200 samples: 20 for val (adafocal bins validation confidences in 15 equal-mass bins)
    result = metacal.fit(mlp(), blobs(200), test=blobs(40, seed=9), config=config, run_dir=tmp_path / "run",
                         overrides=[*ONE_EPOCH, *SMALL, *meta, *QUIET, "run.max_steps_per_epoch=2",
                                    "run.save_checkpoints=false", *extra])
    m = result.metrics
    assert m["finished"] and m["test"]["n"] == 40 and np.isfinite(m["test"]["nll"])
    train = result.state.history[0]["train"]
    cfg = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    if cfg["learner"] == "auto":  # the scalar's update was logged
        assert np.isfinite(train["auto_gap"]) and "meta_objective" not in train
    elif cfg["learner"]:  # the meta step ran: its objective was logged
        assert np.isfinite(train["meta_objective"])
    else:
        assert "meta_objective" not in train


def test_resume_through_fit_matches_an_uninterrupted_run_and_the_cli_refuses_it(tmp_path, capsys):
    from metacal.train.cli import main

    method = [*SMALL, META_SMALL, *QUIET, "loss.name=focal", "learner=gamma_net",
              "schedule.milestones=[1]"]
    full = metacal.fit(mlp(), blobs(100), test=blobs(40, seed=9), run_dir=tmp_path / "full",
                       overrides=[*method, "schedule.epochs=2"])
    metacal.fit(mlp(), blobs(100), test=blobs(40, seed=9), run_dir=tmp_path / "part",
                overrides=[*method, "schedule.epochs=1"])
    part_dir = tmp_path / "part"
    listing = sorted(str(p.relative_to(part_dir)) for p in part_dir.rglob("*"))
    config_text = (part_dir / "config.yaml").read_text()
    capsys.readouterr()
    # the command line cannot rebuild Python datasets and models: one line naming the call that can
    assert main(["--run-dir", str(part_dir), "--resume", "--set", "schedule.epochs=2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "metacal.fit(model, train, ..., run_dir=" in err[0] and "resume=True" in err[0], err
    assert main(["--config", str(part_dir / "config.yaml"), "--run-dir", str(tmp_path / "cli")]) == 2
    assert "were given to metacal.fit from Python" in capsys.readouterr().err
    assert not (tmp_path / "cli").exists()
    assert sorted(str(p.relative_to(part_dir)) for p in part_dir.rglob("*")) == listing
    assert (part_dir / "config.yaml").read_text() == config_text
    # fit resumes it (the saved config + overrides) to the same weights as the uninterrupted run
    resumed = metacal.fit(mlp(seed=5), blobs(100), test=blobs(40, seed=9), run_dir=part_dir, resume=True,
                          overrides=["schedule.epochs=2"])
    assert resumed.state.epoch == 2 and resumed.metrics["epoch"] == full.metrics["epoch"]
    a = load_file(str(tmp_path / "full" / "checkpoints" / "latest" / "model.safetensors"))
    b = load_file(str(part_dir / "checkpoints" / "latest" / "model.safetensors"))
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=1e-6)
    assert resumed.metrics["test"]["ece"] == pytest.approx(full.metrics["test"]["ece"], abs=1e-6)


def test_fine_tuning_from_a_checkpoint_with_a_new_head_and_a_frozen_layer(tmp_path):
    """Pretrain a 3-class model on classes 0–2, then fine-tune a 4-class one from it: the skipped head starts
    afresh, the frozen first layer stays exactly at the pretrained values."""
    data = blobs(120)
    keep = (data.tensors[1] < 3).nonzero().reshape(-1)
    pre = metacal.fit(mlp(k=3), TensorDataset(data.tensors[0][keep], data.tensors[1][keep]), run_dir=tmp_path / "pre",
                      overrides=[*ONE_EPOCH, *SMALL, *QUIET])
    pretrained = {k: v.clone() for k, v in pre.model.state_dict().items()}
    model = mlp(k=4, seed=7)
    first = [n for n, _ in model.named_parameters()][0].rsplit(".", 1)[0]  # the first Linear's module name
    fresh_head = model.classifier.weight.detach().clone()
    tuned = metacal.fit(model, data, run_dir=tmp_path / "tuned",
                        overrides=[*ONE_EPOCH, *SMALL, *QUIET, f"model.checkpoint={tmp_path / 'pre'}",
                                   "model.checkpoint_skip=[classifier]", f"model.freeze=[{first}]"])
    state = tuned.model.state_dict()
    assert torch.equal(state[f"{first}.weight"], pretrained[f"{first}.weight"])
    assert not torch.equal(state["classifier.weight"], fresh_head)  # the new head trained
    saved = yaml.safe_load((tmp_path / "tuned" / "config.yaml").read_text())["model"]
    assert saved["checkpoint"] == str(tmp_path / "pre") and saved["freeze"] == [first]


class FloatLabels(Dataset):
    def __len__(self) -> int:
        return 20

    def __getitem__(self, i: int):
        return torch.zeros(8), 0.5 * (i % 4)


class NoLinear(nn.Module):
    """Logits (N, 4) from a convolution and pooling: no nn.Linear, so no head whose input is the features."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 4, 3)

    def forward(self, x):
        return self.conv(x.unsqueeze(1)).mean(-1)


class TupleOut(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(x), x


def _linear(k: int) -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, k))


BAD = {
    "no reachable features": (lambda: (NoLinear(), blobs(40), []), ContractError, "no reachable features"),
    "non-integer labels": (lambda: (_linear(4), FloatLabels(), []), DataFormatError,
                           "non-integer label 0.5 at index 1"),
    "K mismatch": (lambda: (_linear(3), blobs(40), []), ContractError, "logits have K=3 columns but the labels have 4"),
    "logits not a tensor": (lambda: (TupleOut(), blobs(40), []), ContractError, "returned a tuple"),
    "inputs the model cannot take": (lambda: (_linear(4), blobs(40, dim=5), []), ContractError, "cannot run on the"),
    "override of data.name": (lambda: (_linear(4), blobs(40), ["data.name=cifar10"]), ConfigError,
                              "takes data.name from its arguments"),
    "a dataset option": (lambda: (_linear(4), blobs(40), ["data.options.augment=true"]), ConfigError,
                         "data.options.augment does not apply"),
    "adamw with meta": (lambda: (_linear(4), blobs(40), ["optim.name=adamw", "learner=gamma_net"]), ConfigError,
                        "optim.name=adamw cannot be used with learner gamma_net"),
    "bad loss parameter": (lambda: (_linear(4), blobs(40), ["loss.params={nope: 1}"]), ConfigError, "loss.params"),
    "label out of range": (lambda: (_linear(4), _relabelled(blobs(40), 17, 7), ["data.options.num_classes=4"]),
                           DataFormatError, "metacal.fit: train labels[17] = 7 is outside 0..3 (num_classes 4)"),
    "negative label": (lambda: (_linear(4), _relabelled(blobs(40), 5, -1), []), DataFormatError,
                       "metacal.fit: train labels[5] = -1 is outside 0..3 (labels count from 0)"),
    # 5 samples split 8:1:1 round to 5 / 0 / 0: no validation sample to evaluate an epoch on
    "too few samples for a val split": (lambda: (_linear(4), blobs(5), []), ConfigError,
                                        "the validation split is empty (train 5, val 0, meta-val 0)"),
    "no val share": (lambda: (_linear(4), blobs(40), ["data.options.split=[0.9,0.0,0.1]"]), ConfigError,
                     "the validation split is empty (train 36, val 0, meta-val 4)"),
}


def _relabelled(data: TensorDataset, index: int, label: int) -> TensorDataset:
    y = data.tensors[1].clone()
    y[index] = label
    return TensorDataset(data.tensors[0], y)


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_input_is_one_line_and_writes_nothing(case, tmp_path):
    make, error, fragment = BAD[case]
    model, train, overrides = make()
    run_dir = tmp_path / "runs" / "bad"
    with pytest.raises(error) as info:
        metacal.fit(model, train, run_dir=run_dir, overrides=[*ONE_EPOCH, *SMALL, *QUIET, *overrides])
    message = str(info.value)
    assert "\n" not in message and fragment in message, message
    assert not run_dir.exists()


@pytest.mark.parametrize("part", ["val", "meta_val", "test"])
def test_an_empty_dataset_given_for_a_part_is_one_line(part, tmp_path):
    run_dir = tmp_path / "runs" / "bad"
    empty = TensorDataset(torch.zeros(0, 8), torch.zeros(0, dtype=torch.long))
    with pytest.raises(DataFormatError) as info:
        metacal.fit(_linear(4), blobs(40), **{part: empty}, run_dir=run_dir,
                    overrides=[*ONE_EPOCH, *SMALL, *QUIET])
    assert str(info.value) == f"metacal.fit {part}: the dataset is empty; give it samples or leave it out"
    assert not run_dir.exists()
