"""What a user adds from a module of their own, one file each, with no edit to metacal:

* a loss and a learner with its own config section (LightningCLI-style: a dataclass of its settings), run through a
  sweep, the report and the grid pick — the loss registers in ``metacal.losses.LOSSES``, the learner with
  ``metacal.meta.learner``, the trainer is started by a two-line launcher that imports the module (``--train-cmd``),
  and the report reads what each run recorded (metrics.json ``"method"``), not file names; the config loader checks
  the section against the dataclass;
* a post-hoc calibrator (a ``metacal.posthoc.Calibrator`` and one ``register`` call): chosen by name or by ``all``,
  fitted, saved in a run's calibration/ and exported with the run's network;
* a corruption family (one function and one ``@corruption`` call): the ``corruptions`` suite holds it out.

Each user module runs in a process of its own (a registration lasts for the process, and the other tests count the
built-in entries)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.data.conftest import fashion_gz_dir  # noqa: F401  (tiny Fashion-MNIST files, for the corruption family)
from tests.predict.conftest import copy_run

REPO = Path(__file__).resolve().parents[1]

USER_METHODS = '''
from dataclasses import dataclass

import torch.nn.functional as F

from metacal.losses import LOSSES
from metacal.losses.base import Loss, reduce
from metacal.meta import PlainStep, learner


@LOSSES.register("tempered_ce")
class TemperedCE(Loss):
    """CE of logits / tau."""

    def __init__(self, tau: float = 1.0, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.tau = float(tau)

    def forward(self, logits, targets):
        return reduce(F.cross_entropy(logits / self.tau, targets, reduction="none"), self.reduction)


@dataclass
class AnnealSettings:
    """The config section anneal."""

    rate: float = 0.0  # added to the loss's tau after each epoch's steps


class AnnealTau(PlainStep):
    """Plain steps; after each epoch's steps the loss's tau grows by `rate` (a learner with state)."""

    def __init__(self, model, loss, optimizer, backward, steps_per_epoch, rate):
        super().__init__(model, loss, optimizer, backward=backward)
        self.steps_per_epoch, self.rate, self.steps = steps_per_epoch, rate, 0

    def step(self, inputs, targets):
        out = super().step(inputs, targets)
        self.steps += 1
        if self.steps % self.steps_per_epoch == 0:
            self.loss.tau += self.rate
        return out

    def epoch_metrics(self, diagnostics=None):
        return {"tau": self.loss.tau}

    def checkpointables(self):
        return [self]

    def state_dict(self):
        return {"steps": self.steps, "tau": self.loss.tau}

    def load_state_dict(self, state):
        self.steps, self.loss.tau = state["steps"], state["tau"]


@learner("anneal_tau", settings=AnnealSettings, section="anneal")
def build_anneal_tau(ctx):
    return AnnealTau(ctx.model, ctx.loss, ctx.optimizer, ctx.accelerator.backward, ctx.steps_per_epoch,
                     ctx.settings.rate)
'''

LAUNCHER = '''import sys
import my_methods  # noqa: F401  (registers tempered_ce and anneal_tau)
from metacal.train.cli import main
sys.exit(main())
'''

USER_CALIBRATOR = '''
import torch

from metacal.posthoc import Calibrator, CalibratorSpec, register


class PriorShift(Calibrator):
    """softmax(z + b), b_k = ln(frequency of class k) − ln(mean predicted p_k) on the fitting set (label shift)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("bias", None)

    def fit(self, logits, labels):
        z, y = torch.as_tensor(logits).double(), torch.as_tensor(labels).long()
        frequency = torch.bincount(y, minlength=z.shape[1]).double() / len(y)
        self.bias = frequency.clamp_min(1e-12).log() - torch.softmax(z, dim=1).mean(dim=0).log()
        return self

    def forward(self, logits):
        return torch.log_softmax(logits + self.bias, dim=1)

    def transform(self, logits):
        return self.forward(torch.as_tensor(logits).double()).exp()

    def fitted_state(self):
        return {"bias": self.bias}

    def load_fitted_state(self, state):
        self.bias = torch.as_tensor(state["bias"], dtype=torch.float64)

    def fitted_params(self):
        return {f"b_{k}": float(v) for k, v in enumerate(self.bias)}


register(CalibratorSpec("prior_shift", "PS", "prior-shift correction", lambda num_bins: PriorShift()))
'''

USER_CORRUPTION = '''
from metacal.data.corruptions import check_images, corruption


@corruption("invert")
def invert(images, severity):
    """x moved towards its negative: (1 − s/5)·x + (s/5)·(1 − x)."""
    check_images(images, severity)
    t = severity / 5
    return ((1 - t) * images + t * (1 - images)).clamp(0, 1)
'''


def run_script(tmp_path: Path, module: str, text: str, script: str) -> dict:
    """Write the user's ``module`` and run ``script`` (which imports it) in a process of its own; its JSON output."""
    (tmp_path / f"{module}.py").write_text(text)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": f"{tmp_path}:{REPO}", "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"})
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_own_learner_section_is_checked_against_its_dataclass(tmp_path):
    script = '''
import json
import my_methods
from metacal.meta import LEARNERS
from metacal.train.config import ConfigError, load_config, to_yaml

base = ["data.name=mnist1d", "model.name=mlp"]
cfg = load_config(None, [*base, "learner=anneal_tau", "anneal.rate=0.5"])
out = {"learners": LEARNERS.available(), "rate": cfg.anneal.rate, "yaml": to_yaml(cfg)}
cases = {"typo": ["learner=anneal_tau", "anneal.rat=1"], "type": ["learner=anneal_tau", "anneal.rate=fast"],
         "unread": ["learner=gamma_net", "anneal.rate=1"]}
for name, extra in cases.items():
    try:
        load_config(None, [*base, *extra])
    except ConfigError as err:
        out[name] = str(err)
print(json.dumps(out))
'''
    out = run_script(tmp_path, "my_methods", USER_METHODS, script)
    assert out["learners"] == ["anneal_tau", "auto", "gamma_net", "loss"] and out["rate"] == 0.5
    assert "\nanneal:\n  rate: 0.5\noptim:" in out["yaml"]  # its section after the built-in ones
    assert out["typo"].startswith("unknown config key 'anneal.rat' (did you mean 'anneal.rate'?)")
    assert out["type"].startswith("invalid value for config key 'anneal.rate'")
    assert out["unread"] == "override 'anneal.rate' has no effect: learner gamma_net reads the section meta, not anneal"


@pytest.mark.slow
def test_own_loss_and_learner_run_through_sweep_report_and_grid_pick(tmp_path):
    (tmp_path / "my_methods.py").write_text(USER_METHODS)
    (tmp_path / "train_mine.py").write_text(LAUNCHER)
    configs = tmp_path / "configs"
    configs.mkdir()
    base = {"data": {"name": "mnist1d", "root": str(tmp_path / "cache"), "options": {"num_samples": 1500},
                     "batch_size": 64, "eval_batch_size": 256},
            "model": {"name": "mlp", "options": {"hidden": [32]}}, "optim": {"lr": 0.05},
            "schedule": {"epochs": 2, "milestones": [2]}, "eval": {"bootstrap": 0},
            "run": {"torch_threads": 1}, "logging": {"tensorboard": False, "progress_bar": False,
                                                      "reliability_every": 0}}
    (configs / "base.yaml").write_text(json.dumps(base))
    methods = {"ce": {"loss": {"name": "ce"}},
               "my_focal": {"loss": {"name": "focal", "params": {"gamma": 2.5}}},  # grid points by their record
               "focal_one": {"loss": {"name": "focal", "params": {"gamma": 1.0}}},
               "annealed": {"loss": {"name": "tempered_ce", "params": {"tau": 1.0}},
                            "learner": "anneal_tau", "anneal": {"rate": 0.25}}}
    for name, part in methods.items():
        (configs / f"{name}.yaml").write_text(json.dumps({"base": "base.yaml", **part}))
    out = tmp_path / "sweep"
    sweep = [sys.executable, str(REPO / "scripts" / "sweep.py"), "--configs",
             *[str(configs / f"{m}.yaml") for m in methods], "--seeds", "0", "1", "--out", str(out), "--jobs", "2",
             "--train-cmd", f"{shlex.quote(sys.executable)} {shlex.quote(str(tmp_path / 'train_mine.py'))}"]
    env = {"PYTHONPATH": f"{tmp_path}:{REPO}", "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"}
    done = subprocess.run(sweep, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr

    for seed in (0, 1):
        run = out / "annealed" / f"seed{seed}"
        metrics = json.loads((run / "metrics.json").read_text())
        assert metrics["method"]["loss"] == {"name": "tempered_ce", "params": {"tau": 1.0}}
        assert metrics["method"]["learner"] == {"name": "anneal_tau", "settings": {"rate": 0.25}}  # its own section
        history = json.loads((run / "history.json").read_text())
        assert [row["train"]["tau"] for row in history] == [1.25, 1.5]  # the learner acted once per epoch

    from metacal.report.cli import main as report_main

    page = tmp_path / "page.md"
    assert report_main([str(out), "--out", str(page), "--calibrators", "ts_nll"]) == 0
    text = page.read_text()
    # the grid is CE and the two focal runs, found by what they trained; the user's method is a row of its own
    assert "among CE, Focal γ = 1, Focal γ = 2.5 — seed 0: " in text
    assert "| annealed |" in text
    picked = text.split("among CE, Focal γ = 1, Focal γ = 2.5 — ")[1].split("\n")[0]
    assert picked.count("seed ") == 2 and "annealed" not in picked


def test_own_calibrator_is_chosen_fitted_saved_and_exported(tmp_path, mnist1d_run):
    run = copy_run(mnist1d_run, tmp_path / "run")
    script = f'''
import json
from pathlib import Path

import torch
import my_calibrator
import metacal
from metacal.evaluate.files import evaluate
from metacal.posthoc import Calibrator, CalibratorSpec, available, register
from metacal.posthoc.choice import parse_choice
from metacal.predictions import Predictions

g = torch.Generator().manual_seed(0)
shift = torch.tensor([2.0, 0.0, -2.0], dtype=torch.float64)  # the labels' prior differs from the model's

def draw(n):
    z = torch.randn(n, 3, generator=g, dtype=torch.float64) * 1.5
    return Predictions.from_logits(z, torch.multinomial(torch.softmax(z + shift, 1), 1, generator=g).squeeze(1))

result = evaluate(draw(4000), calib=draw(4000), choice="prior_shift")
model = metacal.load({str(run)!r}, calibrator="prior_shift", device="cpu")
x = torch.randn(7, 1, 40, generator=g)
program = torch.export.load(str(model.export({str(tmp_path / "m.pt2")!r}))).module()
try:
    register(CalibratorSpec("not_one", "N", "not a calibrator", lambda num_bins: object()))
except TypeError as err:
    refused = str(err)
print(json.dumps({{"last": available()[-1], "all": "prior_shift" in parse_choice("all", "report"),
                  "ece": result["ece"], "ece_after": result["after_prior_shift"]["ece"],
                  "bias": result["calibrator_params"]["prior_shift"],
                  "export_gap": float((program(x) - model.predict_proba(x)).abs().max()),
                  "saved": sorted(p.name for p in (Path({str(run)!r}) / "calibration").iterdir()),
                  "refused": refused}}))
'''
    out = run_script(tmp_path, "my_calibrator", USER_CALIBRATOR, script)
    assert out["last"] == "prior_shift" and out["all"]  # after the built-in ones; not shift-aware, so in "all"
    # fitted on one shifted draw, it undoes most of the other's miscalibration: ECE 17.1% → 3.1%
    assert (out["ece"], out["ece_after"]) == pytest.approx((0.1712680869, 0.0314239818), rel=1e-6)
    assert list(out["bias"].values()) == pytest.approx([0.7768218202, -0.4070316223, -1.7954375430], rel=1e-6)
    assert out["export_gap"] <= 1e-12 and "prior_shift.pt" in out["saved"]
    assert out["refused"] == "post-hoc calibrator 'not_one' builds a object, not a metacal.posthoc.base.Calibrator"


def test_own_corruption_family_joins_the_suite_held_out(tmp_path, fashion_gz_dir):  # noqa: F811
    script = f'''
import json
import torch
import my_corruption
from metacal.data import build
from metacal.data import shift_suites as ss

bundle = build("fashion_mnist", root={str(fashion_gz_dir.root)!r})
raw = bundle.test.dataset.images.float() / 255
x, _ = ss.shifted_split(bundle, "corruptions", "invert", 5)
print(json.dumps({{"families": ss.suite_families(bundle, "corruptions"), "fit": ss.fit_families(bundle, "corruptions"),
                  "held_out": ss.held_out_families(bundle, "corruptions"),
                  "gap": float((x - ((1 - raw) - 0.2860) / 0.3530).abs().max())}}))
'''
    out = run_script(tmp_path, "my_corruption", USER_CORRUPTION, script)
    assert out["families"][-1] == "invert" and len(out["families"]) == 10
    assert out["fit"] == ["gaussian_noise", "gaussian_blur", "contrast", "rotate"] and "invert" in out["held_out"]
    assert out["gap"] < 1e-5  # severity 5 is the negative, normalised like the run's loader
