"""The keys that moved when each learner got its own section: refused in new configs, translated in saved runs.

Before, a learner was chosen by two keys, ``meta.enabled: true`` and ``meta.learner``, and the automatic scalar
borrowed the γ-Net's keys: ``meta.lr`` was its first step, ``meta.gamma_net.init_gamma`` its start and
``meta.controller`` the rest. Now the top-level key ``learner`` chooses (``gamma_net``, ``loss`` or ``auto``; absent:
plain training) and the automatic scalar reads its own typed section ``auto`` (:class:`metacal.meta.auto.AutoSettings`).

A config file or ``--set`` override that still uses an old key is refused in one line that names the new key
(:func:`check_renamed`). A run directory saved before the change keeps working: its config.yaml is translated when it
is read back (:func:`upgrade_saved`), so it evaluates, reports and resumes as before.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, Mapping

#: (old key, new key) of the automatic scalar's settings
AUTO_KEYS = (("meta.lr", "auto.first_step"), ("meta.gamma_net.init_gamma", "auto.start"))
CHOOSE = "the top-level key learner (learner: gamma_net, loss or auto; absent: plain training)"


def check_renamed(merged: Mapping[str, Any], override_keys: list[str]) -> str | None:
    """The one-line error for an old key in the merged files and overrides (``merged``, plain nested dicts) or among
    the overrides' keys (``optim.lr`` of ``optim.lr=0.05``); None when there is none. With ``learner: auto``, an
    override of ``meta.lr`` or ``meta.gamma_net.init_gamma`` (the γ-Net's settings, which a dataset's base.yaml may
    hold for its γ-Net methods) is refused with the ``auto`` key that now holds that meaning."""
    meta = merged.get("meta") if isinstance(merged.get("meta"), Mapping) else {}
    if "enabled" in meta or "learner" in meta:
        old = "meta.learner" if "learner" in meta else "meta.enabled"
        learner = meta.get("learner", "gamma_net") if meta.get("enabled", "learner" in meta) else None
        here = f"; here: learner: {learner}" if learner and merged.get("learner") is None else ""
        return (f"config key '{old}' is gone: {CHOOSE} chooses the learner{here}; drop meta.enabled and "
                "meta.learner (CHANGELOG.md)")
    if "controller" in meta:
        given = meta["controller"]
        keys = ", ".join(f"auto.{k}" for k in given) if isinstance(given, Mapping) and given else "auto.<key>"
        return (f"config key 'meta.controller' is gone: the automatic scalar's settings are the section auto "
                f"(here: {keys}; CHANGELOG.md)")
    if merged.get("learner") == "auto":
        for key in override_keys:
            for old, new in AUTO_KEYS:
                if key == old or old.startswith(key + "."):
                    return (f"override '{key}' sets the γ-Net's {old}; with learner: auto use {new} (the automatic "
                            "scalar's own section; CHANGELOG.md)")
    return None


def upgrade_command(command: str) -> str:
    """A sweep command recorded before the change, as the command that makes the same runs now: ``--set`` of
    ``meta.controller.<key>`` becomes ``auto.<key>``, and where every config it names is an automatic-scalar method
    (``auto_*.yaml``), ``meta.lr`` becomes ``auto.first_step`` and ``meta.gamma_net.init_gamma`` ``auto.start``."""
    command = re.sub(r"(?<=[\s'\"])meta\.controller\.", "auto.", command)
    configs = re.findall(r"\S+\.yaml", command)
    if configs and all(Path(c.strip("'\"")).name.startswith("auto_") for c in configs):
        for old, new in AUTO_KEYS:
            command = re.sub(rf"(?<=[\s'\"]){re.escape(old)}=", f"{new}=", command)
    return command


def upgrade_saved(data: Mapping[str, Any]) -> dict[str, Any]:
    """A saved config.yaml (nested dicts) in the current keys: ``meta.enabled`` / ``meta.learner`` become
    ``learner``, and an automatic-scalar run's ``meta.lr``, ``meta.gamma_net.init_gamma`` and ``meta.controller``
    become its ``auto`` section. A config already in the current keys is returned unchanged."""
    out = copy.deepcopy(dict(data))
    meta = out.get("meta")
    if not isinstance(meta, dict) or not ({"enabled", "learner", "controller"} & set(meta)):
        return out
    enabled, learner = meta.pop("enabled", False), meta.pop("learner", "gamma_net")
    controller = meta.pop("controller", None) or {}
    out["learner"] = learner if enabled else None
    if out["learner"] == "auto":
        start = (meta.get("gamma_net") or {}).get("init_gamma")
        out["auto"] = {**({"start": start} if start is not None else {}), "first_step": meta.get("lr", 1.0),
                       **controller}
    return out
