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
