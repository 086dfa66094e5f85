"""Study ``gamma_oracle`` (docs/ablations/gamma_oracle.md): the best FIXED focal γ is the bar a meta-learned
γ must reach.

Focal loss FL = −(1 − p_y)^γ log p_y (Lin et al. 2017; γ = 0 is cross-entropy) is trained at each fixed
γ ∈ {0, 0.5, 1, 2, 3, 4, 5} on an over-confident regime (``configs/<regime>/``, default MNIST-1D), several
seeds each; per γ the validation and test ECE-15 and error at the checkpoint selected by validation error,
as mean ± sample std over seeds. The best γ is the one with the lowest mean VALIDATION ECE (test numbers
never choose). FLγ-SECE (the shipped ``flgamma_sece.yaml``: per-sample γ from the γ-Net, meta-learned on
SECE) runs on the same regime and seeds; its per-epoch training γ (history.json ``train.gamma_mean`` /
``gamma_std``) is drawn against the grid's best γ.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from metacal.report.aggregate import mean_std

from .gamma_oracle_figure import oracle_figure
from .page import Column, Section, Table, write_page
from .runner import CONFIG_ROOT, Setting, TrainedRun, Variant, train_variant
from .study import STUDIES, StudyOptions

GRID = (0.0, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0)
QUICK_GRID = (0.0, 2.0, 5.0)
REGIMES = ("mnist1d_overconfident", "fashion_mnist_overconfident")
FULL_SEEDS, QUICK_SEEDS = 3, 2
META_METHOD = "flgamma_sece"
# Quick mode (a smoke test, not a result): tiny data and model, 3 epochs.
QUICK_OVERRIDES = {"mnist1d_overconfident": ("data.options={num_samples: 1000}", "model.options={hidden: [32]}"),
                   "fashion_mnist_overconfident": ("data.options={train_subset: 200}", "model.options={hidden: [32]}",
                                                   "run.max_steps_per_epoch=2")}
SUMMARY_KEYS = ("error_val", "ece_val", "error_test", "ece_test", "temperature", "ece_test_after_ts", "seconds")


def regime_setting(regime: str, seed: int, quick: bool) -> Setting:
    """The regime's data/model/schedule as its ``base.yaml`` ships it (quick: tiny overrides, 3 epochs)."""
    if regime not in REGIMES:
        raise ValueError(f"gamma_oracle: unknown regime {regime!r}; available: {', '.join(REGIMES)}")
    if quick:
        ov = QUICK_OVERRIDES[regime]
        return Setting(f"configs/{regime} with {', '.join(ov)}, 3 epochs (lr ×0.1 at 2)", ov, 3, regime, seed, (2,))
    from metacal.train import load_config

    cfg = load_config(CONFIG_ROOT / regime / "base.yaml")
    epochs, drops = cfg.schedule.epochs, tuple(cfg.schedule.milestones)
    label = f"configs/{regime} as shipped ({epochs} epochs, lr ×0.1 at {', '.join(map(str, drops))})"
    return Setting(label, (), epochs, regime, seed, drops)


def regime_and_seeds(opts: StudyOptions, study: str, default_seeds: int) -> tuple[str, list[int]]:
    """The study's regime (``--regime``, default MNIST-1D) and seeds (``--seeds N`` from ``--seed``)."""
    n_seeds = opts.num_seeds if opts.num_seeds is not None else default_seeds
    if n_seeds < 1:
        raise ValueError(f"{study}: --seeds must be at least 1, got {n_seeds}")
    regime = opts.regime or REGIMES[0]
    if regime not in REGIMES:
        raise ValueError(f"{study}: unknown regime {regime!r}; available: {', '.join(REGIMES)}")
    return regime, [opts.seed + i for i in range(n_seeds)]


def focal_variant(gamma: float) -> Variant:
    return Variant(f"focal γ = {gamma:g}", "focal", (f"loss.params={{gamma: {gamma!r}}}",))


def run_row(run: TrainedRun, seed: int, gamma: float | None) -> dict[str, Any]:
    """One run: validation/test numbers of the selected epoch, TS temperature, and the γ it trained with."""
    val, test = run.metrics.get("val") or {}, run.metrics.get("test") or {}
    ts = run.metrics.get("test_after_ts") or {}
    traj = gamma_trajectory(run.history)
    return {"variant": run.key, "gamma": gamma, "seed": seed, "epoch": run.metrics.get("epoch"),
            "error_val": val.get("error"), "ece_val": val.get("ece"), "error_test": test.get("error"),
            "ece_test": test.get("ece"), "temperature": ts.get("temperature"), "ece_test_after_ts": ts.get("ece"),
            "gamma_last": traj[-1]["gamma_mean"] if traj else None,
            "gamma_peak": max(p["gamma_mean"] for p in traj) if traj else None, "seconds": run.seconds}


def gamma_trajectory(history: Sequence[dict[str, Any]]) -> list[dict[str, float]]:
    """Per epoch, the training γ's mean and std over that epoch's samples (empty without a γ-Net)."""
    out = []
    for h in history:
        train = h.get("train") or {}
        if "gamma_mean" in train:
            out.append({"epoch": int(h["epoch"]), "gamma_mean": float(train["gamma_mean"]),
                        "gamma_std": float(train.get("gamma_std", math.nan))})
    return out


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean and sample std (ddof 1) over seeds of every number in SUMMARY_KEYS (``<key>_std``)."""
    out: dict[str, Any] = {"variant": rows[0]["variant"], "gamma": rows[0]["gamma"], "seeds": len(rows)}
    for key in SUMMARY_KEYS:
        mean, std, _ = mean_std([r[key] if r[key] is not None else math.nan for r in rows])
        out[key], out[f"{key}_std"] = mean, std
    peaks = [r["gamma_peak"] for r in rows if r["gamma_peak"] is not None]
    if peaks:
        out["gamma_last"] = mean_std([r["gamma_last"] for r in rows])[0]
        out["gamma_peak"] = max(peaks)
    return out


def best_gamma(summaries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The fixed-γ summary with the lowest mean validation ECE (ties: the smaller γ)."""
    grid = [s for s in summaries if s["gamma"] is not None and math.isfinite(s["ece_val"])]
    if not grid:
        raise ValueError("gamma_oracle: no fixed-γ run produced a validation ECE")
    return min(grid, key=lambda s: (s["ece_val"], s["gamma"]))


def mean_trajectory(per_seed: Sequence[list[dict[str, float]]]) -> list[dict[str, float]]:
    """Per epoch over seeds: mean of the per-epoch γ means and std, and the seeds' min / max mean."""
    out = []
    for epoch in sorted({p["epoch"] for traj in per_seed for p in traj}):
        pts = [p for traj in per_seed for p in traj if p["epoch"] == epoch]
        means = [p["gamma_mean"] for p in pts]
        out.append({"epoch": epoch, "gamma_mean": mean_std(means)[0],
                    "gamma_std": mean_std([p["gamma_std"] for p in pts])[0],
                    "gamma_mean_lo": min(means), "gamma_mean_hi": max(means), "seeds": len(pts)})
    return out


def regime_sentence(ce: dict[str, Any]) -> str:
    """The regime as measured by the γ = 0 (cross-entropy) runs: TS temperature > 1 ⇔ over-confident."""
    t = ce["temperature"]
    direction = "OVER-confident" if t > 1 else "UNDER-confident" if t < 1 else "neither over- nor under-confident"
    return (f"Regime: CE (focal γ = 0, the same loss) is {direction} here: test ECE {100 * ce['ece_test']:.2f}% "
            f"± {100 * ce['ece_test_std']:.2f}, temperature fitted by NLL on validation T = {t:.3f} ± "
            f"{ce['temperature_std']:.3f} (T > 1: the logits are scaled down, i.e. the model was over-confident).")


def _verdict(best: dict[str, Any], meta: dict[str, Any]) -> str:
    won = meta["ece_test"] <= best["ece_test"]
    return (f"FLγ-SECE reaches test ECE {100 * meta['ece_test']:.2f}% (error {100 * meta['error_test']:.2f}%) "
            f"against {100 * best['ece_test']:.2f}% (error {100 * best['error_test']:.2f}%) for the fixed γ = "
            f"{best['gamma']:g} chosen on validation: it {'matches or beats' if won else 'does NOT reach'} the "
            f"oracle bar. Its γ ended at {meta['gamma_last']:.2f} on average (peak per-epoch mean over seeds "
            f"{meta['gamma_peak']:.2f}).")


COLUMNS = [Column("variant", "Variant"), Column("error_val", "val error (%)", 100, 2, "error_val_std"),
           Column("ece_val", "val ECE (%)", 100, 2, "ece_val_std"),
           Column("error_test", "test error (%)", 100, 2, "error_test_std"),
           Column("ece_test", "test ECE (%)", 100, 2, "ece_test_std"),
           Column("temperature", "TS T", 1, 3, "temperature_std"),
           Column("ece_test_after_ts", "test ECE after TS (%)", 100, 2, "ece_test_after_ts_std"),
           Column("gamma_last", "γ last epoch", 1, 2), Column("gamma_peak", "γ peak", 1, 2),
           Column("seconds", "s / run", 1, 1), Column("chosen", "chosen on val ECE")]


@STUDIES.register("gamma_oracle")
def run(opts: StudyOptions):
    regime, seeds = regime_and_seeds(opts, "gamma_oracle", QUICK_SEEDS if opts.quick else FULL_SEEDS)
    grid = QUICK_GRID if opts.quick else GRID
    meta = ("meta.batch_size=64",) if opts.quick else ()  # quick MNIST-1D: a 100-sample meta-val split
    variants = [(focal_variant(g), g) for g in grid] + [(Variant("FLγ-SECE (shipped config)", META_METHOD, meta), None)]
    run_rows, trajectories = [], []
    for variant, gamma in variants:
        for seed in seeds:
            setting = regime_setting(regime, seed, opts.quick)
            safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in variant.key)
            trained = train_variant(setting, variant, opts.work / regime / f"{safe}_seed{seed}", reuse=True)
            run_rows.append(run_row(trained, seed, gamma))
            if gamma is None:
                trajectories.append(gamma_trajectory(trained.history))
    summaries = [summarize([r for r in run_rows if r["variant"] == v.key]) for v, _ in variants]
    best, meta = best_gamma(summaries), summaries[-1]
    best["chosen"] = "best (lowest val ECE)"
    traj = mean_trajectory(trajectories)
    name = "gamma_oracle" if regime == REGIMES[0] else f"gamma_oracle_{regime}"
    fig_path = oracle_figure(summaries, best, meta, traj, opts.out / f"{name}_figure.png", trajectories)
    label = regime_setting(regime, seeds[0], opts.quick).label
    intro = [f"Focal loss at fixed γ and FLγ-SECE on {label}; seeds {', '.join(map(str, seeds))}. Every run's "
             "checkpoint is the epoch with the lowest validation error (eval.select_by); ECE = 15-bin equal-width "
             "ECE of that checkpoint; TS T = temperature fitted by NLL on validation (metrics.json "
             "test_after_ts.temperature). Mean ± sample std over seeds.",
             regime_sentence(summaries[0]) if grid[0] == 0 else "",
             f"The best fixed γ is chosen on mean VALIDATION ECE: γ = {best['gamma']:g}. " + _verdict(best, meta)]
    sections = [Section("Fixed γ grid and FLγ-SECE", tables=[Table("summary", summaries, COLUMNS)],
                        figures=[("Left: ECE vs fixed γ (val and test; FLγ-SECE dotted). Middle: error. Right: "
                                  "FLγ-SECE's training γ per epoch (mean over seeds; band = mean within-epoch "
                                  "std; thin lines = seeds) against the best fixed γ chosen on validation.",
                                  fig_path)]),
                Section("FLγ-SECE γ trajectory", text=["Per epoch: training γ mean and within-epoch std (averaged "
                                                       "over seeds), and the lowest/highest seed's mean."],
                        tables=[Table("trajectory", traj, [
                            Column("epoch", "epoch"), Column("gamma_mean", "γ mean", 1, 3),
                            Column("gamma_std", "γ std within epoch", 1, 3), Column("gamma_mean_lo", "min seed", 1, 3),
                            Column("gamma_mean_hi", "max seed", 1, 3)])]),
                Section("Every run", tables=[Table("runs", run_rows, [
                    Column("variant", "Variant"), Column("seed", "seed"), Column("epoch", "selected epoch"),
                    Column("error_val", "val error (%)", 100, 2), Column("ece_val", "val ECE (%)", 100, 2),
                    Column("error_test", "test error (%)", 100, 2), Column("ece_test", "test ECE (%)", 100, 2),
                    Column("temperature", "TS T", 1, 3), Column("seconds", "s", 1, 1)])])]
    return write_page(opts.out, name, f"Ablation: the fixed-γ oracle on {regime}", opts.command,
                      [line for line in intro if line], sections, opts.quick)
