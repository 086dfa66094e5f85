"""Config schema, base-file inheritance, dotted overrides and the shipped configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from metacal.train.config import ConfigError, load_config, overrides_to_dict, parse_value, to_yaml

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"
DATASETS = ("fashion_mnist", "cifar10", "cifar100", "tiny_imagenet")
METHODS = ("ce", "focal", "flsd53", "ls_005", "ls_01", "mixup", "mmce", "ce_dece", "ce_sece", "flgamma_dece",
           "flgamma_sece", "dual_focal", "inverse_focal", "adafocal", "bsce_gra", "focal_savuc", "nll_sbece")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_are_the_paper_recipe(tmp_path):
    cfg = load_config(write(tmp_path / "c.yaml", "data: {name: mnist1d}\nmodel: {name: mlp}\n"))
    assert (cfg.optim.lr, cfg.optim.momentum, cfg.optim.weight_decay) == (0.1, 0.9, 5e-4)
    assert (cfg.schedule.epochs, cfg.schedule.milestones, cfg.schedule.gamma) == (350, [150, 250], 0.1)
    assert (cfg.data.batch_size, cfg.eval.select_by, cfg.eval.num_bins) == (128, "error", 15)
    assert cfg.meta.enabled is False and cfg.loss.name == "ce"


def test_base_chain_merges_mappings_and_overrides_win(tmp_path):
    write(tmp_path / "base.yaml", "data: {name: mnist1d, batch_size: 64}\nmodel: {name: mlp}\n"
                                  "optim: {lr: 0.2}\nschedule: {milestones: [5, 8]}\n")
    child = write(tmp_path / "sub" / "m.yaml", "base: ../base.yaml\nloss: {name: focal, params: {gamma: 2}}\n"
                                               "schedule: {milestones: [3]}\n")
    cfg = load_config(child, ["optim.lr=0.05", "loss.params.gamma=3", "meta.objective=dece"])
    assert cfg.data.name == "mnist1d" and cfg.data.batch_size == 64  # from the base
    assert cfg.schedule.milestones == [3]  # lists are replaced, not concatenated
    assert cfg.optim.lr == 0.05 and cfg.loss.params == {"gamma": 3} and cfg.meta.objective == "dece"


def test_values_parse_like_yaml_including_bare_exponents():
    assert parse_value("5e-4") == 5e-4 and isinstance(parse_value("5e-4"), float)
    assert parse_value("[150, 250]") == [150, 250]
    assert parse_value("true") is True and parse_value("dece") == "dece" and parse_value("3") == 3
    assert overrides_to_dict(["a.b=1", "a.c.d=x"]) == {"a": {"b": 1, "c": {"d": "x"}}}


@pytest.mark.parametrize("overrides, fragments", [
    (["optim.lrr=0.1"], ["'optim.lrr'", "valid keys in optim: name, lr, momentum"]),
    (["optimizer.lr=0.1"], ["'optimizer'", "top level", "data, model, loss, meta"]),
    (["optim.lr=fast"], ["'optim.lr'", "fast"]),
    (["schedule.milestones=3"], ["'schedule.milestones'"]),
    (["meta.backend=autograd"], ["'meta.backend'", "higher, jvp, head"]),
    (["eval.select_by=acc"], ["'eval.select_by'", "error, nll, ece"]),
    (["optim.lr"], ["section.key=value"]),
])
def test_bad_keys_and_values_name_the_key(tmp_path, overrides, fragments):
    path = write(tmp_path / "c.yaml", "data: {name: mnist1d}\nmodel: {name: mlp}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message


def test_missing_required_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="missing required config key 'model.name'"):
        load_config(write(tmp_path / "c.yaml", "data: {name: mnist1d}\n"))
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="circular"):
        load_config(write(tmp_path / "loop.yaml", "base: loop.yaml\n"))


def test_resolved_config_round_trips(tmp_path):
    cfg = load_config(write(tmp_path / "c.yaml", "data: {name: mnist1d}\nmodel: {name: mlp}\n"
                                                 "loss: {name: focal, params: {gamma: 2.0}}\n"))
    again = load_config(write(tmp_path / "resolved.yaml", to_yaml(cfg)))
    assert again == cfg


def shipped_configs() -> list[Path]:
    return [CONFIGS / "quickstart.yaml"] + [CONFIGS / d / f"{m}.yaml" for d in DATASETS for m in METHODS]


def test_every_dataset_has_every_method_on_a_shared_base():
    for path in shipped_configs():
        assert path.is_file(), path
        if path.parent.name in DATASETS:  # dataset base + shared method file (configs/methods/<m>.yaml)
            first = path.read_text().splitlines()[0]
            assert first == f"base: [base.yaml, ../methods/{path.stem}.yaml]", path


@pytest.mark.parametrize("path", shipped_configs(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_shipped_configs_load_and_name_registered_components(path):
    from metacal import data, losses, objectives
    from metacal.losses import LOSSES

    cfg = load_config(path)
    assert cfg.data.name in data.available()
    if cfg.loss.name not in losses.available():
        pytest.skip(f"loss {cfg.loss.name!r} is not registered in metacal.losses yet")
    assert cfg.loss.name in LOSSES
    if cfg.meta.enabled:
        assert cfg.meta.objective in objectives.available()
        assert cfg.meta.learner == ("loss" if cfg.loss.name == "ce_learnable_l2" else "gamma_net")
    if path.parent.name in ("cifar10", "cifar100", "tiny_imagenet"):
        assert (cfg.schedule.epochs, cfg.schedule.milestones, cfg.model.name) == (350, [150, 250], "resnet18")
