"""The method records of the report tests' hand-made rows and runs: what configs/methods/<stem>.yaml trains."""

from __future__ import annotations

from metacal.run.method import Method

GRID_GAMMA = {"ce": 0.0, "focal": 1.0, "focal2": 2.0, "focal3": 3.0, "focal4": 4.0, "focal5": 5.0}


def grid_spec(stem: str) -> Method:
    """CE and the fixed-γ focal stems as their configs train them; any other stem: a loss of its own name."""
    gamma = GRID_GAMMA.get(stem)
    if gamma is None:
        return Method(stem, stem)
    return Method(stem, "ce") if gamma == 0 else Method(stem, "focal", {"gamma": gamma})


def loss_config(stem: str) -> dict:
    """The config.yaml ``loss`` section a run of ``stem`` saves."""
    spec = grid_spec(stem)
    return {"name": spec.loss, "params": dict(spec.loss_params)}
