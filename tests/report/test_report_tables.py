"""Markdown/CSV rendering: column set, cell format (%), missing-seed notes, CSV round trip in fractions."""

import csv
import io
import math

import pytest

from metacal.report.aggregate import COLUMN_KEYS, EXTRA_KEYS, MethodRow, column_keys, mean_std
from metacal.report.tables import csv_table, format_cell, markdown_table


def _row(method, label, values_by_seed, missing=()):
    row = MethodRow(method=method, label=label, seeds=sorted(values_by_seed), missing_seeds=list(missing),
                    per_run={s: v for s, v in values_by_seed.items()})
    for key in COLUMN_KEYS:
        row.stats[key] = mean_std([v.get(key, math.nan) for v in values_by_seed.values()])
    return row


ROWS = [
    _row("ce", "CE", {0: {"error": 0.10, "nll": 0.30, "ece": 0.05, "s_per_epoch": 2.0},
                      1: {"error": 0.12, "nll": 0.34, "ece": 0.02, "s_per_epoch": 4.0},
                      2: {"error": 0.17, "nll": 0.32, "ece": 0.08}}),
    _row("flgamma_sece", "FLγ-SECE", {0: {"error": 0.2, "ece": 0.01}}, missing=[1, 2]),
]


def test_format_cell():
    assert format_cell(0.04812, 0.00122, 5, 100.0) == "4.812 ± 0.122"
    assert format_cell(0.335, 0.01, 5) == "0.335 ± 0.010"
    assert format_cell(0.2, math.nan, 1, 100.0) == "20.000"  # one run: no ± part
    assert format_cell(math.nan, math.nan, 0, 100.0) == "–"


def test_markdown_columns_and_cells():
    text = markdown_table(ROWS)
    lines = text.strip().splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header == ["Method", "Seeds", "Error (%)", "NLL", "ECE (%)", "MCE (%)", "ACE (%)", "Classwise ECE (%)",
                      "ECE after TS-NLL (%)", "ECE after TS-grid (%)", "ECE after HB (%)", "ECE after VS (%)",
                      "ECE after MS-ODIR (%)", "ECE after Dir-ODIR (%)", "ECE after Iso (%)", "ECE after ETS (%)",
                      "s/epoch"]
    assert len(lines) == 2 + len(ROWS)
    ce = [c.strip() for c in lines[2].strip("|").split("|")]
    assert ce[:5] == ["CE", "3", "13.000 ± 3.606", "0.320 ± 0.020", "5.000 ± 3.000"]  # by hand, sample std
    assert ce[5] == "–"  # no MCE in any run
    assert ce[-1] == "3.000 ± 1.414 (n=2)"  # only two runs recorded time: marked
    fl = [c.strip() for c in lines[3].strip("|").split("|")]
    assert fl[:3] == ["FLγ-SECE", "1 (missing: 1, 2)", "20.000"]


def test_csv_round_trip_in_fractions():
    rows = list(csv.DictReader(io.StringIO(csv_table(ROWS))))
    assert [r["label"] for r in rows] == ["CE", "FLγ-SECE"]
    assert set(rows[0]) == {"method", "label", "n_runs", "seeds", "missing_seeds"} | {
        f"{k}_{s}" for k in COLUMN_KEYS + EXTRA_KEYS for s in ("mean", "std", "n")}
    assert float(rows[0]["error_mean"]) == pytest.approx(0.13, abs=1e-15)
    assert float(rows[0]["error_std"]) == pytest.approx(math.sqrt(0.0013), abs=1e-15)
    assert rows[0]["seeds"] == "0 1 2" and rows[0]["n_runs"] == "3"
    assert rows[1]["missing_seeds"] == "1 2" and rows[1]["error_std"] == "" and rows[1]["error_n"] == "1"
    assert rows[0]["mce_mean"] == "" and rows[0]["mce_n"] == "0"


def test_selected_calibrators_choose_the_columns():
    keys = column_keys(["isotonic", "ts_nll"])  # registry order, whatever order they were named in
    assert keys[-3:] == ("ece_ts_nll", "ece_isotonic", "s_per_epoch")
    header = markdown_table(ROWS, keys=keys).splitlines()[0]
    assert [c.strip() for c in header.strip("|").split("|")][-3:] == ["ECE after TS-NLL (%)", "ECE after Iso (%)",
                                                                      "s/epoch"]
    assert "ECE after HB" not in header and "MS-ODIR" not in header
    assert len(markdown_table(ROWS, keys=column_keys([])).splitlines()[0].split("|")) == 2 + 2 + 6 + 1  # no post-hoc
    fields = next(csv.reader(io.StringIO(csv_table(ROWS, keys))))
    assert "ece_isotonic_mean" in fields and "ece_hb_mean" not in fields and "t_nll_mean" in fields
