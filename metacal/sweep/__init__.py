"""Sweeps over training configs × seeds: :mod:`.plan` decides which runs start, are skipped (finished) or are
resumed (interrupted), and executes them as trainer subprocesses; :mod:`.cli` is the command line
(``metacal-sweep``, ``python scripts/sweep.py``)."""
