"""What every study receives (``StudyOptions``), the study registry, and helpers shared by the studies."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from metacal.registry import Registry
from metacal.meta import learner_section

from .page import Column, PageResult, Section, Table
from .runner import Setting, TrainedRun, Variant, gaussian_mixture_setting, train_variant

STUDIES: Registry[Callable[["StudyOptions"], PageResult]] = Registry("ablation study")


@dataclass
class StudyOptions:
    quick: bool  # tiny settings: a smoke test of the whole pipeline (well under 30 s), not a result
    out: Path  # where <name>.md, the CSVs and the figures go
    work: Path  # where the study's training runs go
    command: str  # the command line that regenerates the page (printed on it)
    seed: int = 0
    runs: Sequence[Path] | None = None  # bins: existing run directories instead of training
    regime: str | None = None  # gamma_oracle: the configs/<regime> directory (None: the study's default)
    num_seeds: int | None = None  # gamma_oracle: seeds seed, seed + 1, … (None: the study's default)


def train_all(opts: StudyOptions, setting: Setting, variants: Sequence[Variant]) -> list[TrainedRun]:
    """Train each variant into ``<work>/<key>`` (keys are made file-name safe)."""
    out = []
    for v in variants:
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in v.key)
        out.append(train_variant(setting, v, opts.work / safe))
    return out


def test_row(run: TrainedRun) -> dict[str, Any]:
    """Test numbers of the selected (best validation) epoch from metrics.json, plus TS and timing."""
    test = run.metrics.get("test") or {}
    ts = run.metrics.get("test_after_ts") or {}
    meta = run.cfg.meta if run.cfg is not None and learner_section(run.cfg.learner) == "meta" else None
    return {"variant": run.key, "method": run.method, "epoch": run.metrics.get("epoch"),
            "error": test.get("error"), "nll": test.get("nll"), "ece": test.get("ece"), "sece": test.get("sece"),
            "smece": test.get("smece"), "ece_after_ts": ts.get("ece"), "temperature": ts.get("temperature"),
            "gamma_mean": test.get("gamma_mean"), "gamma_std": test.get("gamma_std"),
            "s_per_epoch": run.seconds_per_epoch(),
            "num_heads": getattr(run.gamma_net, "num_heads", None), "gamma_output": getattr(run.gamma_net, "output", None),
            "gamma_tau": getattr(run.gamma_net, "tau", None),
            "meta_objective": meta.objective if meta is not None else None,
            "meta_backend": meta.backend if meta is not None else None}


TEST_COLUMNS = [Column("error", "Error (%)", 100, 2), Column("nll", "NLL", 1, 3), Column("ece", "ECE-15 (%)", 100, 2),
                Column("sece", "SECE (%)", 100, 2), Column("ece_after_ts", "ECE after TS (%)", 100, 2),
                Column("gamma_mean", "test γ mean", 1, 2), Column("gamma_std", "test γ std", 1, 2),
                Column("s_per_epoch", "s/epoch", 1, 2)]




def meta_sweep_setting(opts: StudyOptions) -> Setting:
    """The γ-Net studies' data: a tiny Gaussian mixture in quick mode, 20k/10k samples and 30 epochs otherwise."""
    if opts.quick:
        return gaussian_mixture_setting(1500, 1000, 2, seed=opts.seed)
    return gaussian_mixture_setting(20_000, 10_000, 30, hidden=(256, 256), seed=opts.seed)


def sweep_sections(opts: StudyOptions, setting: Setting, groups: dict[str, list[Variant]],
                   variant_label: str) -> list[Section]:
    """Train every group of variants; one section with one table of test numbers per group."""
    sections = []
    for group, variants in groups.items():
        rows = [test_row(r) for r in train_all(opts, setting, variants)]
        columns = [Column("variant", variant_label)] + TEST_COLUMNS
        sections.append(Section(f"Sweep: {group}", tables=[Table(group.replace(" ", "_"), rows, columns)]))
    return sections
