"""The shared runner of the ablation studies: train a method variant through the trainer's public API.

A *variant* is a method config (``configs/<dataset>/<stem>.yaml``, which defines the loss and the meta
setup) plus dotted overrides; a *setting* says on what data/model and for how long it is trained. Every run
goes through :func:`metacal.train.load_config` + :func:`metacal.train.train` into its own run directory, so
the ablations train exactly what ``scripts/train.py`` trains.

``train_epochwise`` trains one epoch per call, resuming from the run's checkpoint, and hands the model after
every epoch to a callback (for per-epoch diagnostics that need the model, not only the logged numbers).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import nn

CONFIG_ROOT = Path(__file__).resolve().parents[2] / "configs"  # the checkout's configs/, beside experiments/

# Trainer options every ablation run shares: no TensorBoard/bars, one intra-op thread (tiny models).
COMMON_OVERRIDES = ("logging.tensorboard=false", "logging.progress_bar=false", "logging.reliability_every=0",
                    "run.torch_threads=1")


@dataclass(frozen=True)
class Setting:
    """Data, model and schedule shared by the variants of a study (method configs come from ``config_dir``)."""

    label: str  # shown on the page, e.g. "gaussian_mixture (K=10, d=10), mlp [64, 64], 3 epochs"
    overrides: tuple[str, ...]
    epochs: int
    config_dir: str = "fashion_mnist"
    seed: int = 0
    milestones: tuple[int, ...] | None = None  # None: one lr drop ×0.1 two thirds into training

    def all_overrides(self) -> list[str]:
        drops = self.milestones if self.milestones is not None else (max(1, (self.epochs * 2) // 3),)
        return list(COMMON_OVERRIDES) + list(self.overrides) + [
            f"schedule.epochs={self.epochs}", f"schedule.milestones=[{', '.join(str(m) for m in drops)}]",
            f"run.seed={self.seed}"]


def gaussian_mixture_setting(n_train: int, n_test: int, epochs: int, hidden: Sequence[int] = (64, 64),
                             seed: int = 0, **options: Any) -> Setting:
    """gaussian_mixture (defaults K = 10, d = 10, separation 3, σ = 1: Bayes error ≈ 0.30) with an MLP."""
    opts = {"n_train": n_train, "n_test": n_test, **options}
    text = ", ".join(f"{k}: {v}" for k, v in opts.items())
    hid = ", ".join(str(h) for h in hidden)
    return Setting(label=f"gaussian_mixture ({text}), mlp [{hid}], {epochs} epochs",
                   overrides=("data.name=gaussian_mixture", f"data.options={{{text}}}", "model.name=mlp",
                              f"model.options={{hidden: [{hid}]}}", "data.eval_batch_size=1000"),
                   epochs=epochs, seed=seed)


@dataclass(frozen=True)
class Variant:
    """One row of a study: a method config stem plus overrides (``key`` names the row)."""

    key: str
    method: str
    overrides: tuple[str, ...] = ()


@dataclass
class TrainedRun:
    key: str
    method: str
    run_dir: Path
    metrics: dict[str, Any]  # metrics.json of the run
    model: nn.Module | None  # the model after the LAST epoch (None for a reused run: finished_run)
    gamma_net: nn.Module | None
    history: list[dict[str, Any]]
    seconds: float
    cfg: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def seconds_per_epoch(self) -> float:
        """Mean trainer-measured epoch time (history ``time_s``), the first epoch (warm-up) left out if >1."""
        times = [float(h["time_s"]) for h in self.history if "time_s" in h]
        if len(times) > 1:
            times = times[1:]
        return float(np.mean(times)) if times else float("nan")


def config_path(setting: Setting, method: str) -> Path:
    from metacal.train.config import config_exists, method_names

    path = CONFIG_ROOT / setting.config_dir / f"{method}.yaml"
    if not config_exists(path):
        names = method_names(CONFIG_ROOT / setting.config_dir)
        raise ValueError(f"no method config {path}; available in configs/{setting.config_dir}: {', '.join(names)}")
    return path


def _load(setting: Setting, variant: Variant, extra: Sequence[str] = ()):
    from metacal.train import load_config

    return load_config(config_path(setting, variant.method),
                       setting.all_overrides() + list(variant.overrides) + list(extra))


def announce(setting: Setting, variant: Variant, run_dir: str | Path) -> str:
    """The line printed before a variant trains: which variant (method config + overrides) this run is."""
    extra = f" + {' '.join(variant.overrides)}" if variant.overrides else ""
    line = f"variant {variant.key}: configs/{setting.config_dir}/{variant.method}.yaml{extra} → {run_dir}"
    print(line, flush=True)
    return line


def finished_run(variant: Variant, run_dir: str | Path, cfg: Any) -> TrainedRun | None:
    """The run in ``run_dir`` if it finished (metrics.json written last) with exactly the resolved config
    ``cfg`` (its config.yaml); None otherwise. Without the model (``model``/``gamma_net`` are None) and with
    ``seconds`` = the sum of its epochs' times: for studies that read only metrics and history."""
    import json

    from metacal.train.config import to_yaml

    root = Path(run_dir)
    try:
        same = (root / "config.yaml").read_text() == to_yaml(cfg)
        if not same or not (root / "metrics.json").is_file():
            return None
        metrics = json.loads((root / "metrics.json").read_text())
        history = json.loads((root / "history.json").read_text())
    except (OSError, ValueError):
        return None
    seconds = float(sum(h.get("time_s", 0.0) for h in history))
    return TrainedRun(variant.key, variant.method, root, metrics, None, None, history, seconds, cfg)


def train_variant(setting: Setting, variant: Variant, run_dir: str | Path, reuse: bool = False) -> TrainedRun:
    """Train ``variant`` under ``setting`` into ``run_dir`` (replaced if it exists); checkpoints off.
    ``reuse``: a run already finished there with the same resolved config is read back instead (see
    :func:`finished_run`), so a killed or extended study trains only what is missing."""
    from metacal.train import prepare_run_dir, train

    cfg = _load(setting, variant, ["run.save_checkpoints=false"])
    if reuse and (done := finished_run(variant, run_dir, cfg)) is not None:
        print(f"variant {variant.key}: reused {run_dir} (finished, same config)", flush=True)
        return done
    announce(setting, variant, run_dir)
    paths = prepare_run_dir(run_dir, overwrite=True)
    t0 = time.time()
    result = train(cfg, paths)
    return TrainedRun(variant.key, variant.method, Path(run_dir), result.metrics, result.model, result.gamma_net,
                      list(result.state.history), time.time() - t0, cfg)


def train_epochwise(setting: Setting, variant: Variant, run_dir: str | Path,
                    on_epoch: Callable[[int, TrainedRun], None], snapshots: Sequence[int] | None = None) -> TrainedRun:
    """Train in stages (each stage resumes the run's checkpoint; the lr schedule is the full one) and call
    ``on_epoch(epoch, run)`` with the model after each epoch in ``snapshots`` (default: every epoch; the last
    epoch is always included)."""
    from metacal.train import prepare_run_dir, train

    stops = sorted({e for e in (snapshots or range(1, setting.epochs + 1)) if 1 <= e <= setting.epochs}
                   | {setting.epochs})
    announce(setting, variant, run_dir)
    t0 = time.time()
    run = None
    for i, epoch in enumerate(stops):
        cfg = _load(setting, variant, [f"schedule.epochs={epoch}", "run.save_checkpoints=true"])
        # the milestones come from the full schedule (Setting.all_overrides) and stay fixed across calls
        paths = prepare_run_dir(run_dir, resume=i > 0, overwrite=i == 0)
        result = train(cfg, paths, resume=i > 0)
        run = TrainedRun(variant.key, variant.method, Path(run_dir), result.metrics, result.model,
                         result.gamma_net, list(result.state.history), time.time() - t0, cfg)
        on_epoch(epoch, run)
    assert run is not None
    return run


def build_bundle(cfg: Any):
    """The run's data bundle, rebuilt from its config (same seed → same splits and samples)."""
    from metacal import data

    return data.build(cfg.data.name, root=cfg.data.root, seed=cfg.data.seed, **cfg.data.options)


def stack(dataset: Any, batch_size: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
    """All ``(inputs, labels)`` of a dataset as two tensors (in order)."""
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=False)
    xs, ys = zip(*[(x, y) for x, y in loader])
    return torch.cat(xs), torch.cat(ys).long()


@torch.no_grad()
def predict_logits(model: nn.Module, inputs: torch.Tensor, batch_size: int = 4096) -> torch.Tensor:
    """Eval-mode logits (float64, CPU) of ``inputs`` (moved to the model's device batch by batch)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    out = [model(inputs[i:i + batch_size].to(device)).double().cpu() for i in range(0, len(inputs), batch_size)]
    model.train(was_training)
    return torch.cat(out)


def fashion_mnist_setting(epochs: int, hidden: Sequence[int] = (256, 256), max_steps: int | None = None,
                          seed: int = 0) -> Setting:
    """Fashion-MNIST (8:1:1 split of the official train set, official test set) with an MLP."""
    hid = ", ".join(str(h) for h in hidden)
    ov = ["data.name=fashion_mnist", "model.name=mlp", f"model.options={{hidden: [{hid}]}}",
          "data.eval_batch_size=1000"]
    label = f"fashion_mnist, mlp [{hid}], {epochs} epochs"
    if max_steps is not None:
        ov.append(f"run.max_steps_per_epoch={max_steps}")
        label += f" of at most {max_steps} steps (batch 128)"
    return Setting(label=label, overrides=tuple(ov), epochs=epochs, seed=seed)
