"""Fine-tuning from the command line: torchvision backbones started from local weights, frozen prefixes,
backbone lr scale, AdamW, per-iteration schedules (resumed mid-epoch exactly), and every bad model input
as one line, exit 2, nothing written.

The images come from ``tiny_images``, a 1×16×16, 4-class dataset registered for these tests only.
"""

from __future__ import annotations

import signal

import faults
import pytest
import torch
import torchvision
from safetensors.torch import load_file
from train_tiny import read_metrics

from metacal import models
from metacal.data import DATASETS
from metacal.data.bundle import DataBundle, DataSubset
from metacal.data.image_datasets import VectorDataset
from metacal.data.splits import split_indices


def build_tiny_images(root=None, seed: int = 0) -> DataBundle:
    """160 train / 40 test images: class k has mean brightness 0.5·k (noise σ = 1)."""
    gen = torch.Generator().manual_seed(seed)

    def sample(n: int) -> VectorDataset:
        labels = torch.arange(n) % 4
        return VectorDataset(torch.randn(n, 1, 16, 16, generator=gen) + 0.5 * labels.view(-1, 1, 1, 1), labels)

    train, test = sample(200), sample(40)
    idx = split_indices(200, seed=seed)
    return DataBundle("tiny_images", DataSubset(train, idx.train), DataSubset(train, idx.val),
                      DataSubset(train, idx.meta_val), DataSubset(test, range(40)), 4, (1, 16, 16), (0.0,), (1.0,))


@pytest.fixture(autouse=True)
def tiny_images(monkeypatch):
    monkeypatch.setitem(DATASETS._entries, "tiny_images", build_tiny_images)


IMAGES = {"data": {"name": "tiny_images", "batch_size": 16, "eval_batch_size": 40},
          "meta": {"batch_size": 16}, "logging": {"tensorboard": False, "progress_bar": False},
          "schedule": {"epochs": 1, "milestones": [1]}, "run": {"max_steps_per_epoch": 3, "torch_threads": 1}}
RESNET = {**IMAGES, "model": {"name": "torchvision:resnet18"}}
META = {"loss": {"name": "focal"}, "learner": "gamma_net", "meta": {"objective": "sece",
                                            "backend": "jvp", "batch_size": 16}}
FROZEN = ["net.conv1", "net.bn1", "net.layer1"]


def merged(*parts: dict) -> dict:
    from train_tiny import deep_merge

    out: dict = {}
    for part in parts:
        out = deep_merge(out, part)
    return out


@pytest.fixture
def write_images_config(tmp_path):
    """Like write_config, without the Gaussian-mixture base (its data options would reach tiny_images)."""
    import yaml

    def write(name: str, overrides: dict) -> str:
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(overrides))
        return str(path)

    return write


@pytest.fixture
def imagenet_like(tmp_path):
    """A torchvision ResNet-18 state dict with a 1000-class head, as a downloaded .pth file would hold."""
    torch.manual_seed(5)
    path = tmp_path / "resnet18-imagenet.pth"
    torch.save(torchvision.models.resnet18().state_dict(), path)
    return path


def test_resnet18_flgamma_sece_fine_tunes_from_a_state_dict(write_images_config, run_cli, tmp_path, imagenet_like):
    config = write_images_config("ft", merged(RESNET, META, {
        "model": {"checkpoint": str(imagenet_like), "checkpoint_skip": ["net.fc"], "freeze": FROZEN},
        "optim": {"lr": 0.05, "backbone_lr_scale": 0.1},
        "schedule": {"name": "cosine", "warmup_epochs": 0.5}}))
    run_dir = tmp_path / "run"
    code, out, err = run_cli(["--config", config, "--run-dir", run_dir])
    assert code == 0, err
    metrics = read_metrics(run_dir)
    assert 0 <= metrics["test"]["error"] <= 1 and metrics["epoch"] == 1
    start = torch.load(imagenet_like, weights_only=True)
    final = load_file(str(run_dir / "checkpoints" / "latest" / "model.safetensors"))
    for name, tensor in start.items():
        key = f"net.{name}"
        if any(name.startswith(p[len("net."):]) for p in FROZEN) and not name.endswith(("running_mean", "running_var",
                                                                                         "num_batches_tracked")):
            assert torch.equal(final[key], tensor), key  # frozen: exactly the checkpoint's weights
    assert not torch.equal(final["net.layer4.1.conv2.weight"], start["layer4.1.conv2.weight"])  # fine-tuned
    assert final["net.fc.weight"].shape == (4, 512)
    # the logged lr of the only epoch is its first iteration's: warm-up W = round(0.5·3) = 2 → lr·1/2
    history = __import__("json").loads((run_dir / "history.json").read_text())
    assert history[0]["lr"] == pytest.approx(0.05 / 2)


def test_tiny_vit_trains_with_adamw(write_images_config, run_cli, tmp_path):
    vit = {"name": "torchvision:VisionTransformer",
           "options": {"patch_size": 4, "num_layers": 1, "num_heads": 2, "hidden_dim": 8, "mlp_dim": 16}}
    config = write_images_config("vit", merged(IMAGES, {"model": vit, "optim": {"name": "adamw", "lr": 1e-3,
                                                                          "weight_decay": 0.05},
                                                  "schedule": {"name": "constant", "warmup_epochs": 0.5}}))
    code, _, err = run_cli(["--config", config, "--run-dir", tmp_path / "vit"])
    assert code == 0, err
    assert read_metrics(tmp_path / "vit")["epoch"] == 1


def test_a_run_directory_starts_the_next_model(write_config, run_cli, tmp_path):
    """model.checkpoint: a metacal run directory → the weights of its best checkpoint."""
    from metacal.train.components import build_data, build_model
    from metacal.train.config import load_config

    first = tmp_path / "first"
    assert run_cli(["--config", write_config("first", {"logging": {"tensorboard": False}}), "--run-dir", first])[0] == 0
    best = load_file(str(first / "checkpoints" / "best" / "model.safetensors"))
    cfg = load_config(write_config("second", {"model": {"checkpoint": str(first)}}), [])
    model = build_model(cfg, build_data(cfg))
    assert model.state_dict().keys() == best.keys()
    assert all(torch.equal(model.state_dict()[k], best[k]) for k in best)


def test_cosine_run_resumed_mid_epoch_ends_like_an_uninterrupted_one(write_config, run_cli, tmp_path, monkeypatch):
    """The per-iteration scheduler is stepped before a mid-epoch save, so a SIGTERM + resume continues the curve."""
    config = write_config("cos", {"logging": {"tensorboard": False}, "model": {"options": {"hidden": [16]}},
                                  "schedule": {"name": "cosine", "epochs": 2, "warmup_epochs": 0.5}})
    full, part = tmp_path / "full", tmp_path / "part"
    assert run_cli(["--config", config, "--run-dir", full])[0] == 0
    with monkeypatch.context() as patch:
        faults.after_step(patch, 4, faults.signal_self(signal.SIGTERM))  # epoch 1 has 10 steps
        assert run_cli(["--config", config, "--run-dir", part])[0] == 75
    code, out, err = run_cli(["--run-dir", part, "--resume"])
    assert code == 0 and "after epoch 1, step 4" in out, err
    a, b = read_metrics(full), read_metrics(part)
    for split in ("val", "test"):
        assert a[split]["nll"] == pytest.approx(b[split]["nll"], abs=1e-7)
    sa = load_file(str(full / "checkpoints" / "latest" / "model.safetensors"))
    sb = load_file(str(part / "checkpoints" / "latest" / "model.safetensors"))
    for name in sa:
        torch.testing.assert_close(sa[name], sb[name], rtol=0, atol=1e-7)


def small_resnet_state(tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "small.pt"
    torch.save(models.build("small_resnet", 4, 1).state_dict(), path)
    return path


BAD = {
    "no reachable features": ({"model": {"name": "torchvision:squeezenet1_0", "options": {"resize": 64}}},
                              "model (torchvision:squeezenet1_0): no nn.Linear of SqueezeNet produces its output"),
    "another architecture": ({"model": {"checkpoint": "SMALL"}},
                             "does not fit the model (another architecture? only 0 of its 122 tensors"),
    "head of another width": ({"model": {"checkpoint": "IMAGENET"}},
                              "net.fc.weight [1000, 512] in the checkpoint but [4, 512] in the model"),
    "missing checkpoint": ({"model": {"checkpoint": "/nonexistent/r18.pth"}},
                           "model.checkpoint does not exist: /nonexistent/r18.pth"),
    "weights by name": ({"model": {"options": {"weights": "IMAGENET1K_V1"}}}, "this workplace is offline"),
    "freeze prefix": ({"model": {"freeze": ["layer1"]}}, "model.freeze 'layer1' matches no parameter"),
    "unknown torchvision name": ({"model": {"name": "torchvision:resnet19"}}, "unknown torchvision model 'resnet19'"),
    "adamw with meta": ({**META, "optim": {"name": "adamw"}}, "optim.name=adamw cannot be used with learner gamma_net"),
    "head backend on another layer": (merged(META, {"meta": {"backend": "head"},
                                                    "model": {"options": {"feature_layer": "layer4", "resize": 64}}}),
                                      "meta.backend=head differentiates the head applied to the features"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_model_input_is_one_line_exit_2_nothing_written(case, write_images_config, run_cli, tmp_path,
                                                            imagenet_like):
    overrides, fragment = BAD[case]
    model = dict(overrides.get("model", {}))
    for key, value in list(model.items()):
        if value == "SMALL":
            model[key] = str(small_resnet_state(tmp_path))
        elif value == "IMAGENET":
            model[key] = str(imagenet_like)
    config = write_images_config("bad", merged(RESNET, {**overrides, "model": {**RESNET["model"], **model}}))
    run_dir = tmp_path / "never"
    code, out, err = run_cli(["--config", config, "--run-dir", run_dir])
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    assert fragment in lines[0], lines[0]
    assert not run_dir.exists()


def test_example_config_builds_the_documented_fine_tuning_setup(imagenet_like):
    """configs/examples/finetune_resnet18_fashion_mnist.yaml with a local weights file (no data needed)."""
    from pathlib import Path
    from types import SimpleNamespace

    from metacal.train.components import build_model, build_optimizer, build_scheduler
    from metacal.train.config import load_config

    example = Path(__file__).resolve().parents[2] / "configs" / "examples" / "finetune_resnet18_fashion_mnist.yaml"
    cfg = load_config(example, [f"model.checkpoint={imagenet_like}"])
    assert (cfg.data.name, cfg.learner, cfg.loss.name) == ("fashion_mnist", "gamma_net", "focal")
    bundle = SimpleNamespace(input_shape=(1, 28, 28), num_classes=10, in_channels=1)
    model = build_model(cfg, bundle)
    start = torch.load(imagenet_like, weights_only=True)
    assert torch.equal(model.net.layer3[1].conv2.weight, start["layer3.1.conv2.weight"])
    assert model.classifier.weight.shape == (10, 512) and model.adapter.channels == 3
    assert not model.net.layer1[0].conv1.weight.requires_grad and model.net.layer2[0].conv1.weight.requires_grad
    optimizer = build_optimizer(cfg, model)
    assert [g["lr"] for g in optimizer.param_groups] == [0.01, pytest.approx(0.001)]
    assert build_scheduler(cfg, optimizer, steps_per_epoch=10).per_iteration
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.01 / 5)  # warm-up: W = 5 iterations


@pytest.mark.parametrize("override,key", [("model.freeze=[layers.0]", "model.freeze"),
                                          ("optim.backbone_lr_scale=0.5", "optim.backbone_lr_scale"),
                                          ("schedule.name=cosine", "schedule.name")])
def test_resume_refuses_changes_to_the_optimiser_layout(override, key, write_config, run_cli, tmp_path):
    run_dir = tmp_path / "run"
    config = write_config("ce", {"logging": {"tensorboard": False}, "schedule": {"epochs": 1}})
    assert run_cli(["--config", config, "--run-dir", run_dir])[0] == 0
    code, _, err = run_cli(["--run-dir", run_dir, "--resume", "--set", override, "schedule.epochs=2"])
    assert code == 2 and f"cannot resume: {key} is" in err and len(err.strip().splitlines()) == 1, err
