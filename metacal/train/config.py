"""The trainer's configuration schema (dataclasses checked by OmegaConf) and its YAML loader.

A config file is YAML (read by OmegaConf, so ``5e-4`` is a float) with the sections below.
``base: ../base.yaml`` (a path, or a list of paths, relative to the file) names files merged underneath
it, so per-method files share one base per dataset; a circular chain is refused. Everything merges with
``OmegaConf.merge``: mappings key by key, lists and scalars replaced. Dotted overrides
(``optim.lr=0.05``, ``OmegaConf.from_dotlist``) are applied last. Merging into the structured
:class:`Config` checks every key and type; any failure is one :class:`ConfigError` line naming the key
(for an unknown key also the valid keys of its section). Free-form mappings (``loss.params``,
``model.options`` …) are handed to the component's constructor, which validates them.

Defaults follow Wang & Golebiowski 2024 §4 (docs/conventions.md#data-splits): SGD lr 0.1, momentum 0.9, wd 5e-4, batch
128, 350 epochs, lr ×0.1 at epochs 150 and 250, selection by best validation error; meta-optimiser
Adam (Bohdal et al.'s meta-calibration code) with lr 1e-4, not their 1e-3 (see ``MetaConfig.lr``).
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml
from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, MissingMandatoryValue, OmegaConfBaseException

from metacal.meta.learner import BACKENDS, HORIZONS


class ConfigError(ValueError):
    """A bad config file or override; the message is one line that says what to fix."""


@dataclass
class DataConfig:
    name: str = MISSING  # a metacal.data name: mnist1d, gaussian_mixture, fashion_mnist, cifar10, …
    root: Optional[str] = None  # dataset directory (None: the dataset's default location)
    seed: int = 0  # seed of the train/val/meta-val split
    batch_size: int = 128  # GLOBAL batch: split across processes
    eval_batch_size: int = 512
    num_workers: int = 0
    options: Dict[str, Any] = field(default_factory=dict)  # passed to metacal.data.build


@dataclass
class ModelConfig:
    name: str = MISSING  # a metacal.models name: small_resnet, resnet18, mlp, cnn1d, …
    options: Dict[str, Any] = field(default_factory=dict)  # passed to metacal.models.build


@dataclass
class LossConfig:
    name: str = "ce"  # a metacal.losses name
    params: Dict[str, Any] = field(default_factory=dict)  # constructor arguments of the loss


@dataclass
class MetaConfig:
    enabled: bool = False  # False: plain training with loss; True: one meta step per iteration
    backend: str = "jvp"  # hypergradient backend of metacal.meta: higher | jvp | head
    # what the γ-Net's bias (the γ level) is differentiated through: "step" (one-step lookahead, the paper)
    # or "trajectory" (all past steps, forward-mode; metacal/meta/trajectory.py)
    horizon: str = "step"
    horizon_decay: float = 1.0  # trajectory: a step k iterations back counts β^k (1: all; 0: the last only)
    # γ-Net only: the meta lr of its per-sample shape (attention A, weight W) is lr × shape_lr_scale; its
    # bias b (the γ level) uses lr. 0 freezes the shape: one learned γ for every sample.
    shape_lr_scale: float = 1.0
    objective: str = "sece"  # a metacal.objectives name (the meta-validation objective)
    objective_params: Dict[str, Any] = field(default_factory=dict)
    # What the meta step learns: "gamma_net" (FLγ-*: focal loss with per-sample γ from a γ-Net) or
    # "loss" (the loss's own meta_parameters(), e.g. ce_learnable_l2 coefficients for CE-DECE/SECE).
    learner: str = "gamma_net"
    gamma_net: Dict[str, Any] = field(default_factory=dict)  # GammaNet options (tau, init_gamma, output …)
    ce_weight: float = 0.0  # meta objective J = objective + ce_weight·CE
    every: int = 1  # a meta step every n-th iteration (the others are plain steps at the current γ)
    max_meta_grad_norm: Optional[float] = None  # clip φ's gradient (total norm)
    max_backbone_grad_norm: Optional[float] = None  # clip the backbone's gradient in meta runs (total norm)
    optimizer: str = "adam"  # adam | sgd
    # 1e-4, not Bohdal et al.'s 1e-3: with τ = 0.01 an Adam step of 1e-3 on the γ-Net's bias moves γ by 0.1
    # per iteration and the one-step γ-Net runs away (γ ≈ 20 on the over-confident MNIST-1D regime, issue #14);
    # every shipped config uses this value except the trajectory method, whose restoring signal takes 1e-3
    lr: float = 1e-4
    weight_decay: float = 0.0
    batch_size: int = 128  # global meta-validation batch, split across processes


@dataclass
class OptimConfig:
    name: str = "sgd"
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 5e-4
    nesterov: bool = False


@dataclass
class ScheduleConfig:
    epochs: int = 350
    milestones: List[int] = field(default_factory=lambda: [150, 250])
    lr_decay: float = 0.1  # lr factor at each milestone (MultiStepLR's gamma)


@dataclass
class EvalConfig:
    num_bins: int = 15
    select_by: str = "error"  # model selection on validation: error | nll | ece
    test_every_epoch: bool = True  # evaluate the test set every epoch (curves); else only at improvements


@dataclass
class LoggingConfig:
    tensorboard: bool = True
    progress_bar: bool = True  # tqdm bars on the main process (only when stderr is a terminal)
    reliability_every: int = 1  # epochs between reliability-diagram images in TensorBoard (0: never)


@dataclass
class RunConfig:
    seed: int = 0
    mixed_precision: str = "no"  # no | fp16 | bf16
    cpu: bool = False  # force CPU even when a GPU is visible
    deterministic: bool = False  # torch.use_deterministic_algorithms (slower on GPU)
    torch_threads: Optional[int] = None  # torch.set_num_threads per process (None: torch's default);
    # 1 is much faster for tiny CPU models on a busy machine (no OpenMP spin-waiting)
    malloc_retain: bool = True  # CPU runs: glibc keeps freed memory for reuse (metacal/train/runtime.py)
    max_steps_per_epoch: Optional[int] = None  # cap on iterations per epoch (smoke tests)
    save_checkpoints: bool = True  # a checkpoint at every epoch end (needed for --resume and preemption)
    checkpoint_every_steps: int = 0  # also one every N global steps mid-epoch (0: only at epoch ends)


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    meta: MetaConfig = field(default_factory=MetaConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    run: RunConfig = field(default_factory=RunConfig)


CHOICES = {
    "meta.backend": tuple(BACKENDS),
    "meta.horizon": HORIZONS,
    "meta.learner": ("gamma_net", "loss"),
    "meta.optimizer": ("adam", "sgd"),
    "optim.name": ("sgd",),
    "eval.select_by": ("error", "nll", "ece"),
    "run.mixed_precision": ("no", "fp16", "bf16"),
}


# Renamed keys (old → new) and renamed values of a key. Files and --set using an old spelling are refused
# with a message naming the new one; a run's saved config is migrated (see upgrade_saved).
RENAMED_KEYS = {"schedule.gamma": "schedule.lr_decay"}
RENAMED_VALUES = {"loss.name": {"mmce": "ce_mmce"}}  # CE + λ·MMCE; the objective "mmce" keeps its name
# The free-form meta.step_options became typed keys of the meta section (old option → new meta key).
STEP_OPTIONS = {"ce_weight": "ce_weight", "meta_every": "every", "max_meta_grad_norm": "max_meta_grad_norm",
                "max_grad_norm": "max_backbone_grad_norm"}


def _read_yaml(path: Path) -> DictConfig:
    """One file through OmegaConf's YAML loader (which also reads ``5e-4`` as a float)."""
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        node = OmegaConf.load(path)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML ({' '.join(str(err).split())})") from None
    except OSError as err:  # unreadable, or OmegaConf's "Invalid loaded object type" for a top-level scalar
        raise ConfigError(f"{path}: {err.strerror or 'the top level must be a mapping of sections'}") from None
    if not isinstance(node, DictConfig):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    return node


def load_file(path: str | Path, _seen: tuple[Path, ...] = ()) -> DictConfig:
    """Read a config file and the chain of ``base:`` files beneath it, merged into one (unchecked) config."""
    path = Path(path).resolve()
    if path in _seen:
        raise ConfigError(f"{path}: circular 'base:' chain")
    node = _read_yaml(path)
    bases = node.pop("base", None)
    if bases is None:
        return node
    layers = [load_file(path.parent / str(base), _seen + (path,))
              for base in ([bases] if isinstance(bases, str) else bases)]
    return OmegaConf.merge(*layers, node)  # type: ignore[return-value]


def _parse_overrides(overrides: list[str]) -> DictConfig:
    """``["optim.lr=0.05", "meta.objective=dece"]`` → a config; values are YAML (``[100,200]``, ``null``)."""
    layers = [OmegaConf.create()]
    for item in overrides:
        key, sep, _ = item.partition("=")
        # OmegaConf would set a key without "=" to None, and take "optim..lr" as key "" in optim
        if not sep or "" in key.strip().split("."):
            raise ConfigError(f"override {item!r} must look like section.key=value (e.g. optim.lr=0.05)")
        try:
            layers.append(OmegaConf.from_dotlist([item]))
        except yaml.YAMLError as err:
            raise ConfigError(f"override {item!r}: not valid YAML ({getattr(err, 'problem', None) or err})") from None
    return OmegaConf.merge(*layers)  # type: ignore[return-value]


def _unknown_key(err: ConfigKeyError) -> str:
    key = str(err.full_key)
    if key in RENAMED_KEYS:
        return f"config key '{key}' was renamed to '{RENAMED_KEYS[key]}'"
    if key.startswith("meta.step_options"):
        moved = ", ".join(f"{old} → meta.{new}" for old, new in STEP_OPTIONS.items())
        return f"config key 'meta.step_options' was replaced by keys of the meta section: {moved}"
    section = key.rpartition(".")[0]
    valid = [f.name for f in dataclasses.fields(err.object_type)]
    close = difflib.get_close_matches(str(err.key), valid, n=1)
    hint = f" (did you mean '{section + '.' if section else ''}{close[0]}'?)" if close else ""
    where = f"in {section}" if section else "at the top level"
    return f"unknown config key '{key}'{hint}; valid keys {where}: {', '.join(valid)}"


def _first_line(err: OmegaConfBaseException) -> str:
    return str(getattr(err, "msg", None) or err).splitlines()[0]


def _get(cfg: Config, key: str) -> Any:
    section, name = key.split(".")
    return getattr(getattr(cfg, section), name)


def build_config(data: dict[str, Any] | DictConfig) -> Config:
    """Validate a merged config against the schema and return the typed :class:`Config`."""
    try:
        node = data if isinstance(data, DictConfig) else OmegaConf.create(data)
        for section in (f.name for f in dataclasses.fields(Config)):
            # OmegaConf's error for `optim: 3` names the section's type but not the key
            if section in node and not isinstance(node[section], DictConfig):
                raise ConfigError(f"config key '{section}' must be a mapping of its keys; got {node[section]!r}")
        cfg: Config = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(Config), node))  # type: ignore
    except ConfigKeyError as err:
        raise ConfigError(_unknown_key(err)) from None
    except MissingMandatoryValue as err:
        raise ConfigError(f"missing required config key '{err.full_key}'") from None
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None) or "?"
        raise ConfigError(f"invalid value for config key '{key}': {_first_line(err)}") from None
    for key, renamed in RENAMED_VALUES.items():
        if (value := _get(cfg, key)) in renamed:
            raise ConfigError(f"{key} '{value}' was renamed to '{renamed[value]}'")
    for key, valid in CHOICES.items():
        if (value := _get(cfg, key)) not in valid:
            raise ConfigError(f"config key '{key}' must be one of {', '.join(valid)}; got {value!r}")
    if cfg.data.batch_size <= 0 or cfg.meta.batch_size <= 0 or cfg.data.eval_batch_size <= 0:
        raise ConfigError("batch sizes (data.batch_size, data.eval_batch_size, meta.batch_size) must be > 0")
    if cfg.run.checkpoint_every_steps < 0:
        raise ConfigError(f"run.checkpoint_every_steps must be >= 0 (0: only at epoch ends); "
                          f"got {cfg.run.checkpoint_every_steps}")
    if cfg.schedule.epochs <= 0:
        raise ConfigError(f"schedule.epochs must be > 0; got {cfg.schedule.epochs}")
    if not cfg.meta.shape_lr_scale >= 0:
        raise ConfigError(f"meta.shape_lr_scale must be >= 0 (0 freezes the γ-Net's shape); got {cfg.meta.shape_lr_scale}")
    if not 0 <= cfg.meta.horizon_decay <= 1:
        raise ConfigError(f"meta.horizon_decay must be in [0, 1]; got {cfg.meta.horizon_decay}")
    if cfg.meta.horizon == "trajectory" and cfg.meta.learner != "gamma_net":
        raise ConfigError("meta.horizon=trajectory learns the γ-Net's bias: it needs meta.learner=gamma_net")
    return cfg


def upgrade_saved(data: dict[str, Any]) -> DictConfig:
    """A config saved by an earlier version with renamed keys and values in their new spelling (``--resume``)."""
    node = OmegaConf.create(data)
    for old, new in RENAMED_KEYS.items():
        section, _, name = old.rpartition(".")
        parent = OmegaConf.select(node, section)
        if isinstance(parent, DictConfig) and name in parent and OmegaConf.select(node, new) is None:
            OmegaConf.update(node, new, parent.pop(name))
    for key, renamed in RENAMED_VALUES.items():
        value = OmegaConf.select(node, key)
        if isinstance(value, str) and value in renamed:
            OmegaConf.update(node, key, renamed[value])
    meta = OmegaConf.select(node, "meta")
    if isinstance(meta, DictConfig) and "step_options" in meta:
        for old, value in (meta.pop("step_options") or {}).items():
            meta[STEP_OPTIONS.get(old, old)] = value
    return node


def load_config(path: str | Path | None, overrides: list[str] = (), base: dict[str, Any] | None = None) -> Config:
    """File (with its ``base:`` chain) + dotted overrides → validated :class:`Config`.

    ``base`` is a dict merged underneath the file (used by ``--resume`` with a run's saved config).
    """
    layers = [OmegaConf.create(base or {})]
    if path is not None:
        layers.append(load_file(path))
    layers.append(_parse_overrides(list(overrides)))
    return build_config(OmegaConf.merge(*layers))  # type: ignore[arg-type]


def to_yaml(cfg: Config) -> str:
    """The fully resolved config as YAML (what run_dir/config.yaml holds)."""
    return OmegaConf.to_yaml(OmegaConf.structured(cfg))


def to_dict(cfg: Config) -> dict[str, Any]:
    return OmegaConf.to_container(OmegaConf.structured(cfg))  # type: ignore[return-value]


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"optim": {"lr": 0.1}}`` → ``{"optim.lr": 0.1}`` (for TensorBoard hparams)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
