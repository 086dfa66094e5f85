"""Per-epoch evaluation: gather per-example logits across processes, then metacal.metrics.summary.

With a γ-Net, the γ it predicts for each evaluated sample is gathered too (Wang & Golebiowski 2024, Fig. 3c–d, reports
the mean and std of γ on the test set); the γ-Net is not used for the predictions themselves.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch
from accelerate import Accelerator
from torch import nn

from metacal import metrics
from metacal.predictions import Predictions


@torch.no_grad()
def predict(
    model: nn.Module,
    loader: Any,
    accelerator: Accelerator,
    gamma_net: nn.Module | None = None,
    autocast: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
) -> Predictions:
    """Run ``model`` over ``loader`` (prepared, rank-sharded) and gather every example exactly once."""
    was_training = model.training
    model.eval()
    if gamma_net is not None:
        gamma_net.eval()
    logits_all, labels_all, gamma_all = [], [], []
    for inputs, labels in loader:
        with autocast():
            if gamma_net is None:
                logits = model(inputs)
            else:
                logits, features = model(inputs, return_features=True)
        logits = logits.float()
        if gamma_net is None:
            logits, labels = accelerator.gather_for_metrics((logits, labels))
        else:
            gamma = gamma_net(features.float()).float().reshape(-1)
            logits, labels, gamma = accelerator.gather_for_metrics((logits, labels, gamma))
            gamma_all.append(gamma.cpu())
        logits_all.append(logits.cpu())
        labels_all.append(labels.cpu())
    model.train(was_training)
    if gamma_net is not None:
        gamma_net.train(was_training)
    gamma = torch.cat(gamma_all) if gamma_all else None
    return Predictions.from_logits(torch.cat(logits_all), torch.cat(labels_all), gamma)


def summarize(pred: Predictions, num_bins: int = 15, binning_free: bool = True) -> dict[str, Any]:
    """metacal.metrics.summary on the softmax probabilities, plus γ mean/std when a γ-Net ran."""
    out = _plain(metrics.summary(pred.probs, pred.labels, num_bins=num_bins, binning_free=binning_free))
    if pred.gamma is not None and pred.gamma.numel() > 0:
        out["gamma_mean"] = float(pred.gamma.mean())
        out["gamma_std"] = float(pred.gamma.std(unbiased=False))
    return out


def run_temperature(val: Predictions) -> Any:
    """The run's temperature scaling: T fitted by NLL on the validation logits (float64)."""
    from metacal.posthoc import TemperatureScaling

    return TemperatureScaling(method="nll").fit(val.logits.double(), val.labels)


def after_temperature_scaling(val: Predictions, test: Predictions, num_bins: int = 15,
                              ts: Any = None, binning_free: bool = True) -> dict[str, Any]:
    """Test metrics after temperature scaling fitted by NLL on the validation logits (Wang & Golebiowski 2024,
    "CE+TS"); ``ts``: that fit, when already done (:func:`run_temperature`)."""
    ts = run_temperature(val) if ts is None else ts
    probs = ts.transform(test.logits.double())
    out = _plain(metrics.summary(probs, test.labels, num_bins=num_bins, binning_free=binning_free))
    out["temperature"] = float(ts.temperature)
    return out


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    """JSON-ready numbers: counts stay ints (n, num_classes), the rest floats; nested dicts (the selective
    ``risk_at_coverage`` and ``coverage_at_risk``) keep their shape with float values."""
    return {k: (int(v) if k in ("n", "num_classes") else
                {level: float(x) for level, x in v.items()} if isinstance(v, dict) else float(v))
            for k, v in values.items()}


#: ``eval.select_by``: the validation metric whose lowest value selects the epoch.
SELECT_BY = ("error", "nll", "ece")
#: the validation metric that breaks a tie of ``eval.select_by``'s (lower wins): NLL, and error for select_by nll
TIE_BREAK = {"error": "nll", "nll": "error", "ece": "nll"}


def selection_score(values: dict[str, float], select_by: str) -> float:
    """Lower is better: validation error (paper default), NLL or ECE."""
    return float(values[select_by])


def selection_key(values: dict[str, float], select_by: str) -> tuple[float, float]:
    """(``select_by``'s metric, its tie-break :data:`TIE_BREAK`), compared in that order, lower first. On a small
    validation split the error is a count over few samples and ties across epochs; the tie-break then keeps the
    epoch with the lower validation NLL instead of the first one."""
    return selection_score(values, select_by), float(values.get(TIE_BREAK[select_by], float("inf")))


def improves(values: dict[str, float], best: dict[str, float] | None, select_by: str) -> bool:
    """Whether an epoch with validation metrics ``values`` is better than the best so far, whose validation
    metrics are ``best`` (None or empty before the first): a strictly lower :func:`selection_key`. A NaN
    score never wins. ``best`` is the checkpointed ``TrainState.best_metrics["val"]``, so a resumed run decides
    as an uninterrupted one, from checkpoints of any age."""
    reference = selection_key(best, select_by) if best else (float("inf"), float("inf"))
    return selection_key(values, select_by) < reference
