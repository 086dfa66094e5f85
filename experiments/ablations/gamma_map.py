"""Study ``gamma_map``: the γ-Net's output map and scale (Wang & Golebiowski 2024, §4.1 eq. 5, "Practical considerations").

FLγ-SECE variants: the output map |r| (paper), softplus(r), γ_max·sigmoid(r) (γ_max = 5), ReLU(r), with
r = (x̃W + b)/τ; the temperature τ (paper: 0.01, fixed); the number of attention heads k (paper: k = K).
The heads sweep sets ``meta.gamma_net.num_heads`` (the trainer's default is k = K).
"""

from __future__ import annotations

from .page import write_page
from .runner import Variant
from .study import STUDIES, StudyOptions, meta_sweep_setting, sweep_sections


def _variant(output: str = "abs", tau: float = 0.01, heads: int | None = None) -> Variant:
    key = f"output={output}, tau={tau}" + (f", heads={heads}" if heads is not None else ", heads=K")
    ov = (f"meta.gamma_net.output={output}", f"meta.gamma_net.tau={tau}")
    if output == "sigmoid":
        ov += ("meta.gamma_net.gamma_max=5.0",)
    if heads is not None:
        ov += (f"meta.gamma_net.num_heads={heads}",)
    return Variant(key, "flgamma_sece", ov)


def variants(quick: bool) -> dict[str, list[Variant]]:
    if quick:
        return {"output map": [_variant("abs"), _variant("sigmoid")], "tau": [_variant("abs", 0.1)],
                "heads": [_variant("abs", heads=2)]}
    return {"output map": [_variant(o) for o in ("abs", "softplus", "sigmoid", "relu")],
            "tau": [_variant("abs", t) for t in (0.001, 0.1, 1.0)],
            "heads": [_variant("abs", heads=k) for k in (1, 2, 4, 32)]}


@STUDIES.register("gamma_map")
def run(opts: StudyOptions):
    setting = meta_sweep_setting(opts)
    sections = sweep_sections(opts, setting, variants(opts.quick), "γ-Net variant")
    sections[0].text = ["The default γ-Net (Wang & Golebiowski 2024) is output=abs, τ = 0.01, k = K heads; the τ and heads "
                        "sweeps vary one knob from it. In the full run the default row is in the output-map table."]
    intro = [f"FLγ-SECE (focal loss, per-sample γ from the γ-Net, meta-learned on SECE h = 0.01, backend jvp) on "
             f"{setting.label}. Test numbers of the epoch selected by validation error; γ mean/std = the γ-Net's "
             "output on the test set; ECE after TS = temperature fitted by NLL on validation; s/epoch = mean "
             "trainer epoch time without the first epoch."]
    return write_page(opts.out, "gamma_map", "Ablation: γ-Net output map, τ and number of heads", opts.command,
                      intro, sections, opts.quick)
