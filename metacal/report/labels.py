"""Display names of methods: config stem → the label the source papers use (Wang & Golebiowski 2024,
Table 1; Wang, Feng & Zhang 2021; Karandikar et al. 2021; Lin et al. 2025).

Unknown stems are shown by their method record's label ("Focal γ = 2.5", metacal/run/method.py) or as they are, so a
new config never disappears from a table. The fixed-γ focal grid (configs/methods/focal2…5.yaml, a user's γ = 2.5)
is named and ordered by its record: after Focal (γ = 1), by γ.
"""

from __future__ import annotations

from metacal.run.method import Method

METHOD_LABELS: dict[str, str] = {
    "ce": "CE",
    "focal": "Focal",
    "flsd53": "FLSD-53",
    "ls005": "LS-0.05",
    "ls01": "LS-0.1",
    "mbls": "MbLS",
    "mixup": "Mixup",
    "mmce": "MMCE",
    "ce_dece": "CE-DECE",
    "ce_sece": "CE-SECE",
    "flgamma_dece": "FLγ-DECE",
    "flgamma_sece": "FLγ-SECE",
    "flgamma_sece_trajectory": "FLγ-SECE, trajectory level",
    "dual_focal": "Dual focal",
    "inverse_focal": "Inverse focal",
    "adafocal": "AdaFocal",
    "bsce_gra": "BSCE-GRA",
    "focal_savuc": "Focal+S-AvUC",
    "nll_sbece": "NLL+SB-ECE",
    "auto_gamma": "Focal, auto γ",
    "auto_gamma_shift": "Focal, auto γ (shift-tuned)",
    "auto_ls": "LS, auto ε",
    "auto_dual_focal": "Dual focal, auto γ",
}


# Other spellings of the same stems (configs/*/ls_005.yaml, ls_01.yaml).
STEM_ALIASES: dict[str, str] = {"ls_005": "ls005", "ls_01": "ls01"}


def method_label(stem: str, spec: Method | None = None) -> str:
    """Paper label of a config stem (``"flgamma_sece"`` → ``"FLγ-SECE"``); an unknown stem: its method record's
    label (``spec``, e.g. "Focal γ = 2.5" for a fixed-γ focal run), else the stem unchanged."""
    key = STEM_ALIASES.get(stem, stem)
    if key in METHOD_LABELS:
        return METHOD_LABELS[key]
    return spec.label if spec is not None and (spec.fixed_gamma or 0.0) > 0 else stem


def method_order(stem: str, spec: Method | None = None) -> tuple[int, float, str]:
    """Sort key: the papers' row order for known methods (as listed in METHOD_LABELS), a fixed-γ focal run of
    another name after Focal by its γ (from its record, ``spec``), then unknown stems A→Z."""
    order = list(METHOD_LABELS)
    key = STEM_ALIASES.get(stem, stem)
    if key in METHOD_LABELS:
        return order.index(key), 0.0, ""
    if spec is not None and (gamma := spec.fixed_gamma or 0.0) > 0:
        return order.index("focal"), gamma, stem
    return len(order), 0.0, stem
