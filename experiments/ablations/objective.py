"""Study ``objective``: the meta objective of FLγ-* (Wang & Golebiowski 2024, §4.2): SECE vs DECE vs SB-ECE vs S-AvUC;
the SECE bandwidth h; soft (all-pairs soft-rank) vs hard (0/1) accuracy inside SECE."""

from __future__ import annotations

from .page import write_page
from .runner import Variant
from .study import STUDIES, StudyOptions, meta_sweep_setting, sweep_sections


def _obj(name: str) -> Variant:  # flgamma_dece carries no objective_params, so the objective's defaults apply
    return Variant(f"objective={name}", "flgamma_dece", (f"meta.objective={name}",))


def _sece(h: float, accuracy: str = "soft") -> Variant:
    return Variant(f"objective=sece, h={h}, accuracy={accuracy}", "flgamma_sece",
                   (f"meta.objective_params.bandwidth={h}", f"meta.objective_params.accuracy={accuracy}"))


def variants(quick: bool) -> dict[str, list[Variant]]:
    if quick:
        return {"objective": [_sece(0.01), _obj("dece")], "accuracy": [_sece(0.01, "hard")]}
    return {"objective": [_sece(0.01), _obj("dece"), _obj("sbece"), _obj("savuc")],
            "bandwidth": [_sece(h) for h in (0.001, 0.003, 0.03, 0.1)],
            "accuracy": [_sece(0.01, "hard")]}


@STUDIES.register("objective")
def run(opts: StudyOptions):
    setting = meta_sweep_setting(opts)
    sections = sweep_sections(opts, setting, variants(opts.quick), "Meta objective")
    intro = [f"FLγ-* (focal loss with per-sample γ from the γ-Net, backend jvp) on {setting.label}; only the "
             "meta-validation objective changes (metacal.objectives, default parameters except where named; "
             "SECE default h = 0.01 with soft accuracy). The reference row (SECE, h = 0.01, soft) is in the "
             "objective table. Test numbers of the epoch selected by validation error."]
    return write_page(opts.out, "objective", "Ablation: meta objective, SECE bandwidth, soft vs hard accuracy",
                      opts.command, intro, sections, opts.quick)
