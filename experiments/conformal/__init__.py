"""Prediction sets per training method: set size at the target coverage, paired against CE, and coverage under
shift (scripts/conformal_report.py; docs/results/conformal_*.md)."""
