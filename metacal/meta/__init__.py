"""Meta-learning core: the γ-Net (Wang & Golebiowski 2024, eq. 4–5) and the meta learner.

``MetaLearner(model, optimizer, objective, gamma_net=… | loss=…, backend=…).step(x, y)`` runs one training
iteration (real SGD step + meta-parameter update) and returns a ``StepResult``; ``PlainStep`` has the same
``step`` without meta-learning. Hypergradient backends by name in the dict ``BACKENDS``: "jvp" (exact,
forward-mode JVP), "higher" (exact, the reference), "head" (lookahead through the classifier head only).
"""

from .backend import StepContext, StepResult
from .gamma_net import OUTPUT_MAPS, GammaNet
from .inner import GammaFocalInner, LearnableL2Inner, make_inner
from .learner import BACKENDS, MetaLearner, PlainStep, average_over_processes
from .sgd_lookahead import lookahead_scales, step_coefficient

__all__ = [
    "BACKENDS",
    "GammaNet",
    "OUTPUT_MAPS",
    "MetaLearner",
    "PlainStep",
    "StepResult",
    "StepContext",
    "average_over_processes",
    "GammaFocalInner",
    "LearnableL2Inner",
    "make_inner",
    "lookahead_scales",
    "step_coefficient",
]
