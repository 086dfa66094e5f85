"""The run directory: its layout, and the typed reader that train, evaluate, report and sweep share.

A run writes its directory through :class:`RunPaths` (metacal/train/run_dir.py makes, checks and clears it);
everything that reads runs back goes through :func:`read_run` / :func:`find_runs`. A sweep writes
``OUT/<config-stem>/seed<S>/``: the method is the run folder's parent, the seed comes from its name.

Layout::

    run_dir/
      config.yaml            fully resolved config
      predictor.json         model, classes, input kind/shape, mean/std: what metacal.load needs besides the
                             weights (metacal.run.predictor_info)
      runtime.json           {"sessions": [...]}: per start (and resume) the processes, device, distributed
                             backend, mixed precision, the processes the launcher asked for, versions
      tensorboard/           TensorBoard event files
      checkpoints/ckpt-*/    complete checkpoints (accelerate save_state + manifest; see metacal.train.checkpoint)
      checkpoints/latest     symlink to the newest one (end of an epoch, or mid-epoch with
                             run.checkpoint_every_steps or after SIGTERM)
      checkpoints/best       symlink to the end-of-epoch checkpoint with the best validation score
      predictions/{val,test}.npz   logits, labels (and γ with a γ-Net) of the selected (best) epoch
                             (format: metacal.predictions)
      reliability.png        reliability diagram of the selected epoch on the test set
      metrics.json           {"epoch", "val", "test", "test_after_ts"} of the selected epoch, "runtime"
                             (num_processes, torch_threads, device, per-process batch sizes)
      history.json           per-epoch train/val/test numbers (curves)
      calibration/ts_nll.pt  the temperature scaling of test_after_ts (fitted on val); metacal.load adds
                             calibration/<name>.pt for other calibrators (metacal.run.calibration)

A run is finished when metrics.json says ``"finished": true`` (written last, by metacal/train/outputs.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from metacal.predictions import Predictions, load_predictions

from .method import Method, method_of_run
from .renamed_keys import upgrade_command


@dataclass(frozen=True)
class RunPaths:
    """The paths of one run directory's files (the layout above)."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def runtime(self) -> Path:
        return self.root / "runtime.json"

    @property
    def tensorboard(self) -> Path:
        return self.root / "tensorboard"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def latest(self) -> Path:
        return self.checkpoints / "latest"

    @property
    def best(self) -> Path:
        return self.checkpoints / "best"

    @property
    def predictions(self) -> Path:
        return self.root / "predictions"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.json"

    @property
    def history(self) -> Path:
        return self.root / "history.json"

    @property
    def reliability(self) -> Path:
        return self.root / "reliability.png"


#: any one of these makes a directory a run directory
RUN_MARKERS = tuple(getattr(RunPaths(Path()), name).name for name in ("config", "metrics", "history", "predictions",
                                                                      "checkpoints"))
_SEED_DIR = re.compile(r"^seed(\d+)$")

SWEEP_COMMAND_FILE = "sweep_command.txt"  # written by scripts/sweep.py into its --out, read by the report


def read_sweep_command(root: str | Path) -> str | None:
    """The command scripts/sweep.py recorded in ``root`` (None when it recorded none), in the current config keys:
    a command saved before the automatic γ had its own section reads as the one that makes the same runs now
    (metacal/run/renamed_keys.py)."""
    made = Path(root) / SWEEP_COMMAND_FILE
    return upgrade_command(made.read_text(encoding="utf-8").strip()) if made.is_file() else None


def is_finished(run_dir: str | Path) -> bool:
    """metacal.train wrote its last output: metrics.json has ``"finished": true``."""
    metrics = read_json(RunPaths(Path(run_dir)).metrics)
    return bool(metrics and metrics.get("finished") is True)


def has_checkpoints(run_dir: str | Path) -> bool:
    """True when ``checkpoints/`` exists and holds at least one entry (something to resume from).

    Hidden entries (``.tmp-*``: a checkpoint being written when the run was killed) do not count: such a
    run has nothing to resume from and must be restarted."""
    ckpt = RunPaths(Path(run_dir)).checkpoints
    return ckpt.is_dir() and any(not entry.name.startswith(".") for entry in ckpt.iterdir())


def read_json_value(path: Path) -> Any:
    """The JSON value in ``path``, or None if the file is missing or not valid JSON (e.g. half-written)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        return None


def read_json(path: Path) -> dict | None:
    """The JSON object in ``path``, or None if it is missing, unreadable or not an object."""
    data = read_json_value(path)
    return data if isinstance(data, dict) else None


def read_history(path: Path) -> list[dict]:
    """The epoch records of history.json (a JSON list of objects), in file order; [] if missing or unreadable."""
    data = read_json_value(path)
    return [r for r in data if isinstance(r, dict)] if isinstance(data, list) else []


def read_config(path: Path) -> dict:
    """Resolved config as nested dicts ({} if missing or unreadable)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except (FileNotFoundError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def config_get(config: dict, dotted: str, default: Any = None) -> Any:
    """``config_get(cfg, "run.seed")`` → cfg["run"]["seed"], or ``default`` if any level is missing."""
    node: Any = config
    for key in dotted.split("."):
        if not isinstance(node, dict) or key not in node:
            return default
        node = node[key]
    return node


@dataclass
class Run:
    """Everything a report needs from one run directory; absent pieces are None / empty."""

    path: Path
    method: str
    seed: int | None
    config: dict = field(default_factory=dict)
    metrics: dict | None = None
    history: list[dict] = field(default_factory=list)
    finished: bool = False
    resumable: bool = False

    @property
    def complete(self) -> bool:
        """Reportable: metrics.json with test metrics exists (a run without it is reported as missing)."""
        return bool(self.metrics) and isinstance(self.metrics.get("test"), dict)

    def predictions_path(self, split: str) -> Path:
        return RunPaths(self.path).predictions / f"{split}.npz"

    def has_predictions(self, split: str) -> bool:
        return self.predictions_path(split).is_file()

    def predictions(self, split: str) -> Predictions:
        return load_predictions(self.predictions_path(split))

    def validation_for_posthoc(self) -> Predictions:
        """predictions/val.npz, or, when ``python -m metacal.evaluate <run> --shift SUITE`` has saved it, the same
        predictions with their perturbed copy (shift/val_<suite>.npz, the first by name), which perturbation TS
        is fitted on."""
        saved = sorted((self.path / "shift").glob("val_*.npz"))
        return load_predictions(saved[0]) if saved else self.predictions("val")

    @property
    def spec(self) -> Method | None:
        """What the run trained (metrics.json's ``method`` record, else config.yaml's loss and learner), named by
        :attr:`method`; None when neither says."""
        return method_of_run(self.config, self.metrics, name=self.method)

    def epoch_times(self) -> list[float]:
        """``time_s`` of every epoch record that has one."""
        return [float(r["time_s"]) for r in self.history if isinstance(r.get("time_s"), (int, float))]


def is_run_dir(path: Path) -> bool:
    """A directory holding any run marker, or named ``seed<S>``."""
    return path.is_dir() and (bool(_SEED_DIR.match(path.name)) or any((path / m).exists() for m in RUN_MARKERS))


def read_run(run_dir: str | Path) -> Run:
    """Read one run directory. Method = parent directory name for ``.../<stem>/seed<S>`` layouts, else the
    config's ``run.method`` or the directory name; seed = ``S`` from ``seed<S>``, else the config's run.seed."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run directory not found: {run_dir}")
    paths = RunPaths(run_dir)
    config = read_config(paths.config)
    match = _SEED_DIR.match(run_dir.name)
    if match:
        method, seed = run_dir.parent.name, int(match.group(1))
    else:
        method = str(config_get(config, "run.method", run_dir.name))
        cfg_seed = config_get(config, "run.seed")
        seed = int(cfg_seed) if isinstance(cfg_seed, (int, float)) else None
    return Run(
        path=run_dir,
        method=method,
        seed=seed,
        config=config,
        metrics=read_json(paths.metrics),
        history=read_history(paths.history),
        finished=is_finished(run_dir),
        resumable=has_checkpoints(run_dir),
    )


def find_runs(root: str | Path, max_depth: int = 4) -> list[Run]:
    """All run directories under ``root`` (or ``root`` itself), sorted by (method, seed)."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"run root not found: {root} (pass the --out directory of a sweep)")
    found: list[Path] = []

    def walk(path: Path, depth: int) -> None:
        if is_run_dir(path):
            found.append(path)
            return
        if depth >= max_depth:
            return
        for child in sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")):
            walk(child, depth + 1)

    walk(root, 0)
    runs = [read_run(p) for p in found]
    return sorted(runs, key=lambda r: (r.method, -1 if r.seed is None else r.seed, str(r.path)))


def check_one_dataset(runs: list[Run], root: str | Path) -> None:
    """Raise ValueError (one line) when the runs' configs name more than one ``data.name``: a results page
    compares methods on one dataset, and averaging across datasets would mix unrelated numbers."""
    by_dataset: dict[str, list[Run]] = {}
    for run in runs:
        name = config_get(run.config, "data.name")
        if name is not None:
            by_dataset.setdefault(str(name), []).append(run)
    if len(by_dataset) > 1:
        parts = []
        for name, group in sorted(by_dataset.items()):
            shown = ", ".join(str(r.path.relative_to(root)) if r.path.is_relative_to(root) else str(r.path)
                              for r in group[:2])
            more = ", …" if len(group) > 2 else ""
            parts.append(f"{name} ({len(group)} run{'s' if len(group) > 1 else ''}: {shown}{more})")
        raise ValueError(f"the runs under {root} mix datasets: {'; '.join(parts)}; report each dataset's runs "
                         "from a folder of its own")
