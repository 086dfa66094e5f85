"""Study ``meta_horizon`` (docs/ablations/meta_horizon.md): the remedies the meta_signal diagnosis supports,
side by side, and the robustness of the one shipped as ``flgamma_sece_trajectory``.

FLγ-SECE (Wang & Golebiowski 2024) on an over-confident regime, varied in what the diagnosis blamed:

* the horizon of the γ level's hypergradient — ``meta.horizon=step`` (the paper's one-step lookahead) vs
  ``trajectory`` (dJ/db of the γ-Net's bias through every past SGD step, metacal/meta/trajectory.py);
* the per-sample shape (attention A, weight W), which the one-step hypergradient moves at random —
  ``meta.shape_lr_scale`` 1 (as the paper), 0.1, 0 (frozen: one learned γ for every sample);
* the noise of the meta-validation gradient v: a 128-sample meta batch vs the whole meta-validation split
  (400 samples on MNIST-1D: v is then exact for the current θ), with the whole trajectory or a horizon
  truncated to ≈ 4 epochs (``meta.horizon_decay`` 0.99);
* what the level is driven by, with that noise-free v: the meta objective with CE added (J = SECE + CE, a
  proper score that also values accuracy), and plain SGD on the level instead of Adam, whose step scales
  with the hypergradient (Adam's is ≈ lr whatever its size, so a small persistent sign bias walks γ away);
* the meta learning rate of the level: the shipped 1e-3, ×3 and ÷3 (the robustness check: test
  ECE within 1.5× of the shipped setting's, and no runaway γ).

On MNIST-1D every variant runs; on other regimes only the shipped variant and its ×3 / ÷3 learning rates
(the rest is on the regime's results page). Besides the test numbers, the γ of the last epoch and the largest
γ of any sample: ``↑level share`` is the share of meta steps whose trajectory hypergradient asked for a
larger γ (history.json train.raise_level_frac), ``↑γ share`` the same for the one-step dJ/dδ.
"""

from __future__ import annotations

from typing import Any

from .gamma_oracle import REGIMES, regime_and_seeds, regime_setting, run_row
from .meta_signal import COLUMNS as SIGNAL_COLUMNS
from .meta_signal import SUMMARY_KEYS, meta_step_share, run_dir, runs_section, signal_row, summarize
from .page import Column, Section, Table, write_page
from .runner import Variant, train_variant
from .study import STUDIES, StudyOptions

FULL_SEEDS, QUICK_SEEDS = 2, 1
SHIPPED = "flgamma_sece_trajectory"
SHIPPED_LR = 1e-3
SHIPPED_LABEL = f"trajectory level, shape frozen, lr {SHIPPED_LR:g} (shipped: {SHIPPED})"
FULL_META_VAL = 400  # the whole meta-validation split of configs/mnist1d_overconfident: v without sampling noise
# SGD on the level b: Δγ = −lr·∂J/∂γ̄ / τ² (τ = 0.01), so with |∂J/∂γ̄| ≈ 0.05 (TensorBoard step/dJ_dlevel)
# lr 1e-5 moves γ ≈ 0.005 per meta step (≤ 5 over the 1,000 steps of the schedule), 1e-4 ten times that;
# 1e-4 ×3 and ÷3 check its robustness as ×3 and ÷3 do for the shipped setting.
SGD_LEVEL_LRS = (1e-5, 1e-4 / 3, 1e-4, 3e-4)
ROBUST_FACTOR = 1.5  # the robustness bar: ECE at lr ×3 and ÷3 within 1.5× of the shipped setting's


def robustness_variants() -> list[Variant]:
    return [Variant(SHIPPED_LABEL, SHIPPED, ()),
            Variant(f"trajectory level, shape frozen, lr {3 * SHIPPED_LR:.2g} (×3)", SHIPPED, (f"meta.lr={3 * SHIPPED_LR!r}",)),
            Variant(f"trajectory level, shape frozen, lr {SHIPPED_LR / 3:.2g} (÷3)", SHIPPED, (f"meta.lr={SHIPPED_LR / 3!r}",))]


def variants(quick: bool, regime: str = REGIMES[0]) -> list[Variant]:
    """MNIST-1D: the paper's one-step FLγ-SECE, the trajectory level with the shape free / slowed, then the
    shipped variant with its ×3 / ÷3 learning rates; other regimes: the last three only."""
    robust = robustness_variants()
    if quick:
        return [Variant("one-step (FLγ-SECE as shipped)", "flgamma_sece", ()), robust[0]]
    if regime != REGIMES[0]:
        return robust
    return [Variant("one-step (FLγ-SECE as shipped)", "flgamma_sece", ()),
            Variant("trajectory level, shape one-step, lr 1e-4", "flgamma_sece", ("meta.horizon=trajectory",)),
            Variant(f"trajectory level, shape lr ×0.1, lr {SHIPPED_LR:g}", SHIPPED, ("meta.shape_lr_scale=0.1",)),
            robust[0],
            Variant(f"trajectory level, shape frozen, lr {SHIPPED_LR:g}, meta batch = all {FULL_META_VAL} meta-val samples",
                    SHIPPED, (f"meta.batch_size={FULL_META_VAL}",)),
            Variant("the same, horizon decay 0.99 (≈ 4 epochs)", SHIPPED,
                    (f"meta.batch_size={FULL_META_VAL}", "meta.horizon_decay=0.99")),
            Variant("the same (whole trajectory), J = SECE + CE (meta.ce_weight 1)", SHIPPED,
                    (f"meta.batch_size={FULL_META_VAL}", "meta.ce_weight=1.0")),
            *(Variant(f"the same, SGD on the level, lr {lr:.2g} (step ∝ gradient)", SHIPPED,
                      (f"meta.batch_size={FULL_META_VAL}", "meta.optimizer=sgd", f"meta.lr={lr!r}"))
              for lr in SGD_LEVEL_LRS),
            *robust[1:]]


COLUMNS = SIGNAL_COLUMNS[:-2] + [
    Column("raise_share", "↑γ share (one-step)", 100, 1, "raise_share_std"),
    Column("level_share", "↑level share (trajectory)", 100, 1, "level_share_std"), SIGNAL_COLUMNS[-1]]


def robustness_sentences(summaries: list[dict[str, Any]]) -> list[str]:
    """The robustness check (meta lr ×3 and ÷3) on the shipped variant's rows (empty when they are not all
    there)."""
    by = {s["variant"]: s for s in summaries}
    labels = [v.key for v in robustness_variants()]
    if not all(label in by for label in labels):
        return []
    base = by[labels[0]]["ece_test"]
    verdicts = [f"{label}: test ECE {100 * by[label]['ece_test']:.2f}% = {by[label]['ece_test'] / base:.2f}× "
                f"(max γ {by[label]['gamma_max']:.2f})" for label in labels[1:]]
    ok = all(by[label]["ece_test"] <= ROBUST_FACTOR * base for label in labels[1:])
    return [f"Robustness (a γ set by the meta objective rather than by its learning rate survives meta lr ×3 "
            f"and ÷3; bar: within {ROBUST_FACTOR}× of the shipped setting's test ECE "
            f"{100 * base:.2f}%, max γ {by[labels[0]]['gamma_max']:.2f}): " + "; ".join(verdicts) +
            f". **{'Holds' if ok else 'Does not hold'}.**"]


@STUDIES.register("meta_horizon")
def run(opts: StudyOptions):
    regime, seeds = regime_and_seeds(opts, "meta_horizon", QUICK_SEEDS if opts.quick else FULL_SEEDS)
    rows = []
    chosen = variants(opts.quick, regime)
    for variant in chosen:
        for seed in seeds:
            setting = regime_setting(regime, seed, opts.quick)
            trained = train_variant(setting, variant, run_dir(opts, regime, variant.key, seed), reuse=True)
            rows.append({**run_row(trained, seed, None), **signal_row(trained.history),
                         "level_share": meta_step_share(trained.history, "raise_level_frac")[0]})
    summaries = [summarize([r for r in rows if r["variant"] == v.key], SUMMARY_KEYS + ("level_share",))
                 for v in chosen]
    label = regime_setting(regime, seeds[0], opts.quick).label
    intro = [f"Regime: the one configs/{regime}/base.yaml is named for — CE over-confident (its temperature and "
             "ECE are measured by the gamma_oracle study, focal γ = 0; the bar is that study's best fixed γ "
             f"chosen on validation). FLγ-SECE on {label}; seeds {', '.join(map(str, seeds))}; checkpoint = "
             "lowest validation error. Mean ± sample std over seeds. The variants and the two signal shares "
             "are defined in experiments/ablations/meta_horizon.py."]
    intro += robustness_sentences(summaries)
    sections = [Section("Outcome and signal per variant", tables=[Table("summary", summaries, COLUMNS)]),
                runs_section(rows, Column("level_share", "↑level share", 100, 1))]
    return write_page(opts.out, "meta_horizon" if regime == REGIMES[0] else f"meta_horizon_{regime}",
                      f"Ablation: remedies for the meta-learner on {regime}", opts.command, intro, sections,
                      opts.quick)
