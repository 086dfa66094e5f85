"""Study ``calibratable`` (Wang, Feng & Zhang 2021, §2 and Fig. 1–2): is a method's model still
*calibratable*? Every method's test ECE before and after post-hoc calibration fitted on validation —
temperature scaling (NLL) and histogram binning (15 bins) — and the fitted temperature; plus the per-epoch
"optimal ECE" curve: the ECE after a temperature fitted on the TEST set itself, a DIAGNOSTIC of how much
calibration a temperature could recover at that epoch (Wang, Feng & Zhang 2021, Fig. 2) — never a result, since it uses the
test labels.
"""

from __future__ import annotations

import torch

from metacal import metrics
from metacal.posthoc import HistogramBinning, TemperatureScaling
from metacal.predictions import load_predictions
from metacal.report.labels import method_label

from .page import Column, Section, Table, line_panels, save_figure, write_page
from .runner import Variant, build_bundle, gaussian_mixture_setting, predict_logits, stack, train_epochwise
from .study import STUDIES, StudyOptions

QUICK_METHODS = ("ce", "focal")
FULL_METHODS = ("ce", "focal", "ls_005", "mixup", "bsce_gra", "flgamma_sece")


def posthoc_row(val_logits: torch.Tensor, val_labels: torch.Tensor, test_logits: torch.Tensor,
                test_labels: torch.Tensor, hb_bins: int = 15) -> dict[str, float]:
    """Test error/NLL/ECE before, after TS (NLL on val) and after top-label HB (fitted on val)."""
    probs = torch.softmax(test_logits.double(), 1)
    ts = TemperatureScaling(method="nll").fit(val_logits.double(), val_labels)
    ts_probs = ts.transform(test_logits.double())
    hb = HistogramBinning(num_bins=hb_bins, mode="top").fit(torch.softmax(val_logits.double(), 1), val_labels)
    hb_probs = hb.transform(probs)
    return {"error": float(metrics.error_rate(probs, test_labels)), "nll": float(metrics.nll(probs, test_labels)),
            "ece": float(metrics.ece(probs, test_labels)), "temperature": float(ts.temperature),
            "nll_after_ts": float(metrics.nll(ts_probs, test_labels)),
            "ece_after_ts": float(metrics.ece(ts_probs, test_labels)),
            "ece_after_hb": float(metrics.ece(hb_probs, test_labels))}


def optimal_ece(logits: torch.Tensor, labels: torch.Tensor) -> tuple[float, float]:
    """DIAGNOSTIC: (ECE after a temperature fitted by NLL on these same labels, that temperature)."""
    ts = TemperatureScaling(method="nll").fit(logits.double(), labels)
    return float(metrics.ece(ts.transform(logits.double()), labels)), float(ts.temperature)


@STUDIES.register("calibratable")
def run(opts: StudyOptions):
    setting = (gaussian_mixture_setting(1500, 1000, 3, seed=opts.seed) if opts.quick
               else gaussian_mixture_setting(20_000, 10_000, 20, hidden=(256, 256), seed=opts.seed))
    methods = QUICK_METHODS if opts.quick else FULL_METHODS
    rows, curves = [], {}
    for m in methods:
        data: dict = {}
        per_epoch: list[dict] = []

        def on_epoch(epoch: int, run, data=data, per_epoch=per_epoch) -> None:
            if not data:
                bundle = build_bundle(run.cfg)
                data["test"] = stack(bundle.test)
            x, y = data["test"]
            logits = predict_logits(run.model, x)
            opt, t = optimal_ece(logits, y)
            per_epoch.append({"epoch": epoch, "ece": float(metrics.ece(torch.softmax(logits, 1), y)),
                              "optimal_ece": opt, "test_fitted_temperature": t})

        run = train_epochwise(setting, Variant(m, m), opts.work / m, on_epoch)
        val, test = (load_predictions(run.run_dir / "predictions" / f"{s}.npz") for s in ("val", "test"))
        row = {"method": method_label(m), "epoch": run.metrics.get("epoch")}
        row.update(posthoc_row(val.logits, val.labels, test.logits, test.labels))
        rows.append(row)
        curves[method_label(m)] = per_epoch
    fig = line_panels(curves, "epoch", (("ece", "test ECE-15 (%)"),
                                        ("optimal_ece", "DIAGNOSTIC: ECE after TS fitted on test (%)")), "epoch")
    fig_path = save_figure(fig, opts.out / "calibratable_optimal_ece_per_epoch.png")
    curve_rows = [{"method": label, **p} for label, pts in curves.items() for p in pts]
    main = Table("posthoc", rows, [
        Column("method", "Method"), Column("epoch", "epoch"), Column("error", "Error (%)", 100, 2),
        Column("nll", "NLL", 1, 3), Column("ece", "ECE (%)", 100, 2), Column("ece_after_ts", "ECE after TS (%)", 100, 2),
        Column("temperature", "fitted T", 1, 3), Column("nll_after_ts", "NLL after TS", 1, 3),
        Column("ece_after_hb", "ECE after HB (%)", 100, 2)])
    curve_t = Table("optimal_ece_per_epoch", curve_rows, [
        Column("method", "Method"), Column("epoch", "epoch"), Column("ece", "test ECE (%)", 100, 2),
        Column("optimal_ece", "DIAGNOSTIC ECE after test-fitted TS (%)", 100, 2),
        Column("test_fitted_temperature", "test-fitted T", 1, 3)])
    intro = [f"Methods (configs/fashion_mnist method files) trained on {setting.label}. Table: test set of each "
             "run's selected epoch (best validation error); TS = temperature scaling fitted by NLL on the "
             "validation predictions; HB = top-label histogram binning, 15 equal-width bins, fitted on validation "
             "(metacal.posthoc). ECE = 15-bin equal-width. A fitted T > 1 means the model was overconfident.",
             "Wang, Feng & Zhang 2021's point: a loss that lowers the raw ECE can leave less for post-hoc "
             "calibration to fix — compare the 'ECE after TS/HB' columns, not only the raw ECE."]
    sections = [Section("ECE before and after post-hoc calibration", tables=[main]),
                Section("Per-epoch optimal ECE (DIAGNOSTIC — uses test labels, not a result)", text=[
                    "Each epoch's model on the test set: raw ECE and the ECE after a temperature fitted by NLL on "
                    "the test set itself (Wang, Feng & Zhang 2021, Fig. 2's 'optimal ECE'). Training resumed "
                    "epoch by epoch from the run's checkpoint (same schedule)."], tables=[curve_t],
                    figures=[("Test ECE (left) and diagnostic test-fitted-TS ECE (right) per epoch", fig_path)])]
    return write_page(opts.out, "calibratable", "Ablation: calibratable — ECE before/after TS and HB",
                      opts.command, intro, sections, opts.quick)
