"""A user's own loss and own learner, in a module of their own, run through a sweep, the report and the grid pick
with no edit to metacal: the loss registers in ``metacal.losses.LOSSES``, the learner in ``metacal.meta.LEARNERS``,
the trainer is started by a two-line launcher that imports the module (``--train-cmd``), and the report reads
what each run recorded (metrics.json ``"method"``), not file names."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

USER_MODULE = '''
import torch
import torch.nn.functional as F

from metacal.losses import LOSSES
from metacal.losses.base import Loss, reduce
from metacal.meta import LEARNERS, PlainStep


@LOSSES.register("tempered_ce")
class TemperedCE(Loss):
    """CE of logits / tau."""

    def __init__(self, tau: float = 1.0, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.tau = float(tau)

    def forward(self, logits, targets):
        return reduce(F.cross_entropy(logits / self.tau, targets, reduction="none"), self.reduction)


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


@LEARNERS.register("anneal_tau")
def build_anneal_tau(cfg, accelerator, model, loss_fn, optimizer, bundle, steps_per_epoch):
    return AnnealTau(model, loss_fn, optimizer, accelerator.backward, steps_per_epoch, rate=cfg.meta.lr)
'''

LAUNCHER = '''import sys
import my_methods  # noqa: F401  (registers tempered_ce and anneal_tau)
from metacal.train.cli import main
sys.exit(main())
'''


@pytest.mark.slow
def test_own_loss_and_learner_run_through_sweep_report_and_grid_pick(tmp_path):
    (tmp_path / "my_methods.py").write_text(USER_MODULE)
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
                            "learner": "anneal_tau", "meta": {"lr": 0.25}}}
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
        assert metrics["method"]["learner"]["name"] == "anneal_tau"
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
