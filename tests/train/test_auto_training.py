"""learner auto through the trainer CLI: bad settings stop before anything is written; a run stopped
after epoch 1 and resumed gives the same γ sequence and metrics as an uninterrupted one, also when its directory was
saved with the keys of before the section auto; metrics.json and
the last lines name the γ the run settled on. (Two processes: tests/train/test_train_distributed.py.)"""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest
import torch
import yaml
from train_tiny import read_metrics

AUTO = {"loss": {"name": "focal", "params": {"gamma": 1.0}}, "model": {"name": "mlp", "options": {"hidden": [32]}},
        "learner": "auto", "auto": {"first_step": 1.0, "start": 1.0, "updates_per_epoch": 2},
        "schedule": {"epochs": 3, "milestones": [2]}}


@pytest.mark.parametrize("override, message", [
    ("auto.first_step=-1", "auto.first_step (the first step of the automatic gamma) must be > 0; got -1.0"),
    ("auto.max=0.5", "auto.start (the start of gamma, 1.0) must be in [0.0, auto.max = 0.5]"),
    ("auto.band=-1", "auto: the noise band must be >= 0 standard errors, got -1.0"),
    ("auto.updates_per_epoch=1000", "auto: updates_per_epoch must be in [1, 10]"),
    ("auto.speed=2", "unknown config key 'auto.speed'; valid keys in auto: start, first_step, band, grow, shrink, "
                     "confirm, reconfirm, probe, max"),
    ("auto.probe=0", "auto: probe must be a number > 0 or null (off), got 0"),
    ("auto.confirm=0", "auto: confirm must be a whole number >= 1, got 0"),
    ("auto.reconfirm=sometimes", "invalid value for config key 'auto.reconfirm'"),
    ("auto.sample=lots", "invalid value for config key 'auto.sample'"),
    ("auto.measure_on=[meta_val,test]", "auto.measure_on must list some of meta_val, val, "
                                        "meta_val_shifted, val_shifted, each once; got ['meta_val', 'test']"),
    ("auto.measure_on=[val,val]", "auto.measure_on must list some of"),
    ("auto.measure_on=[meta_val_shifted]", "auto.measure_on: dataset 'gaussian_mixture' has no shift suite"),
    # the keys the automatic scalar used to borrow from the γ-Net's section, named by their new keys
    ("meta.lr=2", "override 'meta.lr' sets the γ-Net's meta.lr; with learner: auto use auto.first_step"),
    ("meta.gamma_net.init_gamma=2", "with learner: auto use auto.start"),
    ("meta.controller.band=2", "config key 'meta.controller' is gone: the automatic scalar's settings are the section "
                               "auto (here: auto.band"),
    ("meta.enabled=true", "config key 'meta.enabled' is gone: the top-level key learner"),
    ("meta.objective=dece", "override 'meta.objective' has no effect: learner auto reads the section auto, not meta"),
])
def test_bad_settings_stop_before_anything_is_written(override, message, write_config, run_cli, tmp_path):
    config = write_config("auto", AUTO)
    run_dir = tmp_path / "run"
    code, out, err = run_cli(["--config", config, "--run-dir", run_dir, "--set", override])
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], err
    assert not run_dir.exists()


def test_a_loss_without_a_confidence_scalar_is_refused(write_config, run_cli, tmp_path):
    config = write_config("auto_ce", {**AUTO, "loss": {"name": "ce"}})
    code, out, err = run_cli(["--config", config, "--run-dir", tmp_path / "run"])
    assert code == 2 and "learner auto sets one scalar of the loss that lowers confidence" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


@pytest.mark.parametrize("splits", [["meta_val"], ["meta_val", "val"], None])
def test_the_gap_is_measured_on_the_splits_named(splits, write_config, run_cli, tmp_path):
    """The gap recorded after epoch 1 is mean(confidence − 1[correct]) of the epoch-1 checkpoint's network on the
    named held-out splits together (numpy over the rebuilt data), with s = sd/√n over their joint size; unnamed
    (None), both are measured."""
    from safetensors.torch import load_file

    from metacal.train.components import build_data, build_model
    from metacal.train.config import load_config

    config = write_config("auto", AUTO)
    run_dir = tmp_path / "run"
    named = [] if splits is None else ["--set", f"auto.measure_on=[{','.join(splits)}]"]
    code, _, err = run_cli(["--config", config, "--run-dir", run_dir, "--set", "schedule.epochs=1", *named])
    assert code == 0, err
    splits = splits or ["meta_val", "val"]
    cfg = load_config(run_dir / "config.yaml")
    bundle = build_data(cfg)
    model = build_model(cfg, bundle).eval()
    model.load_state_dict(load_file(run_dir / "checkpoints" / "latest" / "model.safetensors"))
    inputs, labels = zip(*(getattr(bundle, split)[i] for split in splits for i in range(len(getattr(bundle, split)))))
    with torch.no_grad():
        probs = model(torch.stack(inputs)).softmax(-1).double().numpy()
    d = probs.max(1) - (probs.argmax(1) == np.array(labels))
    assert len(d) == 40 * len(splits)  # TINY: 40 val, 40 meta-val samples
    record = json.loads((run_dir / "history.json").read_text())[0]["train"]
    assert record["auto_gap"] == pytest.approx(d.mean(), abs=1e-6)
    assert record["auto_gap_se"] == pytest.approx(d.std(ddof=1) / np.sqrt(len(d)), abs=1e-6)


def auto_history(run_dir) -> list[tuple[float, float, float]]:
    history = json.loads((run_dir / "history.json").read_text())
    return [(h["train"]["auto_gamma_trained"], h["train"]["auto_gamma"], h["train"]["auto_gap"]) for h in history]


@pytest.mark.slow
def with_old_keys(config: dict) -> dict:
    """A resolved config as config.yaml held it before the learner had its own key: meta.enabled + meta.learner,
    and the automatic scalar's settings in meta.lr, meta.gamma_net.init_gamma and meta.controller."""
    config, auto = dict(config), dict(config.pop("auto"))
    meta = {**config["meta"], "enabled": config.get("learner") is not None,
            "learner": config.pop("learner") or "gamma_net"}
    if meta["learner"] == "auto":
        meta["lr"] = auto.pop("first_step")
        meta["gamma_net"] = {**meta["gamma_net"], "init_gamma": auto.pop("start")}
        meta["controller"] = auto
    return {**config, "meta": meta}


def test_resume_gives_the_same_gamma_sequence(write_config, run_cli, tmp_path):
    config = write_config("auto", AUTO)
    full, part = tmp_path / "full", tmp_path / "part"
    code, out, err = run_cli(["--config", config, "--run-dir", full])
    assert code == 0, err
    assert run_cli(["--config", config, "--run-dir", part, "--set", "schedule.epochs=1"])[0] == 0
    old = tmp_path / "old"  # the same stopped run, saved before the automatic γ had its own section
    shutil.copytree(part, old)
    for saved in [old / "config.yaml", *old.glob("checkpoints/*/config.yaml")]:
        saved.write_text(yaml.safe_dump(with_old_keys(yaml.safe_load(saved.read_text()))))
        if (manifest := saved.parent / "MANIFEST.json").is_file():  # a checkpoint's: its size and hash follow
            files = json.loads(manifest.read_text())
            files["files"]["config.yaml"] = {"size": saved.stat().st_size,
                                             "sha256": hashlib.sha256(saved.read_bytes()).hexdigest()}
            manifest.write_text(json.dumps(files))
    code, out_resumed, err = run_cli(["--run-dir", part, "--resume", "--set", "schedule.epochs=3"])
    assert code == 0, err
    sequence = auto_history(full)
    assert len(sequence) == 3 and len({round(g, 9) for g, _, _ in sequence}) > 1  # γ moved
    assert auto_history(part) == sequence
    code, _, err = run_cli(["--run-dir", old, "--resume", "--set", "schedule.epochs=3"])
    assert code == 0, err
    assert auto_history(old) == sequence
    assert yaml.safe_load((old / "config.yaml").read_text())["auto"]["sample"] is None  # written in the new keys
    a, b = read_metrics(full), read_metrics(part)
    timing = ("measure_s",)  # seconds: the only number that may differ
    untimed = [{k: v for k, v in m["auto"].items() if k not in timing} for m in (a, b)]
    assert untimed[0] == untimed[1]
    assert a["test"]["ece"] == b["test"]["ece"] and a["auto"]["measure_s"] > 0
    # metrics.json and the last lines name the γ the selected network trained with
    selected = sequence[a["epoch"] - 1]
    assert a["auto"]["knob"] == "gamma" and a["auto"]["selected"] == selected[0]
    assert a["auto"]["final"] == sequence[-1][1] and a["auto"]["gap_selected"] == selected[2]
    assert f"automatic gamma: {selected[0]:.3g} at the selected epoch" in out
    assert a["auto"]["measured_on"] == ["meta_val", "val"] and "points on meta-val + val)" in out


def test_measuring_a_shifted_copy_of_meta_val(write_config, run_cli, tmp_path):
    """measure_on: [meta_val, meta_val_shifted] measures meta-val and its copy perturbed at mixed severities of the
    suite's fit families (the training-time analogue of perturbation TS)."""
    from metacal.data import build, shift_suites
    from metacal.meta import auto_learner
    from metacal.train.config import load_config

    mnist1d = {**AUTO, "data": {"name": "mnist1d", "root": str(tmp_path / "cache"), "batch_size": 32,
                                "eval_batch_size": 64, "options": {"num_samples": 1000}},
               "schedule": {"epochs": 1, "milestones": [1]}}
    config = write_config("auto_shift", mnist1d)
    text = yaml.safe_load(config.read_text())
    text["data"] = mnist1d["data"]  # TINY's gaussian-mixture options do not apply
    config.write_text(yaml.safe_dump(text))
    run_dir = tmp_path / "run"
    code, _, err = run_cli(["--config", config, "--run-dir", run_dir, "--set",
                            "auto.measure_on=[meta_val,meta_val_shifted]"])
    assert code == 0, err
    assert read_metrics(run_dir)["auto"]["measured_on"] == ["meta_val", "meta_val_shifted"]
    cfg = load_config(run_dir / "config.yaml")
    bundle = build("mnist1d", root=str(tmp_path / "cache"), seed=cfg.data.seed, num_samples=1000)
    shifted = shift_suites.shifted_held_out(bundle, "meta_val", cfg.run.seed)
    x, y = shift_suites.perturbed_split(bundle, "mnist1d_natural", "meta_val", cfg.run.seed)
    assert torch.equal(shifted.tensors[0], x) and torch.equal(shifted.tensors[1], y)
    clean = torch.stack([bundle.meta_val[i][0] for i in range(len(bundle.meta_val))])
    assert len(shifted) == len(bundle.meta_val) and not torch.equal(shifted.tensors[0], clean)
    assert auto_learner.build_auto  # the trainer built the measured set through the auto learner's build
