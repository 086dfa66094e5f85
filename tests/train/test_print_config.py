"""``python -m metacal.train --config C --print-config``: the resolved config as YAML (bases, the file's own keys,
--set, then the defaults: what the run's config.yaml would hold), exit 0, nothing trained, read or written —
for every config shipped under configs/, the user's own data with ``root: null`` included."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from metacal.train.cli import main
from metacal.train.config import load_config, method_names, to_yaml

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
# every config file but the method halves of configs/methods/, which name no dataset and do not run alone
FILES = sorted(p for p in CONFIGS.rglob("*.yaml") if "methods" not in p.relative_to(CONFIGS).parts)
# the dataset × method pairs composed at load time (configs/<dataset>/<method>.yaml with no file of that name)
COMPOSED = sorted(folder / f"{m}.yaml" for folder in {p.parent for p in CONFIGS.rglob("base.yaml")}
                  for m in method_names(folder) if not (folder / f"{m}.yaml").is_file())


def one_pair_per_method() -> list[Path]:
    """Each composed method once, the j-th on the j-th dataset folder that composes it (all 300-odd pairs take
    40 s on 2 cores; the composition itself is tested in test_train_config.py)."""
    folders = sorted({p.parent for p in COMPOSED})
    pairs = []
    for j, method in enumerate(sorted({p.stem for p in COMPOSED})):
        turn = [folders[(j + k) % len(folders)] / f"{method}.yaml" for k in range(len(folders))]
        pairs.append(next(p for p in turn if p in COMPOSED))
    return pairs


def print_config(argv: list, capsys) -> tuple[int, str, str]:
    code = main(["--print-config", *[str(a) for a in argv]])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(CONFIGS)))
def test_every_shipped_config_file_prints(path, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a run would create runs/ here
    code, out, err = print_config(["--config", path], capsys)
    assert (code, err) == (0, "")
    assert out == to_yaml(load_config(path))
    printed = yaml.safe_load(out)
    assert printed["data"]["name"] and "root" in printed["data"] and printed["run"]["method"] == path.stem
    assert list(tmp_path.iterdir()) == []


def test_every_composed_method_prints(capsys, tmp_path, monkeypatch):
    pairs = one_pair_per_method()
    assert len(COMPOSED) > 100 and len(pairs) == len({p.stem for p in COMPOSED}) and len({p.parent for p in pairs}) > 3
    monkeypatch.chdir(tmp_path)
    for path in pairs:
        code, out, err = print_config(["--config", path], capsys)
        assert (code, err) == (0, ""), path
        assert out == to_yaml(load_config(path)), path
    assert list(tmp_path.iterdir()) == []


def test_bases_then_own_keys_then_set_then_defaults(capsys, tmp_path):
    (tmp_path / "base.yaml").write_text("data: {name: mnist1d, batch_size: 64}\nmodel: {name: mlp}\n"
                                      "optim: {lr: 0.3, momentum: 0.5}\n")
    (tmp_path / "child.yaml").write_text("base: base.yaml\noptim: {lr: 0.2}\nschedule: {epochs: 4, milestones: [2]}\n")
    code, out, err = print_config(["--config", tmp_path / "child.yaml", "--set", "optim.lr=0.1"], capsys)
    assert (code, err) == (0, "")
    printed = yaml.safe_load(out)
    assert printed["data"]["batch_size"] == 64 and printed["data"]["root"] is None  # base; default
    assert (printed["optim"]["lr"], printed["optim"]["momentum"]) == (0.1, 0.5)  # --set over the file over the base
    assert (printed["schedule"]["epochs"], printed["optim"]["weight_decay"]) == (4, 5e-4)  # own key; default
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base.yaml", "child.yaml"]


def test_a_config_that_does_not_resolve_is_one_line(capsys):
    code, out, err = print_config(["--config", CONFIGS / "methods" / "ce.yaml"], capsys)
    assert (code, out) == (2, "") and err == "error: missing required config key 'data.name'\n"
    code, out, err = print_config(["--config", CONFIGS / "quickstart.yaml", "--set", "optim.lr=-1"], capsys)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "optim.lr" in err


def test_help_names_the_flag(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "--print-config" in capsys.readouterr().out
