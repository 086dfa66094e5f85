"""Study ``bins``: equal-width ECE and MCE against the number of bins, 10…1000 (Wang & Golebiowski 2024, §5.2.2, Fig. 5).

From the test predictions (``predictions/test.npz``) of freshly trained methods, or of existing run
directories given with ``--runs``. With few test samples per bin, ECE grows with the number of bins (its
upward bias ∝ √(bins/N)) and MCE approaches 1 — the reason Wang & Golebiowski 2024 argue for a binning-free SECE.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from metacal.metrics import ece_vs_bins
from metacal.predictions import Predictions, load_predictions
from metacal.report.figures import plot_vs_bins
from metacal.report.labels import method_label

from .page import Column, Section, Table, write_page
from .runner import Variant, gaussian_mixture_setting
from .study import STUDIES, StudyOptions, train_all

BIN_COUNTS = (10, 20, 50, 100, 200, 500, 1000)
QUICK_METHODS = ("ce", "focal")
FULL_METHODS = ("ce", "focal", "flsd53", "ls_005", "dual_focal", "bsce_gra", "flgamma_sece", "flgamma_dece")


def _label(run_dir: Path) -> str:
    name = run_dir.name
    if name.startswith("seed") and run_dir.parent.name:
        return f"{method_label(run_dir.parent.name)} ({name})"
    return method_label(name)


def bins_rows(preds: dict[str, Predictions]) -> list[dict]:
    """One row per method: ``ece_<b>`` and ``mce_<b>`` for every bin count b (fractions)."""
    rows = []
    for label, pred in preds.items():
        res = ece_vs_bins(pred.probs, pred.labels, BIN_COUNTS)
        row = {"method": label, "n": len(pred.labels)}
        row.update({f"ece_{b}": e for b, e in zip(res["bins"], res["ece"])})
        row.update({f"mce_{b}": m for b, m in zip(res["bins"], res["mce"])})
        rows.append(row)
    return rows


@STUDIES.register("bins")
def run(opts: StudyOptions):
    if opts.runs:
        preds = {}
        for d in map(Path, opts.runs):
            preds[_label(d)] = load_predictions(d / "predictions" / "test.npz")
        source = "the test predictions of the run directories " + ", ".join(f"`{d}`" for d in opts.runs)
    else:
        setting = (gaussian_mixture_setting(1500, 2000, 2, seed=opts.seed) if opts.quick
                   else gaussian_mixture_setting(20_000, 10_000, 30, hidden=(256, 256), seed=opts.seed))
        methods = QUICK_METHODS if opts.quick else FULL_METHODS
        runs = train_all(opts, setting, [Variant(m, m) for m in methods])
        preds = {}
        for r in runs:
            preds[method_label(r.method)] = load_predictions(r.run_dir / "predictions" / "test.npz")
        source = (f"methods trained for this page ({setting.label}; method configs from configs/fashion_mnist), "
                  "test predictions of each run's selected epoch (best validation error)")
    rows = bins_rows(preds)
    curves = {r["method"]: {k: (np.asarray(BIN_COUNTS, float), np.asarray([r[f"{k}_{b}"] for b in BIN_COUNTS]),
                                np.full(len(BIN_COUNTS), np.nan)) for k in ("ece", "mce")} for r in rows}
    fig = plot_vs_bins(curves, opts.out / "bins_ece_mce_vs_bins.png")
    cols = [Column("method", "Method"), Column("n", "test N")]
    ece_t = Table("ece", rows, cols + [Column(f"ece_{b}", f"ECE {b} bins (%)", 100, 2) for b in BIN_COUNTS])
    mce_t = Table("mce", rows, cols + [Column(f"mce_{b}", f"MCE {b} bins (%)", 100, 2) for b in BIN_COUNTS])
    intro = [f"Equal-width top-label ECE and MCE (metacal.metrics.ece_vs_bins) for {len(BIN_COUNTS)} bin counts, "
             f"from {source}.",
             "Wang & Golebiowski 2024, §5.2.2: ECE depends on the number of bins, and with many bins most bins "
             "hold a handful of samples, so ECE is biased upwards and MCE tends to the largest single-sample gap."]
    sections = [Section("ECE against the number of bins", tables=[ece_t]),
                Section("MCE against the number of bins", tables=[mce_t]),
                Section("Figure", figures=[("Test ECE (left) and MCE (right) vs number of bins", fig)])]
    return write_page(opts.out, "bins", "Ablation: ECE and MCE vs number of bins", opts.command, intro, sections,
                      opts.quick)
