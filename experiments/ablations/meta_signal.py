"""Study ``meta_signal`` (docs/ablations/meta_signal.md): does the one-step hypergradient tell the γ-Net which
way to move γ? Asked because FLγ-SECE stays above the best fixed γ where CE is over-confident
(docs/results/mnist1d_overconfident.md).

FLγ-SECE (Wang & Golebiowski 2024) on an over-confident regime, varied in the three places the diagnosis
points at: the γ-Net's output map (``abs`` |r|, the paper's, vs the bounded ``sigmoid`` γ_max·σ(r)), the
meta learning rate (×1/3, ×1, ×3 around the shipped 1e-4) and the SECE estimator (``include_self``: the
j = i term of eq. 13 vs leave-one-out). Per run, besides the usual test numbers, the meta step's own
signal: at every meta step the trainer records dJ/dδ, the one-step hypergradient of the meta objective J
w.r.t. a global offset γ_i + δ (metacal.meta.StepResult.gamma_grad, summed); ``↑γ share`` is the share of
meta steps with dJ/dδ < 0, i.e. that asked for a larger γ. In a regime that needs a larger γ than the
start value, a useful signal gives a share well above 1/2; a share inside the binomial 95% band around 1/2
(± 1.96·0.5/√n over the n meta steps) says the steps' signs are coin flips, and γ's path is then set by
what the noise does under the output map (|·| reflects at 0 and drifts up; σ saturates at 0 or γ_max).
"""

from __future__ import annotations

import math
from typing import Any

from metacal.report.aggregate import mean_std

from .gamma_oracle import REGIMES, regime_and_seeds, regime_setting, run_row
from .page import Column, Section, Table, write_page
from .runner import Variant, train_variant
from .study import STUDIES, StudyOptions

SHIPPED_LR = 1e-4
FULL_SEEDS, QUICK_SEEDS = 2, 1


def variants(quick: bool) -> list[Variant]:
    """(output map × meta lr) on the paper's SECE, then leave-one-out SECE at the shipped lr."""
    out = []
    factors = (1.0,) if quick else (1 / 3, 1.0, 3.0)
    for output in ("abs", "sigmoid"):
        for f in factors:
            lr = SHIPPED_LR * f
            out.append(Variant(f"{output}, meta lr {lr:.2g}", "flgamma_sece",
                               (f"meta.gamma_net.output={output}", f"meta.lr={lr!r}")))
    for output in ("abs",) if quick else ("abs", "sigmoid"):
        out.append(Variant(f"{output}, meta lr {SHIPPED_LR:.2g}, leave-one-out SECE", "flgamma_sece",
                           (f"meta.gamma_net.output={output}", "meta.objective_params.include_self=false")))
    return out


def meta_step_share(history: list[dict[str, Any]], key: str) -> tuple[float, int]:
    """(share, n): the per-epoch share ``train.<key>`` (e.g. raise_gamma_frac) over every meta step of the
    run, weighted by ``train.meta_steps``; NaN and 0 when no epoch records it."""
    epochs = [h["train"] for h in history if key in h.get("train", {})]
    n = sum(t["meta_steps"] for t in epochs)
    return (sum(t[key] * t["meta_steps"] for t in epochs) / n if n else math.nan), n


def signal_row(history: list[dict[str, Any]]) -> dict[str, Any]:
    """↑γ share over every meta step of the run, the binomial 95% band around 1/2 for that many steps, and
    the largest γ of any training sample."""
    share, n = meta_step_share(history, "raise_gamma_frac")
    gmax = max((h["train"]["gamma_max"] for h in history if "gamma_max" in h.get("train", {})), default=math.nan)
    band = f"50 ± {100 * 1.96 * 0.5 / math.sqrt(n):.1f}" if n else "–"
    return {"raise_share": share, "gamma_max": gmax, "meta_steps": n, "band": band}


SUMMARY_KEYS = ("error_test", "ece_test", "temperature", "gamma_last", "raise_share")


def summarize(rows: list[dict[str, Any]], keys: tuple[str, ...] = SUMMARY_KEYS) -> dict[str, Any]:
    """Mean and sample std over seeds of ``keys``, the largest γ of any run, the binomial band."""
    out: dict[str, Any] = {"variant": rows[0]["variant"], "seeds": len(rows)}
    for key in keys:
        out[key], out[f"{key}_std"], _ = mean_std([r[key] for r in rows])
    out["gamma_max"] = max(r["gamma_max"] for r in rows)
    out["band"] = rows[0]["band"]
    return out


def run_dir(opts: StudyOptions, regime: str, key: str, seed: int):
    """The training run directory of one variant and seed (the label made file-name safe)."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in key)
    return opts.work / regime / f"{safe}_seed{seed}"


COLUMNS = [Column("variant", "FLγ-SECE variant"), Column("error_test", "test error (%)", 100, 2, "error_test_std"),
           Column("ece_test", "test ECE (%)", 100, 2, "ece_test_std"),
           Column("temperature", "TS T", 1, 3, "temperature_std"),
           Column("gamma_last", "γ last epoch", 1, 2, "gamma_last_std"), Column("gamma_max", "max γ (any sample)", 1, 2),
           Column("raise_share", "↑γ share", 100, 1, "raise_share_std"), Column("band", "½ ± 95% band (%)")]


def runs_section(rows: list[dict[str, Any]], share: Column) -> Section:
    """The "Every run" table of the meta studies, with the study's signal share as the last-but-one column."""
    return Section("Every run", tables=[Table("runs", rows, [
        Column("variant", "Variant"), Column("seed", "seed"), Column("epoch", "selected epoch"),
        Column("error_test", "test error (%)", 100, 2), Column("ece_test", "test ECE (%)", 100, 2),
        Column("temperature", "TS T", 1, 3), Column("gamma_last", "γ last", 1, 2),
        Column("gamma_max", "max γ", 1, 2), share, Column("seconds", "s", 1, 1)])])


@STUDIES.register("meta_signal")
def run(opts: StudyOptions):
    regime, seeds = regime_and_seeds(opts, "meta_signal", QUICK_SEEDS if opts.quick else FULL_SEEDS)
    rows = []
    for variant in variants(opts.quick):
        for seed in seeds:
            setting = regime_setting(regime, seed, opts.quick)
            trained = train_variant(setting, variant, run_dir(opts, regime, variant.key, seed), reuse=True)
            rows.append({**run_row(trained, seed, None), **signal_row(trained.history)})
    summaries = [summarize([r for r in rows if r["variant"] == v.key]) for v in variants(opts.quick)]
    label = regime_setting(regime, seeds[0], opts.quick).label
    shares = [s["raise_share"] for s in summaries]
    intro = [f"Regime: the one configs/{regime}/base.yaml is named for — CE over-confident (its temperature and "
             "ECE are measured by the gamma_oracle study, focal γ = 0). "
             f"FLγ-SECE on {label}; seeds {', '.join(map(str, seeds))}; checkpoint = lowest validation error. "
             "↑γ share = share of meta steps whose one-step hypergradient asked for a larger global γ "
             "(dJ/dδ < 0; the trainer's history.json train.raise_gamma_frac, weighted by train.meta_steps). Mean ± "
             "sample std over seeds.",
             f"Across every variant the ↑γ share lies between {100 * min(shares):.1f}% and "
             f"{100 * max(shares):.1f}%: compare it with the binomial band in the last column."]
    sections = [Section("Signal and outcome per variant", tables=[Table("summary", summaries, COLUMNS)]),
                runs_section(rows, Column("raise_share", "↑γ share", 100, 1))]
    return write_page(opts.out, "meta_signal" if regime == REGIMES[0] else f"meta_signal_{regime}",
                      f"Ablation: the meta step's signal on {regime}", opts.command, intro, sections, opts.quick)
