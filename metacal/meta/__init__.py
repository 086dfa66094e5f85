"""Meta-learning core: the γ-Net (Wang & Golebiowski 2024, eq. 4–5) and the meta learner.

``MetaLearner(model, optimizer, objective, gamma_net=… | loss=…, backend=…).step(x, y)`` runs one training
iteration (real SGD step + meta-parameter update) and returns a ``StepResult``; ``PlainStep`` has the same
``step`` without meta-learning. Hypergradient backends by name in the dict ``BACKENDS``: "jvp" (exact,
forward-mode JVP), "higher" (exact, the reference), "head" (lookahead through the classifier head only).
"""

from typing import Callable

import torch

from metacal.registry import Registry

from .step_context import StepContext, StepResult, Stepper
from .gamma_net import OUTPUT_MAPS, GammaNet
from .inner import GammaFocalInner, LearnableL2Inner, make_inner
from .learner import BACKENDS, MetaLearner
from .plain_step import PlainStep
from .sgd_lookahead import lookahead_scales, step_coefficient

#: the config key ``learner`` → the builder of that learner's :class:`Stepper`, called as
#: ``builder(cfg, accelerator, model, loss_fn, optimizer, bundle, steps_per_epoch)``; it reads its own section
#: (``meta``, or ``auto`` for the automatic scalar: metacal.train.schema.learner_section). Built in
#: (metacal/train/components.py): the γ-Net (FLγ-*), the loss's own meta-parameters (CE-SECE / CE-DECE) and one
#: scalar of the loss by root-finding (:mod:`metacal.meta.auto`). A learner of one's own is one
#: ``@LEARNERS.register("name")`` in a module imported before the run is built.
LEARNERS: Registry[Callable[..., Stepper]] = Registry("learner")
#: ``meta.optimizer``: the optimiser of the meta-parameters φ, by name.
META_OPTIMIZERS = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD}

__all__ = [
    "BACKENDS",
    "LEARNERS",
    "META_OPTIMIZERS",
    "GammaNet",
    "OUTPUT_MAPS",
    "MetaLearner",
    "PlainStep",
    "StepResult",
    "Stepper",
    "StepContext",
    "GammaFocalInner",
    "LearnableL2Inner",
    "make_inner",
    "lookahead_scales",
    "step_coefficient",
]
