"""Text tables of :func:`metacal.shift.evaluate.evaluate_run`'s result (what ``python -m metacal.evaluate runs/<r>
--shift/--ood/--inputs`` prints without ``--json``); values in percent except NLL."""

from __future__ import annotations

from typing import Any

from metacal.conformal.evaluation import format_sets

COLUMN_TITLES = {"uncalibrated": "raw", "ts_nll": "TS", "ts_perturbed": "TS-pert.", "ets": "ETS"}
OOD_SCORES = ("msp", "max_logit", "energy", "entropy")


def _title(name: str) -> str:
    return COLUMN_TITLES.get(name, name)


def _row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(f"{c:<{w}}" if i == 0 else f"{c:>{w}}" for i, (c, w) in enumerate(zip(cells, widths)))


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return [_row(header, widths), *(_row(r, widths) for r in rows)]


def metrics_table(metrics: dict[str, dict[str, Any]]) -> list[str]:
    """One row per column (raw, TS, …): error, NLL, ECE, Brier, AURC, AUGRC."""
    rows = [[_title(col), f"{100 * m['error']:.2f}", f"{m['nll']:.4f}", f"{100 * m['ece']:.2f}",
             f"{m['brier']:.4f}", f"{100 * m['aurc']:.2f}", f"{100 * m['augrc']:.2f}"] for col, m in metrics.items()]
    return _table(["", "error %", "NLL", "ECE %", "Brier", "AURC %", "AUGRC %"], rows)


def severity_means(part: dict[str, Any]) -> list[tuple[int, dict[str, Any], dict[str, Any]]]:
    """(severity, mean over all families, mean over the held-out ones — all of them when none is held out)."""
    out = []
    for severity in part["severities"]:
        mean = {m["over"]: m["metrics"] for m in part["mean"] if m["severity"] == severity}
        if mean:
            out.append((severity, mean["all"], mean.get("held_out", mean["all"])))
    return out


def shift_tables(part: dict[str, Any]) -> list[str]:
    """ECE by severity (mean over all families and over the held-out ones) for every column, then the
    uncalibrated and TS ECE of each family × severity."""
    columns = list(part["clean"])
    held = ", ".join(part["held_out_families"]) or "none"
    lines = [f"{part['suite']}: {len(part['families'])} families; perturbation TS saw "
             f"{', '.join(part['fit_families']) or 'none'}; held out: {held}",
             "mean over families (all | held out): error %, ECE % per column, AURC % raw"]
    rows = []
    for severity, all_, out in severity_means(part):
        cells = [str(severity), f"{100 * all_['uncalibrated']['error']:.2f} | {100 * out['uncalibrated']['error']:.2f}"]
        cells += [f"{100 * all_[c]['ece']:.2f} | {100 * out[c]['ece']:.2f}" for c in columns]
        cells.append(f"{100 * all_['uncalibrated']['aurc']:.2f} | {100 * out['uncalibrated']['aurc']:.2f}")
        rows.append(cells)
    lines += _table(["severity", "error %", *(f"ECE % {_title(c)}" for c in columns), "AURC %"], rows)
    lines.append("")
    lines.append("ECE % per family, raw / TS")
    severities = [s for s in part["severities"] if s > 0]
    grid = {(c["family"], c["severity"]): c["metrics"] for c in part["cells"]}
    rows = [[family + ("" if family in part["held_out_families"] else " (fit)")]
            + [f"{100 * grid[family, s]['uncalibrated']['ece']:.1f} / {100 * grid[family, s]['ts_nll']['ece']:.1f}"
               for s in severities] for family in part["families"]]
    lines += _table(["family", *(f"sev {s}" for s in severities)], rows)
    if "sets" in part["clean"]["uncalibrated"]:
        lines += ["", *sets_table(part, columns)]
    return lines


def sets_table(part: dict[str, Any], columns: list[str]) -> list[str]:
    """Prediction sets by severity: coverage % and mean size per column, mean over all | held-out families."""
    lines = ["prediction sets, mean over families (all | held out): coverage % / mean size per column"]
    rows = [[str(severity)] + [f"{100 * all_[c]['sets']['coverage']:.1f} | {100 * out[c]['sets']['coverage']:.1f} / "
                               f"{all_[c]['sets']['size_mean']:.2f}" for c in columns]
            for severity, all_, out in severity_means(part)]
    return lines + _table(["severity", *(_title(c) for c in columns)], rows)


def ood_table(part: dict[str, Any]) -> list[str]:
    """AUROC, AUPR-In, AUPR-Out and FPR95 (%) of every score, raw and after TS."""
    lines = [f"OOD set {part['set']}: {part['n_in']} in-distribution (test) vs {part['n_out']} OOD samples"]
    rows = []
    for column in ("uncalibrated", "ts_nll"):
        for score in OOD_SCORES:
            m = part[column][score]
            rows.append([f"{score} ({_title(column)})", f"{100 * m['auroc']:.2f}", f"{100 * m['aupr_in']:.2f}",
                         f"{100 * m['aupr_out']:.2f}", f"{100 * m['fpr95']:.2f}"])
    return lines + _table(["score", "AUROC %", "AUPR-In %", "AUPR-Out %", "FPR95 %"], rows)


def format_result(result: dict[str, Any]) -> str:
    """Every part of ``result`` as text."""
    lines = [f"run {result['run']} ({result['num_bins']} bins); TS T = "
             f"{result['calibrators']['ts_nll']['temperature']:.3f}", "", "clean test set:"]
    lines += metrics_table(result["clean"])
    if "conformal" in result:
        lines += ["", *format_sets(result["conformal"], {c: m["sets"] for c, m in result["clean"].items()})]
    if "shift" in result:
        lines += ["", *shift_tables(result["shift"])]
    if "ood" in result:
        lines += ["", *ood_table(result["ood"])]
    if "inputs" in result:
        lines += ["", f"inputs {result['inputs']['file']}:", *metrics_table(result["inputs"]["metrics"])]
        if "ood" in result["inputs"]:
            ood = {"set": "x_ood", "n_in": result["inputs"]["metrics"]["uncalibrated"]["n"], "n_out": "its",
                   **result["inputs"]["ood"]}
            lines += ["", *ood_table(ood)]
    return "\n".join(lines)
