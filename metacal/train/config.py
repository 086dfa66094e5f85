"""The trainer's configuration schema (dataclasses checked by OmegaConf) and its YAML loader.

A config file is YAML 1.2 (metacal/train/yaml_loader.py: ``5e-4`` is a float, ``no`` is text) with the sections below.
``base: ../base.yaml`` (a path, or a list of paths, relative to the file) names files merged underneath
it, so per-method files share one base per dataset; a circular chain is refused. A method needs no file per
dataset: ``configs/<dataset>/<method>.yaml`` with no file of that name is composed at load time as
``base: [base.yaml, <configs>/methods/<method>.yaml]`` (:func:`composed_bases`). Everything merges with
``OmegaConf.merge``: mappings key by key, lists and scalars replaced. Dotted overrides
(``optim.lr=0.05``, values read as YAML 1.2) are applied last. Merging into the structured
:class:`Config` checks every key and type; any failure is one :class:`ConfigError` line naming the key
(for an unknown key also the valid keys of its section). Free-form mappings (``loss.params``,
``model.options`` …) are handed to the component's constructor, which validates them.

Defaults follow Wang & Golebiowski 2024 §4 (docs/conventions.md#data-splits): SGD lr 0.1, momentum 0.9, wd 5e-4, batch
128, 350 epochs, lr ×0.1 at epochs 150 and 250, selection by best validation error; a learner's section has the
defaults of its own dataclass (the meta step's: metacal/meta/settings.py).
"""

from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, MissingMandatoryValue, OmegaConfBaseException

from metacal.meta.learners import LEARNERS, learner_section, learner_sections, settings_fact
from metacal.metrics.bootstrap import METHODS as CI_METHODS
from metacal.registry import unknown_name
from metacal.run.renamed_keys import check_renamed, upgrade_saved
from metacal.train.epoch_eval import SELECT_BY
from metacal.train.optim import OPTIMIZERS
from metacal.train.schedules import SCHEDULES
from metacal.train.yaml_loader import load_yaml
from metacal.train.value_ranges import out_of_range
from metacal.train.schema import (  # noqa: F401  (re-exported: the schema is part of this API)
    Config, DataConfig, EvalConfig, LoggingConfig, LossConfig, ModelConfig, OptimConfig, RunConfig, ScheduleConfig,
    config_class,
)


class ConfigError(ValueError):
    """A bad config file or override; the message is one line that says what to fix."""


# The allowed values of the keys that name a fixed choice, each list asked from the module that owns it (add a
# schedule there and the config accepts it); a learner's section declares its own (its dataclass's CHOICES,
# metacal/meta/learners.py). Names in a registry (data, model, loss, objective, learner) are checked by the
# registry when the run is built (metacal/train/components.py).
CHOICES = {
    "optim.name": OPTIMIZERS,
    "schedule.name": SCHEDULES,
    "eval.select_by": SELECT_BY,
    "eval.ci_method": CI_METHODS,
    "run.mixed_precision": ("no", "fp16", "bf16"),  # accelerate's mixed_precision values (fp8 left out)
}


def _read_yaml(path: Path) -> DictConfig:
    """One file, read with YAML 1.2 scalars (metacal/train/yaml_loader.py: ``no`` is text, ``5e-4`` a float)."""
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML ({' '.join(str(err).split())})") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot be read ({getattr(err, 'strerror', None) or err})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    return OmegaConf.create(data)


def methods_folder(folder: str | Path) -> Path | None:
    """The nearest ``methods/`` folder above a dataset folder (``configs/methods`` for ``configs/<dataset>``)."""
    return next((above / "methods" for above in Path(folder).resolve().parents if (above / "methods").is_dir()), None)


def composed_bases(path: str | Path) -> list[Path] | None:
    """``<folder>/<method>.yaml`` that is no file, in a folder with a ``base.yaml``, where the nearest folder above
    holds ``methods/<method>.yaml``: ``[<folder>/base.yaml, <that>/methods/<method>.yaml]``, the two files it stands
    for (a dataset × method pair, as if written ``base: [base.yaml, ../methods/<method>.yaml]``); else None."""
    path = Path(path)
    if path.is_file() or path.suffix != ".yaml" or path.stem == "base" or not (path.parent / "base.yaml").is_file():
        return None
    methods = methods_folder(path.parent)
    return [path.parent / "base.yaml", methods / path.name] if methods and (methods / path.name).is_file() else None


def config_exists(path: str | Path) -> bool:
    """A config file, or a dataset × method pair composed at load time (:func:`composed_bases`)."""
    return Path(path).is_file() or composed_bases(path) is not None


def method_names(folder: str | Path) -> list[str]:
    """The methods a dataset folder runs: its own files (base.yaml aside) and the nearest ``methods/`` above it."""
    names = {p.stem for p in Path(folder).glob("*.yaml") if p.stem != "base"}
    if (methods := methods_folder(folder)) is not None:
        names |= {p.stem for p in methods.glob("*.yaml")}
    return sorted(names)


def missing_config(path: str | Path) -> str:
    """The one-line error for a config path that is neither a file nor a composable dataset × method pair."""
    path = Path(path)
    if path.suffix == ".yaml" and (path.parent / "base.yaml").is_file():
        return f"config file not found: {path}; {unknown_name('method', path.stem, method_names(path.parent))}"
    return f"config file not found: {path}"


def load_file(path: str | Path, _seen: tuple[Path, ...] = ()) -> DictConfig:
    """Read a config file and the chain of ``base:`` files beneath it, merged into one (unchecked) config."""
    if (pair := composed_bases(path)) is not None:
        return OmegaConf.merge(*(load_file(p, _seen) for p in pair))  # type: ignore[return-value]
    if not Path(path).is_file():
        raise ConfigError(missing_config(path))
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


def split_override(item: str) -> tuple[str, str]:
    """``"optim.lr=0.05"`` → ("optim.lr", "0.05"): the one place an override is taken apart; a ConfigError when it
    is not ``section.key=value`` (a key without "=" would be set to None, and "optim..lr" taken as key "" in optim)."""
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or "" in key.split("."):
        raise ConfigError(f"override {item!r} must look like section.key=value (e.g. optim.lr=0.05)")
    return key, text


def _parse_overrides(overrides: list[str]) -> DictConfig:
    """``["optim.lr=0.05", "meta.objective=dece"]`` → a config; values are YAML 1.2 (``[100,200]``, ``null``, and
    ``no`` is text: metacal/train/yaml_loader.py), read by the same loader as the files."""
    node = OmegaConf.create()
    for item in overrides:
        key, text = split_override(item)
        try:
            value = load_yaml(text)
        except yaml.YAMLError as err:
            raise ConfigError(f"override {item!r}: not valid YAML ({getattr(err, 'problem', None) or err})") from None
        OmegaConf.update(node, key, value, merge=True)
    return node


def _unknown_key(err: ConfigKeyError) -> str:
    key = str(err.full_key)
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


def choices() -> dict[str, tuple[Any, ...]]:
    """Every choice key and its allowed values, in the config's order: each learner section's own, then
    :data:`CHOICES`."""
    own = {f"{section}.{key}": tuple(valid) for section, kind in learner_sections().items()
           for key, valid in settings_fact(kind, "CHOICES", {}).items()}
    return {**own, **CHOICES}


def build_config(data: dict[str, Any] | DictConfig, overrides: list[str] = ()) -> Config:
    """Validate a merged config against the schema, the choice lists and the number ranges
    (metacal/train/value_ranges.py) and return the typed :class:`Config`; ``overrides``: the dotted ones merged
    into ``data``, each refused where the run does not read it (:func:`check_section_overrides`)."""
    try:
        node = data if isinstance(data, DictConfig) else OmegaConf.create(data)
        schema = config_class()
        for section in (f.name for f in dataclasses.fields(schema) if f.name != "learner"):
            # OmegaConf's error for `optim: 3` names the section's type but not the key
            if section in node and not isinstance(node[section], DictConfig):
                raise ConfigError(f"config key '{section}' must be a mapping of its keys; got {node[section]!r}")
        cfg: Config = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), node))  # type: ignore
    except ConfigKeyError as err:
        raise ConfigError(_unknown_key(err)) from None
    except MissingMandatoryValue as err:
        raise ConfigError(f"missing required config key '{err.full_key}'") from None
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None) or "?"
        raise ConfigError(f"invalid value for config key '{key}': {_first_line(err)}") from None
    for key, valid in choices().items():
        if (value := _get(cfg, key)) not in valid:
            raise ConfigError(f"config key '{key}': {unknown_name('value', value, valid)}")
    check_section_overrides(cfg, overrides)  # before the ranges: a value that would do nothing is refused as such
    if message := out_of_range(cfg):
        raise ConfigError(message)
    check_fine_tuning(cfg)
    return cfg


def check_fine_tuning(cfg: Config) -> None:
    """What the run's learner refuses in the rest of the config (its section's ``config_problem``: the meta step takes
    SGD only), and the optimiser keys that no single range covers (docs: configs/README.md, "Fine-tuning"; the
    numbers' ranges: value_ranges.py); the schedule checks its own (schedules.py)."""
    o = cfg.optim
    section = learner_section(cfg.learner)
    refuses = settings_fact(getattr(cfg, section), "config_problem") if section else None
    if refuses is not None and (message := refuses(cfg)):
        raise ConfigError(message)
    if len(o.betas) != 2 or not all(0 <= b < 1 for b in o.betas):
        raise ConfigError(f"optim.betas must be two numbers in [0, 1); got {list(o.betas)}")


def load_config(path: str | Path | None, overrides: list[str] = (), base: dict[str, Any] | None = None) -> Config:
    """File (with its ``base:`` chain) + dotted overrides → validated :class:`Config`.

    ``base`` is a dict merged underneath the file (used by ``--resume`` with a run's saved config).
    """
    layers = [OmegaConf.create(base or {})]
    if path is not None:
        layers.append(load_file(path))
    layers.append(_parse_overrides(list(overrides)))
    merged = OmegaConf.merge(*layers)
    keys = [split_override(item)[0] for item in overrides]
    if message := check_renamed(OmegaConf.to_container(merged), keys):  # type: ignore[arg-type]
        raise ConfigError(message)
    cfg = build_config(merged, list(overrides))  # type: ignore[arg-type]
    if cfg.run.method is None and path is not None:
        cfg.run.method = Path(path).stem
    return cfg


def load_saved_config(path: str | Path) -> Config:
    """A run directory's config.yaml as the current keys read it (saved before a key moved: translated,
    metacal/run/renamed_keys.py; the section of a learner not registered here set aside, :func:`without_foreign`);
    one ConfigError line when it is not valid YAML or not a config."""
    node = _read_yaml(Path(path))
    return build_config(without_foreign(upgrade_saved(OmegaConf.to_container(node))))  # type: ignore[arg-type]


def without_foreign(saved: dict[str, Any]) -> dict[str, Any]:
    """A saved config without the sections this process has no dataclass for, when the run's learner is one of one's
    own not registered here: loading, evaluating or reporting the finished run needs no learner."""
    if saved.get("learner") is None or saved["learner"] in LEARNERS:
        return saved
    known = {f.name for f in dataclasses.fields(config_class())}
    return {key: value for key, value in saved.items() if key in known or not isinstance(value, dict)}


def check_section_overrides(cfg: Config, overrides: list[str]) -> None:
    """An override of a learner's section (``meta.*``, ``auto.*``, one's own) that this run's learner does not read
    would do nothing: refused. Keys in files stay allowed, since a dataset's base.yaml shares its settings with every
    method. A learner not registered here is reported when the run is built."""
    if cfg.learner is not None and cfg.learner not in LEARNERS:
        return
    reads = learner_section(cfg.learner)
    for item in overrides:
        key = split_override(item)[0]
        section = key.split(".")[0]
        if section in learner_sections() and section != reads:
            why = ("this run has no learner (learner is null: plain training); drop it, or set learner"
                   if reads is None else f"learner {cfg.learner} reads the section {reads}, not {section}")
            raise ConfigError(f"override {key!r} has no effect: {why}")


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
