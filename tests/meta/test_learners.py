"""The learners' registry holds each learner's facts (metacal/meta/learners.py): the built-in ones are there as soon as
metacal.meta is imported, without the trainer; each spec names its section and its dataclass, and the section's own
choices, ranges and global batch come with the dataclass."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from metacal.meta import LEARNERS, MetaSettings, learner, learner_section, learner_spec
from metacal.meta.auto import AutoSettings
from metacal.meta.learners import learner_sections

REPO = Path(__file__).resolve().parents[2]


def test_built_in_learners_register_without_the_trainer():
    script = ("import sys, metacal.meta as m; print(m.LEARNERS.available(), "
              "any(k.startswith('metacal.train') for k in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.stdout.strip() == "['auto', 'gamma_net', 'loss'] False", done.stderr


@pytest.mark.parametrize("name, section, settings, capturable, fixed", [
    ("gamma_net", "meta", MetaSettings, True, ("gamma_net", "optimizer", "batch_size")),
    ("loss", "meta", MetaSettings, True, ("optimizer", "batch_size")),
    ("auto", "auto", AutoSettings, True, ()),
])  # fmt: skip
def test_each_spec_holds_its_facts(name, section, settings, capturable, fixed):
    spec = learner_spec(name)
    assert (spec.section, spec.settings, spec.capturable, spec.fixed) == (section, settings, capturable, fixed)
    assert learner_section(name) == section


def test_sections_in_registration_order_and_their_own_checks():
    assert list(learner_sections()) == ["meta", "auto"]
    assert learner_section(None) is None and learner_section("not_registered") is None
    assert MetaSettings.CHOICES == {"backend": ("higher", "jvp", "head"), "horizon": ("step", "trajectory"),
                                    "optimizer": ("adam", "sgd")}
    assert [key for key, _, _ in MetaSettings.RANGES] == ["batch_size", "lr", "weight_decay", "shape_lr_scale",
                                                          "ce_weight"]
    assert MetaSettings.GLOBAL_BATCH == "batch_size" and MetaSettings().lr == 1e-4


def test_a_section_is_read_into_one_dataclass():
    @dataclass
    class Other:
        lr: float = 0.5

    with pytest.raises(ValueError, match="section 'meta' is read into MetaSettings by another learner, not Other"):
        learner("mine", settings=Other, section="meta")(lambda ctx: None)
    with pytest.raises(ValueError, match="'optim' is a section of the trainer's own"):
        learner("mine", settings=Other, section="optim")(lambda ctx: None)
    assert "mine" not in LEARNERS


def test_a_bare_build_function_is_refused_with_the_way_to_register_it():
    with pytest.raises(TypeError, match=r"^learner 'old': register it with @metacal.meta.learner\('old', settings="):
        LEARNERS.register("old")(lambda cfg, accelerator, model, loss_fn, optimizer, bundle, steps: None)
    assert "old" not in LEARNERS
