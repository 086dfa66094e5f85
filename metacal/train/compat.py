"""May this config continue that checkpoint? Compare the resolved configs before loading anything.

Keys that fix the architecture or the saved state (model, number of classes, loss and its state, learner and the
keys of its section that its spec names — the γ-Net, the meta optimiser and batch —, optimiser types and parameter
groups — frozen prefixes, backbone lr scale —, schedule type, data split, seed, precision) must equal the
checkpoint's; a resume with ``--set`` changes to them is refused with one message naming the key. Keys that only
steer the rest of the run (epochs, milestones, learning rates, logging, eval …) may change. A checkpoint taken
mid-epoch also fixes the batch size and the step cap (they decide which batches remain in the epoch).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from metacal.meta import LEARNERS, learner_spec
from metacal.run.layout import RunPaths
from metacal.run.renamed_keys import upgrade_saved
from metacal.wording import current

from .checkpoint import CONFIG, MANIFEST, CheckpointError, find_latest, no_checkpoint_message
from .config import Config, ConfigError, build_config, flatten, to_dict

#: the keys that fix the saved state; after ``learner`` come those of the run's learner's section (its spec's ``fixed``)
FIXED = ("data.name", "data.options", "data.seed", "model.name", "model.options", "model.freeze", "loss.name",
         "loss.params", "learner", "optim.name", "optim.backbone_lr_scale", "schedule.name", "run.seed",
         "run.mixed_precision")
FIXED_MID_EPOCH = ("data.batch_size", "run.max_steps_per_epoch")


def _value(flat: dict[str, Any], key: str) -> Any:
    """A leaf, or the sub-mapping of all leaves below ``key`` (free-form option dicts)."""
    if key in flat:
        return flat[key]
    return {k: v for k, v in flat.items() if k.startswith(key + ".")}


def parse_saved_config(text: str, where: str) -> Config:
    """The config a checkpoint was made with."""
    try:
        data = yaml.safe_load(text)
        return build_config(upgrade_saved(data if isinstance(data, dict) else {}))
    except (yaml.YAMLError, ConfigError) as err:
        raise CheckpointError(f"the config saved in {where} is unreadable ({' '.join(str(err).split())})") from None


def fixed_keys(learner: str | None) -> tuple[str, ...]:
    """:data:`FIXED` with the keys of ``learner``'s section that fix its saved state (a learner's section is unused
    by the other learners)."""
    at = FIXED.index("learner") + 1
    own = ()
    if learner is not None and learner in LEARNERS:
        spec = learner_spec(learner)
        own = tuple(f"{spec.section}.{key}" for key in spec.fixed)
    return FIXED[:at] + own + FIXED[at:]


def check_compatible(saved: Config, cfg: Config, mid_epoch: bool, where: str) -> None:
    """Raise :class:`CheckpointError` if ``cfg`` cannot continue a checkpoint made with ``saved``."""
    keys = fixed_keys(saved.learner)
    if mid_epoch:
        keys = keys + FIXED_MID_EPOCH
    old, new = flatten(to_dict(saved)), flatten(to_dict(cfg))
    for key in keys:
        a, b = _value(old, key), _value(new, key)
        if a != b:
            raise CheckpointError(
                f"cannot resume: {key} is {b!r} now but {a!r} in the checkpoint {where}; it fixes the "
                f"architecture or saved state, so start a new run (another {current().name('run_dir')}) to change it")


def checkpoint_to_resume(root: Path) -> Path:
    """The newest complete checkpoint of run directory ``root``; FileNotFoundError naming what is missing."""
    if not root.is_dir():
        raise FileNotFoundError(f"cannot resume: run directory {root} does not exist")
    latest = find_latest(RunPaths(root).checkpoints)
    if latest is None:
        raise FileNotFoundError(no_checkpoint_message(root))
    return latest


def saved_config(root: Path, latest: Path) -> Config:
    """The resolved config a resume of ``root`` continues: the checkpoint ``latest``'s own, else the run's."""
    path = latest / CONFIG if (latest / CONFIG).is_file() else RunPaths(root).config
    return parse_saved_config(path.read_text(), str(path))


def resume_point(paths, cfg: Config) -> Path:
    """The checkpoint to continue from, after checking ``cfg`` may continue it (before anything is built)."""
    latest = find_latest(paths.checkpoints)
    if latest is None:
        raise CheckpointError(no_checkpoint_message(paths.root))
    saved_text = (latest / CONFIG).read_text() if (latest / CONFIG).is_file() else None
    if saved_text is not None:
        mid_epoch = json.loads((latest / MANIFEST).read_text()).get("step_in_epoch", 0) > 0
        check_compatible(parse_saved_config(saved_text, str(latest)), cfg, mid_epoch, str(latest))
    return latest
