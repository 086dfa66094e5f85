"""Study ``backend``: the hypergradient backend of the meta step — "higher" (exact, unrolled reference),
"jvp" (exact, forward-mode JVP), "head" (lookahead through the classifier head only, Bohdal et al.):
calibration reached and wall time per epoch, same data, model, seed and schedule."""

from __future__ import annotations

from metacal.meta import BACKENDS

from .page import Column, Section, Table, write_page
from .runner import Variant, gaussian_mixture_setting
from .study import STUDIES, TEST_COLUMNS, StudyOptions, test_row, train_all


@STUDIES.register("backend")
def run(opts: StudyOptions):
    setting = (gaussian_mixture_setting(1500, 1000, 2, seed=opts.seed) if opts.quick
               else gaussian_mixture_setting(20_000, 10_000, 30, hidden=(256, 256), seed=opts.seed))
    runs = train_all(opts, setting, [Variant(f"backend={b}", "flgamma_sece", (f"meta.backend={b}",))
                                     for b in BACKENDS])
    rows = []
    for r in runs:
        row = test_row(r)
        row["total_s"] = r.seconds
        rows.append(row)
    jvp = next(row["s_per_epoch"] for row in rows if row["variant"] == "backend=jvp")
    for row in rows:
        row["time_vs_jvp"] = row["s_per_epoch"] / jvp
    cols = ([Column("variant", "Backend")] + TEST_COLUMNS
            + [Column("time_vs_jvp", "epoch time / jvp", 1, 2), Column("total_s", "total s (incl. eval)", 1, 1)])
    intro = [f"FLγ-SECE on {setting.label}, one run per backend (same seed, data order and schedule). "
             "s/epoch is the trainer's epoch wall time (training + evaluation of val/test), mean over epochs "
             "after the first; the machine is shared, so timings are noisy — compare ratios, not absolutes."]
    return write_page(opts.out, "backend", "Ablation: hypergradient backend (higher vs jvp vs head)", opts.command,
                      intro, [Section("Calibration and time per backend", tables=[Table("backend", rows, cols)])],
                      opts.quick)
