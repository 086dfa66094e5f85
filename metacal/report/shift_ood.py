"""A second OOD table on a shift page, from another sweep of the same regime: typically runs trained on some of the
classes (``data.options.in_classes``) and evaluated with ``python -m metacal.evaluate RUN --ood held_out_classes``,
so that the OOD inputs are the test images of the classes left out (near OOD, docs/conventions.md#shift), beside
the page's own far-OOD set. Rows: each method raw and + TS (TS fitted on that run's clean validation), AUROC and
FPR95 of the OOD scores, mean ± std over seeds; no paired intervals.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Sequence

from metacal.report.aggregate import MethodRow
from metacal.report.labels import method_label, method_order
from metacal.report.shift_rows import OOD, OOD_METRICS, key, leaf
from metacal.run.layout import find_runs, read_json, read_sweep_command
from metacal.shift.evaluate import OUT_DIR


def parse_ood_sweep(text: str) -> tuple[Path, str]:
    """``"runs/x:held_out_classes"`` → (Path("runs/x"), "held_out_classes"); a ValueError without the ``:SET``."""
    root, sep, name = text.rpartition(":")
    if not sep or not root or not name:
        raise ValueError(f"--ood-sweep must look like SWEEP:SET (e.g. runs/shift_fmo_classes:held_out_classes), "
                         f"got {text!r}")
    return Path(root), name


def load_ood_rows(root: str | Path, ood: str, seeds: Sequence[int] | None = None,
                  methods: Sequence[str] | None = None) -> list[MethodRow]:
    """Per method of the sweep under ``root`` (of ``seeds`` and ``methods`` when given), a raw row and a + TS row
    of ``shift/ood_<ood>.json``'s numbers (keys :func:`metacal.report.shift_rows.key` ``("ood", score, metric)``);
    a one-line error for no runs or runs lacking the file (named)."""
    root = Path(root)
    runs = [r for r in find_runs(root) if (seeds is None or r.seed in set(seeds))
            and (methods is None or r.method in set(methods))]
    if not runs:
        raise ValueError(f"--ood-sweep: no run directories under {root} (expected <method>/seed<S>/)")
    parts = [(r, read_json(r.path / OUT_DIR / f"ood_{ood}.json")) for r in runs]
    missing = [str(r.path) for r, data in parts if not (data and isinstance(data.get("ood"), dict))]
    if missing:
        raise ValueError(f"--ood-sweep: {len(missing)} of {len(runs)} runs have no {OUT_DIR}/ood_{ood}.json, e.g. "
                         f"{missing[0]} (run python -m metacal.evaluate RUN --ood {ood} on each)")
    by_method: dict[str, list] = {}
    for run, data in parts:
        by_method.setdefault(run.method, []).append((run, data["ood"]))
    rows = []
    for method in sorted(by_method, key=lambda m: method_order(m, by_method[m][0][0].spec)):
        group = by_method[method]
        label = method_label(method, group[0][0].spec)
        for column, suffix in (("uncalibrated", ""), ("ts_nll", " + TS")):
            per_run = {run.seed if run.seed is not None else run.path.name:
                       {key(OOD, score, m): leaf(values, m) for score, values in part.get(column, {}).items()
                        for m in OOD_METRICS} for run, part in group}
            rows.append(MethodRow(method=method + ("+ts" if suffix else ""), label=label + suffix,
                                  seeds=sorted(s for s in per_run if isinstance(s, int)), missing_seeds=[],
                                  per_run=per_run))
    return rows


def trained_classes(root: str | Path) -> list[int] | None:
    """``data.options.in_classes`` of the sweep's first run (None when it trained on every class)."""
    runs = find_runs(Path(root))
    options = ((runs[0].config.get("data") or {}).get("options") or {}) if runs else {}
    classes = options.get("in_classes")
    return [int(c) for c in classes] if isinstance(classes, list) else None


def ood_sweep_commands(root: str | Path, ood: str) -> list[str]:
    """The lines that regenerate the second sweep's files: its sweep command and its evaluation loop."""
    root = Path(root)
    sweep = read_sweep_command(root) or f"# {root}: sweep command not recorded"
    loop = (f'for r in {shlex.quote(str(root))}/*/seed*; do python -m metacal.evaluate "$r" --ood '
            f"{shlex.quote(ood)}; done")
    return [sweep, loop]
