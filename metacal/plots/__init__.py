"""Figures drawn from predictions, below the trainer, ``metacal.evaluate`` and the reports: ``reliability``
(the reliability diagram). Submodules import matplotlib only when they draw."""
