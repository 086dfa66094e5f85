"""The trainer's configuration schema (dataclasses checked by OmegaConf) and its YAML loader.

A config file is YAML with the sections below. ``base: ../base.yaml`` (a path, or a list of paths,
relative to the file) names files merged underneath it, so per-method files share one base per dataset.
Mappings merge key by key; lists and scalars are replaced. Dotted overrides (``optim.lr=0.05``) are
applied last. Every key is checked against the schema: an unknown key or a value of the wrong type
raises :class:`ConfigError` naming the key (and the valid keys of its section). Free-form mappings
(``loss.params``, ``model.options`` …) are handed to the component's constructor, which validates them.

Defaults follow seed 003 §4 (REFERENCE.md §1): SGD lr 0.1, momentum 0.9, wd 5e-4, batch 128,
350 epochs, lr ×0.1 at epochs 150 and 250, selection by best validation error; meta-optimiser
Adam lr 1e-3 (Bohdal et al.'s meta-calibration code).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml
from omegaconf import MISSING, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException


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
    lr: float = 1e-3
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
    gamma: float = 0.1  # lr factor at each milestone (MultiStepLR)


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
    "meta.backend": ("higher", "jvp", "head"),
    "meta.learner": ("gamma_net", "loss"),
    "meta.optimizer": ("adam", "sgd"),
    "optim.name": ("sgd",),
    "eval.select_by": ("error", "nll", "ece"),
    "run.mixed_precision": ("no", "fp16", "bf16"),
}


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads ``5e-4`` as a float (YAML 1.1 demands a dot: ``5.0e-4``)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"),
    list("-+0123456789."),
)


def parse_value(text: str) -> Any:
    """A YAML scalar/list from the command line: ``0.05`` → float, ``[150, 250]`` → list, ``dece`` → str."""
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError:
        return text


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.load(path.read_text(), Loader=_Loader)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML ({' '.join(str(err).split())})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    return data


def deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key (``top`` wins); anything else in ``top`` replaces ``base``."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def load_file(path: str | Path, _seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """Read a config file and the chain of ``base:`` files beneath it, merged into one dict."""
    path = Path(path).resolve()
    if path in _seen:
        raise ConfigError(f"{path}: circular 'base:' chain")
    data = _read_yaml(path)
    bases = data.pop("base", None)
    if bases is None:
        return data
    merged: dict[str, Any] = {}
    for base in [bases] if isinstance(bases, str) else list(bases):
        merged = deep_merge(merged, load_file(path.parent / str(base), _seen + (path,)))
    return deep_merge(merged, data)


def overrides_to_dict(overrides: list[str]) -> dict[str, Any]:
    """``["optim.lr=0.05", "meta.objective=dece"]`` → nested dict."""
    out: dict[str, Any] = {}
    for item in overrides:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            raise ConfigError(f"override {item!r} must look like section.key=value (e.g. optim.lr=0.05)")
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r} conflicts with an earlier override of {part!r}")
        node[parts[-1]] = parse_value(text)
    return out


def _check_keys(data: Any, schema: type, prefix: str = "") -> None:
    """Reject keys the schema does not have (free-form ``Dict`` fields accept anything)."""
    if not isinstance(data, dict):
        where = prefix.rstrip(".") or "the config"
        raise ConfigError(f"'{where}' must be a mapping, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(schema)}
    for key, value in data.items():
        if key not in fields:
            where = f"in {prefix.rstrip('.')}" if prefix else "at the top level"
            raise ConfigError(
                f"unknown config key '{prefix}{key}'; valid keys {where}: {', '.join(fields)}"
            )
        sub = fields[key].type
        sub_cls = globals().get(sub) if isinstance(sub, str) else sub
        if isinstance(sub_cls, type) and dataclasses.is_dataclass(sub_cls):
            _check_keys(value, sub_cls, f"{prefix}{key}.")


def _first_line(err: OmegaConfBaseException) -> str:
    return str(getattr(err, "msg", None) or err).splitlines()[0]


def build_config(data: dict[str, Any]) -> Config:
    """Validate a merged dict against the schema and return the typed :class:`Config`."""
    _check_keys(data, Config)
    try:
        merged = OmegaConf.merge(OmegaConf.structured(Config), data)
        cfg: Config = OmegaConf.to_object(merged)  # type: ignore[assignment]
    except MissingMandatoryValue as err:
        raise ConfigError(f"missing required config key '{err.full_key}'") from None
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None) or "?"
        raise ConfigError(f"invalid value for config key '{key}': {_first_line(err)}") from None
    for key, valid in CHOICES.items():
        section, name = key.split(".")
        value = getattr(getattr(cfg, section), name)
        if value not in valid:
            raise ConfigError(f"config key '{key}' must be one of {', '.join(valid)}; got {value!r}")
    if cfg.data.batch_size <= 0 or cfg.meta.batch_size <= 0 or cfg.data.eval_batch_size <= 0:
        raise ConfigError("batch sizes (data.batch_size, data.eval_batch_size, meta.batch_size) must be > 0")
    if cfg.run.checkpoint_every_steps < 0:
        raise ConfigError(f"run.checkpoint_every_steps must be >= 0 (0: only at epoch ends); "
                          f"got {cfg.run.checkpoint_every_steps}")
    if cfg.schedule.epochs <= 0:
        raise ConfigError(f"schedule.epochs must be > 0; got {cfg.schedule.epochs}")
    return cfg


def load_config(path: str | Path | None, overrides: list[str] = (), base: dict[str, Any] | None = None) -> Config:
    """File (with its ``base:`` chain) + dotted overrides → validated :class:`Config`.

    ``base`` is a dict merged underneath the file (used by ``--resume`` with a run's saved config).
    """
    data: dict[str, Any] = dict(base or {})
    if path is not None:
        data = deep_merge(data, load_file(path))
    data = deep_merge(data, overrides_to_dict(list(overrides)))
    return build_config(data)


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
