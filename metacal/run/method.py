"""What a run trained, as a record: the method's name, its loss and the learner that steers the loss during training.

A run writes the record into metrics.json (``"method"``); its name is also in config.yaml (``run.method``, by default
the config file's stem, which is what scripts/sweep.py names the run folder). Reports read the record, never the
file name, to decide what a run is: a run is a point of the fixed-γ focal grid when it trains focal loss at one
fixed γ with no learner (CE is γ = 0, Lin et al. 2017, eq. 5: FL(p_t) = −(1 − p_t)^γ log p_t), whatever its name.
So a user's focal run at γ = 2.5 joins the grid pick with no edit to metacal.

Runs made before the record existed are read from their saved config.yaml, which holds the same loss and learner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .renamed_keys import upgrade_saved

NO_LEARNER = "none"  # plain training: the loss's parameters are fixed
#: the section a learner not registered here read: every one did, but the automatic scalar, before each had its own
LEGACY_SECTION = "meta"


@dataclass(frozen=True)
class Method:
    """``name``; ``loss`` and ``loss_params`` (the metacal.losses name and constructor arguments); ``learner``:
    "none", or the run's ``learner`` ("gamma_net", "loss", "auto", one of one's own); ``learner_settings``: the
    section that learner reads, whole (its spec's, metacal.meta.LEARNERS; {} without a learner)."""

    name: str
    loss: str
    loss_params: Mapping[str, Any] = field(default_factory=dict)
    learner: str = NO_LEARNER
    learner_settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def fixed_gamma(self) -> float | None:
        """γ of a fixed-γ focal run (CE: 0.0); None for anything else (a learner, another loss, per-class γ)."""
        if self.learner != NO_LEARNER:
            return None
        params = {k: v for k, v in self.loss_params.items() if k != "reduction"}
        if self.loss == "ce":
            return 0.0 if not params else None
        if self.loss != "focal" or set(params) - {"gamma"}:
            return None
        from metacal.losses.focal import FocalLoss

        gamma = params.get("gamma", FocalLoss.default_gamma)
        if gamma is None:
            gamma = FocalLoss.default_gamma
        return float(gamma) if isinstance(gamma, (int, float)) and not isinstance(gamma, bool) else None

    @property
    def label(self) -> str:
        """A display name made from the record: "CE", "Focal γ = 2.5", else the method's name."""
        gamma = self.fixed_gamma
        if gamma is None:
            return self.name
        return "CE" if gamma == 0 else f"Focal γ = {gamma:g}"

    def record(self) -> dict[str, Any]:
        """The JSON object metrics.json holds under ``"method"``."""
        learner: dict[str, Any] = {"name": self.learner}
        if self.learner != NO_LEARNER:
            learner["settings"] = dict(self.learner_settings)
        return {"name": self.name, "loss": {"name": self.loss, "params": dict(self.loss_params)}, "learner": learner}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Method:
        """Inverse of :meth:`record`."""
        loss, learner = record.get("loss") or {}, record.get("learner") or {}
        return cls(name=str(record.get("name", loss.get("name", "?"))), loss=str(loss.get("name", "?")),
                   loss_params=dict(loss.get("params") or {}), learner=str(learner.get("name", NO_LEARNER)),
                   learner_settings=dict(learner.get("settings") or {}))


def method_of_config(config: Mapping[str, Any], name: str | None = None) -> Method | None:
    """The method a resolved config (config.yaml as nested dicts) trains; None when it names no loss. ``name``
    defaults to the config's ``run.method``, else the loss name."""
    loss = config.get("loss")
    if not isinstance(loss, Mapping) or "name" not in loss:
        return None
    from metacal.meta import learner_section  # the learners and their sections: loaded only when a config is read

    config = upgrade_saved(config)  # a config.yaml saved before the learner had its own key
    learner = config.get("learner")
    run = config.get("run") if isinstance(config.get("run"), Mapping) else {}
    name = name or run.get("method") or str(loss["name"])
    section = config.get(learner_section(learner) or LEGACY_SECTION) if learner else None
    return Method(name=str(name), loss=str(loss["name"]), loss_params=dict(loss.get("params") or {}),
                  learner=str(learner) if learner else NO_LEARNER,
                  learner_settings=dict(section) if learner and isinstance(section, Mapping) else {})


def method_of_run(config: Mapping[str, Any], metrics: Mapping[str, Any] | None,
                  name: str | None = None) -> Method | None:
    """A run's method: metrics.json's record, else (older runs) its config.yaml; ``name`` (the run folder's method
    name in a sweep) wins over the recorded one, since reports group runs by it."""
    record = (metrics or {}).get("method")
    if isinstance(record, Mapping):
        method = Method.from_record(record)
        return method if name is None else Method(name, method.loss, method.loss_params, method.learner,
                                                  method.learner_settings)
    return method_of_config(config, name)
