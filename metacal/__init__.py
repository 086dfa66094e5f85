"""metacal: training calibrated classifiers in PyTorch.

Subpackages mirror the concepts: ``metrics`` (measure calibration), ``objectives``
(differentiable calibration errors), ``losses`` (inner training objectives), ``meta``
(γ-Net and one-step hypergradients), ``data``, ``models``, ``train``, ``posthoc``, ``plots`` (the
reliability diagram) and ``report``; ``distributed`` (processes and collectives) and ``atomic_io`` (crash-safe
writes) import nothing of metacal, so any layer may use them.

``metacal.fit(model, train, val=..., test=..., config=..., overrides=[...])`` trains one's own network on
one's own datasets (metacal/train/fit.py); it is imported on first use, so ``import metacal.metrics`` stays
free of the trainer's dependencies. ``metacal.evaluate_run(run_dir, shift=..., ood=..., inputs=...)`` evaluates a
finished run's network on shifted, unseen or new data without retraining (metacal/shift_eval.py).
``metacal.auto_gamma(loss, held_out)`` sets a focal loss's γ (or label smoothing's ε) in a training loop of one's own:
call its ``update(model)`` once per epoch (metacal/meta/gap_control.py).
``metacal.load(run_dir, calibrator="ts_nll")`` returns a finished run as a calibrated classifier
(``predict_proba``, ``predict``, ``export``; metacal/predictor.py).
"""

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "fit":
        from metacal.train.fit import fit

        return fit
    if name == "evaluate_run":
        from metacal.shift_eval import evaluate_run

        return evaluate_run
    if name == "auto_gamma":
        from metacal.meta.auto import auto_gamma

        return auto_gamma
    if name == "load":
        from metacal.predictor import load

        return load
    raise AttributeError(f"module 'metacal' has no attribute {name!r}")
