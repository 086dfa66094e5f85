"""Experiment code, not library: what the scripts run to produce docs/ — the ablation studies
(``ablations``, ``scripts/ablate.py``), the benchmarks (``benchmark``: ``scripts/bench_*.py``), the automatic γ
against the γ grid (``auto_vs_grid``, ``scripts/auto_vs_grid.py``), the fine-tuning example
(``finetune_fashion_mnist``, ``scripts/finetune_example.py``), the regime study (``regimes``,
``scripts/regime_study.py``) and the prediction-set pages (``conformal``, ``scripts/conformal_report.py``), whose
per-run numbers are cached on disk (``run_cache``). It lives in the checkout only: the wheel ships ``metacal`` alone,
and the scripts put the checkout's root on ``sys.path`` to import it. The library (``metacal``) never imports from
here."""
