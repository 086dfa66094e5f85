"""Human-readable reports: reliability diagrams (``reliability``)."""

from .reliability import plot_reliability

__all__ = ["plot_reliability"]
