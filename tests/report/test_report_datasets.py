"""The report refuses, in one line, a folder whose runs mix datasets (and still accepts one dataset)."""

import yaml

from metacal.report.cli import main


def test_mixed_datasets_are_refused_in_one_line(run_writer, tmp_path, capsys):
    root = tmp_path / "sweep"
    for seed in (0, 1):
        run_writer(root / "ce" / f"seed{seed}", seed, n=100, k=3)
    other = run_writer(root / "focal" / "seed0", 0, n=100, k=3)
    (other / "config.yaml").write_text(yaml.safe_dump({"run": {"seed": 0}, "data": {"name": "fashion_mnist"}}))
    assert main([str(root)]) == 2
    captured = capsys.readouterr()
    assert captured.err == (f"report: error: the runs under {root} mix datasets: fashion_mnist (1 run: focal/seed0); "
                            "synthetic (2 runs: ce/seed0, ce/seed1); report each dataset's runs from a folder of "
                            "its own\n")
    assert captured.out == "" and not (root / "report.md").exists()

    (other / "config.yaml").write_text(yaml.safe_dump({"run": {"seed": 0}, "data": {"name": "synthetic"}}))
    assert main([str(root)]) == 0 and (root / "report.md").is_file()


def test_an_out_that_cannot_be_written_is_one_line_before_reading_the_runs(tmp_path, capsys):
    """Checked first: the folder need not even hold runs."""
    from metacal.report.shift_page import main as shift_main

    (tmp_path / "taken").write_text("")
    page = tmp_path / "taken" / "page.md"
    assert main([str(tmp_path), "--out", str(page)]) == 2
    assert capsys.readouterr().err == f"report: error: --out {page} cannot be written: {tmp_path / 'taken'} is a file\n"
    assert main([str(tmp_path), "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"report: error: --out {tmp_path} is a folder; give the page's file name\n"
    assert shift_main([str(tmp_path), "--suite", "corruptions", "--out", str(page)]) == 2
    assert capsys.readouterr().err == (f"shift report: error: --out {page} cannot be written: {tmp_path / 'taken'} "
                                       "is a file\n")
