"""Meta-learning core: the γ-Net (seed 003 eq. 4–5) and one-step hypergradient meta steps.

``MetaStep`` / ``build_meta_step`` run one training iteration (real SGD step + meta-parameter update);
backends by name in ``BACKENDS``: "jvp" (exact, forward-mode JVP), "higher" (exact, reference),
"head" (lookahead through the classifier head only, Bohdal et al.).
"""

from .backend import BACKENDS, StepContext, StepOutput
from .gamma_net import OUTPUT_MAPS, GammaNet
from .inner import GammaFocalInner, LearnableL2Inner, make_inner
from .sgd_lookahead import lookahead_scales, step_coefficient
from .step import MetaObjective, MetaStep, available_backends, build_meta_step

__all__ = [
    "BACKENDS",
    "GammaNet",
    "OUTPUT_MAPS",
    "MetaStep",
    "MetaObjective",
    "build_meta_step",
    "available_backends",
    "GammaFocalInner",
    "LearnableL2Inner",
    "make_inner",
    "StepContext",
    "StepOutput",
    "lookahead_scales",
    "step_coefficient",
]
