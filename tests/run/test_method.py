"""metacal.run.method: the record of what a run trained, and the fixed-γ grid read from it."""

from __future__ import annotations

import pytest

from metacal.losses.focal import FocalLoss
from metacal.run.method import NO_LEARNER, Method, method_of_config, method_of_run


@pytest.mark.parametrize(("loss", "params", "extra", "gamma"), [
    ("ce", {}, {}, 0.0),
    ("ce", {"reduction": "mean"}, {}, 0.0),
    ("focal", {"gamma": 2.5}, {}, 2.5),
    ("focal", {"gamma": 3}, {}, 3.0),
    ("focal", {}, {}, FocalLoss.default_gamma),  # the loss's own default γ
    ("focal", {"gamma": None}, {}, FocalLoss.default_gamma),
    ("focal", {"gamma": [1.0, 2.0]}, {}, None),  # per-class γ is not a grid point
    ("focal", {"gamma": 2.0, "alpha": 0.25}, {}, None),  # another parameter: not the plain focal grid
    ("ce", {"label_smoothing": 0.05}, {}, None),
    ("dual_focal", {"gamma": 2.0}, {}, None),
    ("focal", {"gamma": 1.0}, {"learner": "auto"}, None),  # γ steered by a learner
    ("ce", {}, {"learner": "loss"}, None),  # CE-DECE
    ("focal", {"gamma": 2.0}, {"learner": None}, 2.0),
    # config.yaml saved before the learner had its own key: meta.enabled and meta.learner
    ("focal", {"gamma": 1.0}, {"meta": {"enabled": True, "learner": "auto"}}, None),
    ("ce", {}, {"meta": {"enabled": True, "learner": "loss"}}, None),
    ("focal", {"gamma": 2.0}, {"meta": {"enabled": False, "learner": "auto"}}, 2.0),  # a learner that is off
])
def test_fixed_gamma_from_the_config(loss, params, extra, gamma):
    method = method_of_config({"loss": {"name": loss, "params": params}, **extra}, name="x")
    assert method.fixed_gamma == gamma


def test_labels_say_the_gamma():
    assert Method("my_run", "focal", {"gamma": 2.5}).label == "Focal γ = 2.5"
    assert Method("my_ce", "ce").label == "CE"
    assert Method("mine", "dual_focal", {"gamma": 2.0}).label == "mine"


def test_record_round_trip_and_learner_settings():
    """The record holds the section the learner reads: ``auto`` for the automatic scalar, ``meta`` otherwise."""
    config = {"loss": {"name": "focal", "params": {"gamma": 1.0}}, "learner": "auto",
              "meta": {"lr": 1e-4, "gamma_net": {"tau": 0.01}}, "auto": {"first_step": 1.0, "probe": 2.0},
              "run": {"method": "auto_gamma"}}
    method = method_of_config(config)
    record = method.record()
    assert record == {"name": "auto_gamma", "loss": {"name": "focal", "params": {"gamma": 1.0}},
                      "learner": {"name": "auto", "settings": config["auto"]}}
    assert Method.from_record(record) == method
    gamma_net = method_of_config({**config, "learner": "gamma_net"}).record()
    assert gamma_net["learner"] == {"name": "gamma_net", "settings": config["meta"]}
    plain = method_of_config({"loss": {"name": "ce"}}).record()
    assert plain == {"name": "ce", "loss": {"name": "ce", "params": {}}, "learner": {"name": NO_LEARNER}}


def test_a_config_without_a_loss_has_no_method():
    assert method_of_config({"run": {"seed": 0}}) is None
    assert method_of_run({"run": {"seed": 0}}, {"test": {}}) is None


def test_the_run_record_wins_over_the_config_and_the_folder_name_over_both():
    config = {"loss": {"name": "ce"}}
    record = Method("focal2", "focal", {"gamma": 2.0}).record()
    assert method_of_run(config, {"method": record}).fixed_gamma == 2.0
    assert method_of_run(config, {"method": record}, name="folder").name == "folder"
    assert method_of_run(config, None, name="folder") == Method("folder", "ce")
