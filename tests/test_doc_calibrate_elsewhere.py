"""docs/calibrated_model.md, "A model trained elsewhere": the Python block runs as written (in a scratch directory)
and does what the section says — the calibrator fitted on the validation logits is the one loaded back, and
the test probabilities it gives are softmax(logits / T)."""

from __future__ import annotations

import re
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]


def section_code() -> str:
    text = (REPO / "docs" / "calibrated_model.md").read_text()
    start = text.index("\n## A model trained elsewhere\n")
    end = text.find("\n## ", start + 1)
    end = len(text) if end < 0 else end
    (code,) = re.findall(r"```python\n(.*?)```", text[start:end], flags=re.S)
    return code


def test_readme_calibrate_elsewhere_block_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    namespace: dict = {}
    exec(compile(section_code(), "docs/calibrated_model.md", "exec"), namespace)
    ts, restored = namespace["ts"], namespace["restored"]
    assert (tmp_path / "ts.pt").is_file()
    assert ts.temperature > 0 and ts.temperature != 1.0  # fitted, not the default
    assert restored.temperature == ts.temperature and restored.method == "nll"
    with torch.no_grad():
        logits = namespace["model"](namespace["x_test"])
    probs = namespace["test_probs"]
    assert probs.shape == (200, 5)
    torch.testing.assert_close(probs, torch.softmax(logits / ts.temperature, dim=1))
    torch.testing.assert_close(probs.sum(dim=1), torch.ones(200))
    assert f"{ts.temperature}" in capsys.readouterr().out
