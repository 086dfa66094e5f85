"""A message that names a setting spells it the way the caller sets it: ``resume=True``,
``overrides=["data.options.download=true"]`` from Python (``metacal.fit``, ``metacal.train.train``), ``--resume``,
``--set data.options.download=true`` on the command line — never the other interface's spelling."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

import metacal
from metacal.train import ConfigError

REPO = Path(__file__).resolve().parents[2]
CE = REPO / "configs" / "methods" / "ce.yaml"
CIFAR10 = REPO / "configs" / "cifar10" / "ce.yaml"
QUICK = ["schedule.epochs=1", "schedule.milestones=[1]", "data.batch_size=20", "data.eval_batch_size=50",
         "logging.tensorboard=false", "logging.progress_bar=false", "logging.reliability_every=0",
         "run.torch_threads=1", "run.max_steps_per_epoch=1"]


def blobs(n: int = 40) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    y = torch.arange(n) % 4
    return TensorDataset(torch.randn(n, 8, generator=g) + 2.0 * nn.functional.one_hot(y, 8).float(), y)


def net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def used_run_dir(tmp_path: Path) -> Path:
    run_dir = tmp_path / "used"
    run_dir.mkdir()
    (run_dir / "notes.txt").write_text("someone's files")
    return run_dir


def assert_python_words(message: str, *fragments: str) -> None:
    assert "\n" not in message and "--" not in message, message
    for fragment in fragments:
        assert fragment in message, message


def test_fit_into_a_used_run_dir_says_resume_true_or_overwrite_true(tmp_path):
    run_dir = used_run_dir(tmp_path)
    with pytest.raises(FileExistsError) as info:
        metacal.fit(net(), blobs(), config=CE, run_dir=run_dir, overrides=QUICK)
    assert_python_words(str(info.value), f"run directory {run_dir} already exists",
                        "pass resume=True to continue it or overwrite=True to replace it")
    assert (run_dir / "notes.txt").read_text() == "someone's files"


def test_fit_with_resume_and_overwrite_says_the_keywords(tmp_path):
    with pytest.raises(ConfigError) as info:
        metacal.fit(net(), blobs(), config=CE, run_dir=used_run_dir(tmp_path), overrides=QUICK, resume=True,
                    overwrite=True)
    assert_python_words(str(info.value), "resume=True and overwrite=True exclude each other")


def test_fit_resume_without_a_checkpoint_says_overwrite_true(tmp_path):
    run_dir = used_run_dir(tmp_path)
    with pytest.raises(FileNotFoundError) as info:
        metacal.fit(net(), blobs(), config=CE, run_dir=run_dir, overrides=QUICK, resume=True)
    assert_python_words(str(info.value), "holds no complete checkpoint", "start it again with overwrite=True")


def test_missing_dataset_from_python_says_the_override(tmp_path):
    """metacal.fit takes its datasets as arguments, so a named dataset is missing only when the trainer builds it
    from a config: metacal.train.train says the override; metacal.data.build, whose keyword it is, download=True."""
    from metacal.data import DataNotFoundError, build
    from metacal.train import load_config, prepare_run_dir, train

    empty = tmp_path / "empty"
    empty.mkdir()
    cfg = load_config(CIFAR10, [f"data.root={empty}", *QUICK])
    with pytest.raises(DataNotFoundError) as info:
        train(cfg, prepare_run_dir(tmp_path / "run"))
    assert_python_words(str(info.value), "dataset 'cifar10' not found",
                        'To get it: pass overrides=["data.options.download=true"] (uses torchvision')
    with pytest.raises(DataNotFoundError) as info:
        build("cifar10", root=empty)
    assert_python_words(str(info.value), "To get it: pass download=True (uses torchvision")


def test_the_command_line_still_says_flags(tmp_path, run_cli, write_config):
    config = write_config("tiny", {"schedule": {"epochs": 1, "milestones": [1]}})
    run_dir = used_run_dir(tmp_path)
    code, _, err = run_cli(["--config", config, "--run-dir", run_dir])
    assert code == 2 and err.strip() == (f"error: run directory {run_dir} already exists; pass --resume to continue "
                                         "it or --overwrite to replace it")
    code, _, err = run_cli(["--config", config, "--run-dir", run_dir, "--resume"])
    assert code == 2 and err.strip().endswith("holds no complete checkpoint yet "
                                              f"({run_dir}/checkpoints/ckpt-*); start it again with --overwrite")
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_cli(["--config", CIFAR10, "--run-dir", tmp_path / "cifar", "--set", f"data.root={empty}"])
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "To get it: pass --set data.options.download=true (uses torchvision" in err, err
    # the command line's wording ends with it: a Python call afterwards speaks Python again
    with pytest.raises(FileExistsError, match="pass resume=True"):
        metacal.fit(net(), blobs(), config=CE, run_dir=run_dir, overrides=QUICK)
