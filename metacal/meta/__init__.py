"""Meta-learning core: the γ-Net (Wang & Golebiowski 2024, eq. 4–5), the meta learner and every learner by name.

``MetaLearner(model, optimizer, objective, gamma_net=… | loss=…, backend=…).step(x, y)`` runs one training
iteration (real SGD step + meta-parameter update) and returns a ``StepResult``; ``PlainStep`` has the same
``step`` without meta-learning. Hypergradient backends by name in the dict ``BACKENDS``: "jvp" (exact,
forward-mode JVP), "higher" (exact, the reference), "head" (lookahead through the classifier head only).

``LEARNERS`` (metacal/meta/learners.py) names what steers the loss during training, the config key ``learner``; the
built-in ones register themselves when this package is imported: ``gamma_net`` and ``loss`` (section ``meta``,
metacal/meta/meta_learners.py) and ``auto`` (section ``auto``, metacal/meta/auto_learner.py). A learner of one's own
is one ``@learner(name, settings=..., section=...)`` in a module imported before the run is built.
"""

from .step_context import StepContext, StepResult, Stepper
from .gamma_net import OUTPUT_MAPS, GammaNet
from .inner import GammaFocalInner, LearnableL2Inner, make_inner
from .learner import MetaLearner
from .learners import LEARNERS, BuildContext, LearnerSpec, learner, learner_section, learner_spec
from .plain_step import PlainStep
from .settings import BACKENDS, HORIZONS, META_OPTIMIZERS, MetaSettings
from .sgd_lookahead import lookahead_scales, step_coefficient
from . import meta_learners, auto_learner  # noqa: F401, E402 (register the built-in learners, in this order)

__all__ = [
    "BACKENDS",
    "HORIZONS",
    "LEARNERS",
    "META_OPTIMIZERS",
    "BuildContext",
    "GammaNet",
    "LearnerSpec",
    "MetaSettings",
    "OUTPUT_MAPS",
    "MetaLearner",
    "PlainStep",
    "StepResult",
    "Stepper",
    "StepContext",
    "GammaFocalInner",
    "LearnableL2Inner",
    "learner",
    "learner_section",
    "learner_spec",
    "make_inner",
    "lookahead_scales",
    "step_coefficient",
]
