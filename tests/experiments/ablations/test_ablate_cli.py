"""scripts/ablate.py without training: --help lists every study with one line and the common options, a full
study's page defaults to runs/ablations/NAME (never the tracked docs/) and says so, and each training run
prints its variant."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from experiments.ablations import STUDIES, cli
from experiments.ablations.runner import Setting, Variant, train_variant


def test_help_lists_quick_and_one_line_per_study(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # no wrapping: each study on one line
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert "--quick" in text and "--out DIR" in text and "docs/ablations" in text
    lines = text.splitlines()
    for name in STUDIES.available():
        summary = cli.study_summary(STUDIES.get(name), name)
        assert summary and "Study" not in summary and len(summary) <= cli.SUMMARY_WIDTH + 2, name
        assert any(line.split() == [name, *summary.split()] for line in lines), (name, summary)
    assert cli.study_summary(STUDIES.get("bins"), "bins") == (
        "equal-width ECE and MCE against the number of bins, 10…1000.")  # citation in parentheses dropped


@pytest.fixture
def fake_study(monkeypatch, tmp_path):
    """Every study replaced by one that records its options and writes nothing; cwd = tmp_path."""
    seen = []

    def study(opts):
        seen.append(opts)
        return SimpleNamespace(markdown=opts.out / "x.md", csvs={}, figures={})

    real_get = STUDIES.get
    monkeypatch.setattr(STUDIES, "get", lambda name: study if name in STUDIES.available() else real_get(name))
    monkeypatch.chdir(tmp_path)
    return seen


@pytest.mark.parametrize("argv, out, work, hint", [
    (["bins"], "runs/ablations/bins", "runs/ablations/bins", True),
    (["bins", "--quick"], "runs/ablations-quick", "runs/ablations-quick/_runs/bins", False),
    (["shift", "--out", "docs/ablations"], "docs/ablations", "runs/ablations/shift", False),
])  # fmt: skip
def test_default_out_is_not_the_tracked_docs(argv, out, work, hint, fake_study, capsys):
    assert cli.main(argv) == 0
    opts = fake_study[-1]
    assert (opts.out, opts.work) == (Path(out), Path(work))
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"ablate.py {argv[0]}: page → {out}/{argv[0]}.md")
    assert first.endswith(f"; training runs → {work}")
    assert ("(default; --out docs/ablations updates the published page)" in first) == hint


@pytest.mark.parametrize("flag", ["--out", "--work"])
def test_an_out_or_work_below_a_file_stops_before_the_study(flag, fake_study, tmp_path, capsys):
    (tmp_path / "taken").write_text("")
    assert cli.main(["bins", flag, "taken/x"]) == 2
    assert capsys.readouterr().err == f"ablate.py bins: error: {flag} taken/x cannot be written: taken is a file\n"
    assert fake_study == []  # the study never started


def test_each_run_prints_its_variant(tmp_path, monkeypatch, capsys):
    import metacal.train

    trained = []

    def fake_train(cfg, paths, resume=False):
        trained.append(cfg)
        return SimpleNamespace(metrics={}, model=None, gamma_net=None, state=SimpleNamespace(history=[]))

    monkeypatch.setattr(metacal.train, "train", fake_train)
    setting = Setting(label="tiny", overrides=("data.name=gaussian_mixture", "model.name=mlp"), epochs=1)
    run = train_variant(setting, Variant("lr=0.05", "ce", ("optim.lr=0.05",)), tmp_path / "lr_0.05")
    assert capsys.readouterr().out == (f"variant lr=0.05: configs/fashion_mnist/ce.yaml + optim.lr=0.05 → "
                                       f"{tmp_path / 'lr_0.05'}\n")
    assert trained[0].optim.lr == 0.05 and run.key == "lr=0.05"
