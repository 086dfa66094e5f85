"""Training losses ("inner objectives"), pluggable by name: ``build(name, **params)``, ``available()``.

Every loss follows the contract in :mod:`metacal.losses.base`. Registered names (defaults and sources are in
each class docstring): ce, focal, flsd53, flsd52, flsc531, dual_focal, inverse_focal, adafocal,
label_smoothing, mbls, l1_logit_norm, brier, mse, bsce, bsce_gra, focal_gra, dual_focal_gra, ce_mmce, mdca, sbece,
avuc, savuc, primary_plus_secondary, mixup, ce_learnable_l2.
"""

from __future__ import annotations

from typing import Any

from .base import Loss, reduce
from .registry import LOSSES
from . import focal  # noqa: F401  (registers ce, focal)
from . import learnable_l2  # noqa: F401  (ce_learnable_l2)
from . import flsd, dual_focal, inverse_focal, adafocal  # noqa: F401  (focal family)
from . import uncertainty_weighted  # noqa: F401  (bsce, bsce_gra, focal_gra, dual_focal_gra)
from . import label_smoothing, logit_norm, brier, margin_smoothing  # noqa: F401  (… mbls)
from . import secondary, mixup  # noqa: F401  (primary + β·secondary presets, mixup)


def build(name: str, **params: Any) -> Loss:
    """Build a registered loss; an unknown name raises with the list of valid ones."""
    return LOSSES.build(name, **params)


def available() -> list[str]:
    return LOSSES.available()


from .adafocal import AdaFocal  # noqa: E402
from .focal import GammaLoss, focal_per_sample, safe_pow  # noqa: E402
from .learnable_l2 import CELearnableL2  # noqa: E402
from .mixup import Mixup  # noqa: E402
from .secondary import PrimaryPlusSecondary  # noqa: E402

__all__ = [
    "Loss", "LOSSES", "build", "available", "reduce", "GammaLoss", "focal_per_sample", "safe_pow",
    "AdaFocal", "CELearnableL2", "Mixup", "PrimaryPlusSecondary",
]
