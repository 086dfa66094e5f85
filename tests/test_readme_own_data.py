"""docs/own_data.md and README.md's "Your own data": every code block runs as written, shortened.

The Python blocks run in order in one namespace (in this process), with ``metacal.fit`` given extra overrides
that cut each run to one step of one epoch; each ``python -m metacal.train`` line of the bash blocks runs
through the CLI's ``main`` (the same as ``python -m metacal.train``) with ``--set`` of the same kind (and small
batches for the tiny fixture data) and a ``--run-dir``. The files the section's
commands name (``emb.npz``, ``my_images/``, ``resnet18.pth``) are written first, small, in a scratch directory
that holds a link to configs/. A block that stops working — a renamed key, a changed signature, a config
that no longer loads — fails this test.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
SHORT = ["schedule.epochs=1", "schedule.milestones=[1]", "run.max_steps_per_epoch=1", "run.torch_threads=1",
         "logging.progress_bar=false", "logging.tensorboard=false"]
SMALL_BATCHES = ["data.batch_size=8"]  # a meta run clamps its meta batch to the tiny meta-val split itself


def section_blocks() -> list[tuple[str, str]]:
    """The code blocks of docs/own_data.md (the whole page), then those of the README's section."""
    page = (REPO / "docs" / "own_data.md").read_text()
    text = (REPO / "README.md").read_text()
    start = text.index("\n## Your own data\n")
    end = text.index("\n## ", start + 1)
    return [*re.findall(r"```(python|bash)\n(.*?)```", page, flags=re.S),
            *re.findall(r"```(python|bash)\n(.*?)```", text[start:end], flags=re.S)]


def write_fixtures(cwd: Path) -> None:
    """The files the section's commands read: emb.npz (arrays), my_images/ (3 classes × 20 RGB PNGs) and
    resnet18.pth (a torchvision state dict, standing in for the ImageNet weights the README says to save)."""
    import torchvision

    (cwd / "configs").symlink_to(REPO / "configs")
    rng = np.random.default_rng(0)
    np.savez(cwd / "emb.npz", x_train=rng.normal(size=(200, 16)).astype(np.float32), y_train=np.arange(200) % 4,
             x_test=rng.normal(size=(40, 16)).astype(np.float32), y_test=np.arange(40) % 4)
    for name in ("cat", "dog", "emu"):
        folder = cwd / "my_images" / "train" / name
        folder.mkdir(parents=True)
        for i in range(20):
            Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(folder / f"{i}.png")
    torch.save(torchvision.models.resnet18().state_dict(), cwd / "resnet18.pth")


@pytest.mark.slow
def test_readme_own_data_section_runs(tmp_path, monkeypatch, capsys):
    import metacal
    import metacal.train.fit as fit_module
    from metacal.train.cli import main

    blocks = section_blocks()
    assert [lang for lang, _ in blocks].count("python") >= 2 and any(lang == "bash" for lang, _ in blocks)
    write_fixtures(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(metacal, "fit", lambda *args, overrides=(), **kwargs: fit_module.fit(
        *args, overrides=[*overrides, *SHORT], **kwargs), raising=False)

    exec(compile("\n".join(code for lang, code in blocks if lang == "python"), "README.md", "exec"), {})
    for run in ("my_model", "my_finetune"):
        assert json.loads((tmp_path / "runs" / run / "metrics.json").read_text())["finished"] is True
    tuned = yaml.safe_load((tmp_path / "runs" / "my_finetune" / "config.yaml").read_text())["model"]
    assert tuned["checkpoint"] == "runs/my_model" and tuned["freeze"] == ["net.conv1", "net.bn1", "net.layer1"]

    commands = [line for lang, code in blocks if lang == "bash" for line in code.splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    assert len(commands) >= 3
    configs = {argv[argv.index("--config") + 1] for argv in map(shlex.split, commands)}
    assert {f"configs/own_data/{d}/{m}.yaml" for d in ("arrays", "image_folder") for m in ("ce", "auto_gamma")} <= configs
    for i, line in enumerate(commands):
        argv = shlex.split(line)
        assert argv[:3] == ["python", "-m", "metacal.train"], line
        run_dir = tmp_path / "runs" / f"cli{i}"
        code = main([*argv[3:], "--run-dir", str(run_dir), "--set", *SHORT, *SMALL_BATCHES])
        assert code == 0, (line, capsys.readouterr().err[-3000:])
        assert json.loads((run_dir / "metrics.json").read_text())["finished"] is True, line
