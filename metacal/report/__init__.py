"""Human-readable reports: result tables, figures and pages of a sweep's runs. ``plot_reliability`` is
:func:`metacal.plots.reliability.plot_reliability`, re-exported."""

from metacal.plots.reliability import plot_reliability

__all__ = ["plot_reliability"]
