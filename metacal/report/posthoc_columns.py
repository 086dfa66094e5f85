"""The results page's "ECE after …" columns: the post-hoc calibrators of :mod:`metacal.posthoc.registry`, each
fitted on a run's predictions/val.npz and applied to its predictions/test.npz (the "calibratable" view of
Wang, Feng & Zhang 2021, §2; vector and matrix scaling and Dirichlet calibration with ODIR: Kull et al. 2019;
one-vs-rest isotonic regression: Zadrozny & Elkan 2002).

Column key of calibrator ``name``: ``ece_<name>``, except the three the pages had before the registry, whose
keys (and headers) stay as they were so older CSVs read the same: ts_nll → ``ece_ts_nll`` ("TS-NLL"),
ts_ece → ``ece_ts_grid`` ("TS-grid"), hb → ``ece_hb`` ("HB"). Other headers are "ECE after <registry label>".

A calibrator that refuses the run's validation set as too small (``registry.check_fit_size``) gives NaN for
that run and a note saying why; any other failure is an error of the run. Temperature scaling needs logits:
NaN for runs that saved only probabilities (histogram binning and isotonic regression read probabilities; the
other maps read ln p then, as the evaluate CLI does).

Perturbation temperature scaling (``ts_perturbed``) is a column only when asked for (``--calibrators``): it needs
perturbed validation predictions, which ``python -m metacal.evaluate <run> --shift SUITE`` saves as
shift/val_<suite>.npz; a run without them gives NaN and a note. Ensemble temperature scaling (``ets``) is a
default column.

Cost: matrix scaling and Dirichlet calibration choose λ = μ by 5-fold cross-validation over the 7-value ODIR
grid (metacal.posthoc.odir), i.e. 36 fits per run each; they dominate a report's run time
(``--calibrators`` leaves them out).
"""

from __future__ import annotations

import math
from typing import Sequence

from metacal.posthoc import registry
from metacal.posthoc.choice import parse_choice
from metacal.predictions import Predictions

# keys and headers the pages used before the registry existed (kept stable)
LEGACY_KEYS = {"ts_nll": "ece_ts_nll", "ts_ece": "ece_ts_grid", "hb": "ece_hb"}
LEGACY_LABELS = {"ts_nll": "TS-NLL", "ts_ece": "TS-grid"}
TEMPERATURE_KEYS = {"ts_nll": "t_nll", "ts_ece": "t_grid"}  # the fitted T, returned next to the ECE


def column_key(name: str) -> str:
    """The per-run / CSV key of calibrator ``name`` (``ece_vector``, ``ece_ts_nll``, …)."""
    return LEGACY_KEYS.get(name, f"ece_{name}")


def column_label(name: str) -> str:
    """Short label of calibrator ``name`` on the page (the registry's, or the pages' older TS-NLL/TS-grid)."""
    return LEGACY_LABELS.get(name, registry.spec(name).label)


def column_header(name: str) -> str:
    """``"ECE after VS (%)"``."""
    return f"ECE after {column_label(name)} (%)"


ALL: tuple[str, ...] = tuple(registry.available())


def parse_calibrators(text: str | None) -> tuple[str, ...]:
    """The ``--calibrators`` value (metacal.posthoc.choice: ``all``, ``none`` or comma-separated names; None: the
    report's default) → names in registry order; a one-line ValueError otherwise."""
    names = parse_choice(text, "report")
    return tuple(n for n in registry.available() if n in names)


# the default columns: every calibrator fitted on predictions/val.npz alone (not perturbation TS, module docstring)
DEFAULT: tuple[str, ...] = parse_calibrators(None)
POSTHOC_KEYS: tuple[str, ...] = tuple(column_key(n) for n in ALL)


def check_calibrators(names: Sequence[str] | None) -> tuple[str, ...]:
    """``names`` checked against the registry and put in registry order (None → the default columns)."""
    return parse_calibrators(None if names is None else ",".join(names) if names else "none")


def posthoc_metrics(
    val: Predictions,
    test: Predictions,
    num_bins: int = 15,
    hb_bins: int = 15,
    calibrators: Sequence[str] | None = None,
    notes: list[str] | None = None,
) -> dict[str, float]:
    """Test ECE (``num_bins`` equal-width bins) after each of ``calibrators`` (default: all) fitted on ``val``:
    ``{column_key(name): ECE}``, plus the fitted temperatures ``t_nll`` / ``t_grid`` when TS is selected.

    Histogram binning uses ``hb_bins`` bins, TS by ECE grid minimises the ECE at ``num_bins`` (the one reported).
    A calibrator refusing ``val`` as too small gives NaN and appends "ECE after <label>: <why>" to ``notes``.
    """
    from metacal import metrics

    out: dict[str, float] = {}
    k, n_val = val.num_classes, int(val.labels.shape[0])
    for name in check_calibrators(calibrators):
        key = column_key(name)
        out[key] = math.nan
        if name in TEMPERATURE_KEYS:
            out[TEMPERATURE_KEYS[name]] = math.nan
            if val.logits is None or test.logits is None:
                continue
        if registry.spec(name).needs_perturbed and val.perturbed is None:
            if notes is not None:
                notes.append(f"ECE after {column_label(name)}: no perturbed validation predictions; run python -m "
                             "metacal.evaluate <run> --shift SUITE first (it saves shift/val_<suite>.npz)")
            continue
        try:
            registry.check_fit_size(name, n_val, k)
        except ValueError as exc:
            if notes is not None:
                notes.append(f"ECE after {column_label(name)}: {exc} in predictions/val.npz")
            continue
        fitted = registry.fit_calibrator(name, val, hb_bins if name == "hb" else num_bins)
        out[key] = float(metrics.ece(registry.apply_calibrator(name, fitted, test), test.labels, num_bins))
        if name in TEMPERATURE_KEYS:
            out[TEMPERATURE_KEYS[name]] = float(registry.fitted_params(fitted)["temperature"])
    return out


def describe(calibrators: Sequence[str], hb_bins: int = 15) -> str:
    """The page's sentence on the "ECE after …" columns: which calibrator each label stands for, and which
    ones ``--calibrators`` left out."""
    selected = check_calibrators(calibrators)
    if not selected:
        return "No \"ECE after …\" columns: `--calibrators none`."
    parts = []
    for name in selected:
        text = f"{column_label(name)} = {registry.spec(name).description}"
        parts.append(text + (f", {hb_bins} bins" if name == "hb" else ""))
    text = ("\"ECE after …\": the \"calibratable\" view of Wang, Feng & Zhang 2021, §2 — each post-hoc calibrator "
            "fitted on predictions/val.npz and applied to predictions/test.npz (metacal.posthoc): "
            + "; ".join(parts) + ".")
    if {"vector", "matrix", "dirichlet"} & set(selected):
        text += (" Vector and matrix scaling and Dirichlet calibration follow Kull et al. 2019; the ODIR maps "
                 "choose λ = μ by 5-fold cross-validation.")
    if "isotonic" in selected:
        text += " Isotonic regression is one-vs-rest, renormalised (Zadrozny & Elkan 2002)."
    if "ets" in selected:
        text += (" ETS mixes the temperature-scaled, the uncalibrated and the uniform prediction (Zhang, Kailkhura & "
                 "Han 2020).")
    left_out = [column_label(n) for n in DEFAULT if n not in selected]
    if left_out:
        text += f" Not computed (`--calibrators`): {', '.join(left_out)}."
    return text
