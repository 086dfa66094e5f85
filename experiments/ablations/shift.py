"""Study ``shift`` (Karandikar et al. 2021, §5.3): calibration under dataset shift. Test images corrupted on the fly
(``corruptions``: Gaussian noise, blur, contrast, brightness, pixelation; severities 1–5) for Fashion-MNIST;
test error and ECE per severity for each method, before and after temperature scaling fitted on the CLEAN
validation set (as in practice: the shift is not known when calibrating).
"""

from __future__ import annotations

import numpy as np
import torch

from metacal import metrics
from metacal.posthoc import TemperatureScaling
from metacal.data.corruptions import SEVERITIES, corrupt
from metacal.report.labels import method_label

from .page import Column, Section, Table, line_panels, save_figure, write_page
from .runner import Variant, build_bundle, fashion_mnist_setting, predict_logits, stack
from .study import STUDIES, StudyOptions, train_all

CORRUPTIONS = ("gaussian_noise", "gaussian_blur", "contrast", "brightness", "pixelate")  # this study's five families

QUICK_METHODS = ("ce",)  # Fashion-MNIST loading + the trainer's evaluation dominate: one method
FULL_METHODS = ("ce", "focal", "flsd53", "ls_005", "dual_focal", "bsce_gra", "flgamma_sece")


def raw_images(subset) -> tuple[torch.Tensor, torch.Tensor]:
    """Float images in [0, 1] (N, C, H, W) and labels of an image-dataset split, without normalisation."""
    images = subset.dataset.images[subset.index]
    return images.float() / 255.0, subset.targets.long()


def normalise(images: torch.Tensor, mean, std) -> torch.Tensor:
    m = torch.as_tensor(mean, dtype=images.dtype).view(1, -1, 1, 1)
    s = torch.as_tensor(std, dtype=images.dtype).view(1, -1, 1, 1)
    return (images - m) / s


def shift_rows(model, bundle, val_logits, val_labels, images, labels, seed: int = 0) -> list[dict]:
    """One row per (corruption, severity 0…5): error, NLL, ECE before and after val-fitted TS."""
    ts = TemperatureScaling(method="nll").fit(val_logits, val_labels)
    rows = []
    for name in CORRUPTIONS:
        for sev in (0,) + SEVERITIES:
            x = normalise(corrupt(images, name, sev, seed=seed + sev), bundle.mean, bundle.std)
            logits = predict_logits(model, x)
            probs, ts_probs = torch.softmax(logits, 1), ts.transform(logits)
            rows.append({"corruption": name, "severity": sev, "error": float(metrics.error_rate(probs, labels)),
                         "nll": float(metrics.nll(probs, labels)), "ece": float(metrics.ece(probs, labels)),
                         "ece_after_ts": float(metrics.ece(ts_probs, labels)), "temperature": float(ts.temperature)})
    return rows


@STUDIES.register("shift")
def run(opts: StudyOptions):
    setting = (fashion_mnist_setting(1, hidden=(128,), max_steps=30, seed=opts.seed) if opts.quick
               else fashion_mnist_setting(15, hidden=(256, 256), seed=opts.seed))
    n_test = 1000 if opts.quick else None
    methods = QUICK_METHODS if opts.quick else FULL_METHODS
    runs = train_all(opts, setting, [Variant(m, m) for m in methods])
    bundle = build_bundle(runs[0].cfg)
    images, labels = raw_images(bundle.test)
    if n_test is not None:
        images, labels = images[:n_test], labels[:n_test]
    val_x, val_y = stack(bundle.val)
    long_rows, summary = [], []
    for r in runs:
        rows = shift_rows(r.model, bundle, predict_logits(r.model, val_x), val_y, images, labels, opts.seed)
        label = method_label(r.method)
        long_rows += [{"method": label, **row} for row in rows]
        for sev in (0,) + SEVERITIES:
            at = [row for row in rows if row["severity"] == sev]
            summary.append({"method": label, "severity": sev,
                            **{k: float(np.mean([row[k] for row in at])) for k in ("error", "nll", "ece", "ece_after_ts")}})
    by_method = {label: [row for row in summary if row["method"] == label]
                 for label in dict.fromkeys(row["method"] for row in summary)}
    fig = line_panels(by_method, "severity", (("ece", "ECE (%)"), ("ece_after_ts", "ECE after TS fitted on clean val (%)")),
                      "corruption severity (0 = clean)")
    fig_path = save_figure(fig, opts.out / "shift_ece_vs_severity.png")
    metric_cols = [Column("error", "Error (%)", 100, 2), Column("nll", "NLL", 1, 3), Column("ece", "ECE (%)", 100, 2),
                   Column("ece_after_ts", "ECE after TS (%)", 100, 2)]
    summary_t = Table("by_severity", summary, [Column("method", "Method"), Column("severity", "severity")] + metric_cols)
    long_t = Table("by_corruption", long_rows, [Column("method", "Method"), Column("corruption", "corruption"),
                                                 Column("severity", "severity")] + metric_cols)
    intro = [f"Methods (configs/fashion_mnist method files) trained on {setting.label}; model after the last epoch. "
             f"Test set: {'the first ' + str(n_test) if n_test else 'all ' + str(len(labels))} Fashion-MNIST test "
             "images, corrupted on the fly (metacal/data/corruptions.py) in pixel space [0, 1] before the "
             "dataset's normalisation. TS: one temperature per model fitted by NLL on the clean validation split. "
             "ECE = 15-bin equal-width."]
    sections = [Section("Mean over the five corruptions, per severity", tables=[summary_t],
                        figures=[("ECE against corruption severity, before (left) and after (right) TS", fig_path)]),
                Section("Per corruption and severity", tables=[long_t])]
    return write_page(opts.out, "shift", "Ablation: calibration under dataset shift (corrupted Fashion-MNIST)",
                      opts.command, intro, sections, opts.quick)
