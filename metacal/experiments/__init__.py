"""Experiment code, not library: what the scripts run to produce docs/ — the ablation studies
(``ablations``, ``scripts/ablate.py``), the meta-step benchmark (``benchmark``, ``scripts/bench_meta_step.py``)
and sweep planning (``sweep_plan``, ``scripts/sweep.py``). The library (metrics, objectives, losses, meta,
data, models, train, posthoc, report) never imports from here."""
