"""The regime study (scripts/regime_study.py): noisy labels, overlapping classes and a long tail, where a single
post-hoc temperature may not be enough; the sweeps (``study``), the command line (``cli``) and the pages (``page``)."""
