"""metacal: training calibrated classifiers in PyTorch.

Subpackages mirror the concepts: ``metrics`` (measure calibration), ``objectives``
(differentiable calibration errors), ``losses`` (inner training objectives), ``meta``
(γ-Net and one-step hypergradients), ``data``, ``models``, ``train``, ``posthoc`` and ``report``.
"""

__version__ = "0.1.0"
