"""A regime page's figure: the headline metric per regime, one line per row, with the 95% t-interval of the mean over
seeds; one panel per study (the noisy-label studies: one panel without and one with the trusted clean set)."""

from __future__ import annotations

import math
from pathlib import Path

from metacal.report.paired import t_quantile

from .numbers import StudyNumbers
from .rows import Variant, values
from .study import Page, Study

#: the rows drawn (the tables have them all): the references, then each method + TS, mixup raw too
DRAWN = (("ce", "ts_nll"), ("ce", "ets"), ("ce", "dirichlet"), ("grid", "ts_nll"), ("auto_gamma", "ts_nll"),
         ("flgamma_sece", "ts_nll"), ("mixup", "raw"), ("mixup", "ts_nll"), ("dual_focal", "raw"), ("ls_005", "raw"))


def interval(vals: dict[int, float]) -> tuple[float, float]:
    """(mean, half-width of the 95% t-interval); half-width 0 for one seed."""
    xs = list(vals.values())
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, 0.0
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    return m, t_quantile(0.95, len(xs) - 1) * sd / math.sqrt(len(xs))


def panels(studies: list[Study]) -> list[tuple[Study, str, list]]:
    """(study, panel title, regimes) per panel: the trusted regimes apart from the others."""
    out = []
    for s in studies:
        plain = [r for r in s.regimes if not r.trusted]
        trusted = [r for r in s.regimes if r.trusted]
        out.append((s, s.title + (" — held-out labels as noisy as the training labels" if trusted else ""), plain))
        if trusted:
            out.append((s, f"{s.title} — {trusted[0].trusted} clean held-out labels", trusted))
    return out


def draw(spec: Page, studies: list[Study], numbers: dict[str, StudyNumbers], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn = [Variant(stem, c) for stem, c in DRAWN if stem != "ce" or c in spec.references]
    cells = [(s, title, regimes) for s, title, regimes in panels(studies)
             if any(r.name in numbers[s.name] for r in regimes)]
    cols = 2 if len(cells) > 1 else 1
    rows = math.ceil(len(cells) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 3.8 * rows), squeeze=False)
    for ax, (s, title, regimes) in zip(axes.flat, cells):
        for i, v in enumerate(drawn):
            xs, ys, errs = [], [], []
            for j, regime in enumerate(regimes):
                stems = numbers[s.name].get(regime.name)
                vals = values(stems, v, spec.headline) if stems else {}
                if vals:
                    m, h = interval(vals)
                    xs.append(j + (i - len(drawn) / 2) * 0.03)
                    ys.append(100 * m)
                    errs.append(100 * h)
            if xs:
                style = "--" if v.stem == "ce" else "-"
                ax.errorbar(xs, ys, yerr=errs, fmt=style + "o", ms=3, capsize=2, label=v.label, lw=1.2)
        ax.set_xticks(range(len(regimes)), [r.label for r in regimes], fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.set_ylabel(f"{spec.headline} (%)")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(cells):]:
        ax.axis("off")
    legend = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    fig.legend(list(legend.values()), list(legend), loc="lower center", ncol=max(1, min(5, len(legend))), fontsize=8)
    fig.tight_layout(rect=(0, 0.06 if rows > 1 else 0.12, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
