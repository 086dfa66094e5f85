"""Page writer (Markdown + CSV) and the CLI's error handling."""

import csv
import io

import pytest

from experiments.ablations.cli import main
from experiments.ablations.page import Column, Section, Table, csv_text, markdown_table, write_page


def test_markdown_and_csv_tables():
    rows = [{"method": "CE", "ece": 0.05123, "std": 0.001, "n": 3}, {"method": "A|B", "ece": float("nan"), "n": 2}]
    t = Table("x", rows, [Column("method", "Method"), Column("ece", "ECE (%)", 100, 2, std_key="std"),
                          Column("n", "n")])
    md = markdown_table(t).splitlines()
    assert md[0] == "| Method | ECE (%) | n |"
    assert md[2] == "| CE | 5.12 ± 0.10 | 3 |"
    assert md[3] == "| A\\|B | – | 2 |"
    parsed = list(csv.DictReader(io.StringIO(csv_text(t))))
    assert parsed[0]["ece"] == repr(0.05123) and parsed[1]["ece"] == "" and parsed[1]["std"] == ""


def test_write_page(tmp_path):
    t = Table("main", [{"a": 1.0}], [Column("a", "A")])
    res = write_page(tmp_path, "demo", "Demo", "python scripts/ablate.py demo", ["intro"],
                     [Section("S", tables=[t, Table("second", [{"b": 2}], [Column("b", "B")])])], quick=True)
    text = res.markdown.read_text()
    assert "python scripts/ablate.py demo" in text and "QUICK MODE" in text and "- cores:" in text
    assert res.csvs["main"].name == "demo.csv" and res.csvs["second"].name == "demo_second.csv"


def test_cli_errors_are_one_line(tmp_path, capsys):
    code = main(["bins", "--runs", str(tmp_path / "missing"), "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "no such file" in err
    with pytest.raises(SystemExit) as exc:
        main(["no_such_study"])
    assert exc.value.code == 2
