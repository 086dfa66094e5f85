"""scripts/finetune_example.py --quick: pretrain on Fashion-MNIST classes 0–4, fine-tune on all 10 (CE and
FLγ-SECE, head replaced) next to CE from scratch, and the generated page — its numbers are the runs'."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from safetensors.torch import load_file

from metacal.data import DataNotFoundError
from metacal.data.fashion_mnist import find_fashion_mnist_files
from experiments.finetune_fashion_mnist import main


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    try:
        find_fashion_mnist_files()
    except DataNotFoundError as err:  # the message names the fix: apt-get install dataset-fashion-mnist
        pytest.skip(f"Fashion-MNIST is not installed here: {err}")
    tmp = tmp_path_factory.mktemp("finetune")
    assert main(["--quick", "--runs", str(tmp / "runs"), "--page", str(tmp / "page.md")]) == 0
    return tmp


def weights(run_dir):
    return load_file(str(run_dir / "checkpoints" / "best" / "model.safetensors"))


@pytest.mark.slow
def test_page_numbers_are_the_runs_and_the_fine_tuned_runs_start_from_the_checkpoint(quick):
    runs, text = quick / "runs", (quick / "page.md").read_text()
    lines = text.splitlines()
    assert lines[0].startswith("# Fine-tuning") and "`python scripts/finetune_example.py --quick --page " in lines[2]
    assert "QUICK MODE" in text
    rows = {cells[0]: cells for cells in ([c.strip() for c in line.strip("|").split("|")]
                                          for line in lines if line.startswith("| C") or line.startswith("| FL"))}
    for label, key in (("CE from scratch", "ce_scratch"), ("CE, fine-tuned", "ce_finetuned"),
                       ("FLγ-SECE, fine-tuned", "flgamma_sece_finetuned")):
        m = json.loads((runs / key / "metrics.json").read_text())
        assert rows[label][2] == f"{100 * m['test']['error']:.2f}" and rows[label][4] == f"{100 * m['test']['ece']:.2f}"
        assert rows[label][5] == f"{m['test_after_ts']['temperature']:.2f}"
    t = json.loads((runs / "ce_finetuned" / "metrics.json").read_text())["test_after_ts"]["temperature"]
    assert re.search(rf"fine-tuned CE is \*\*{'over' if t > 1 else 'under'}-confident\*\* here \(T = {t:.2f}\)", text)

    pre = yaml.safe_load((runs / "pretrain" / "config.yaml").read_text())
    assert (pre["data"]["name"], pre["model"]["name"], pre["loss"]["name"]) == ("python:DataSubset",
                                                                                "python:SmallResNet", "ce")
    assert json.loads((runs / "pretrain" / "metrics.json").read_text())["test"]["num_classes"] == 5
    tuned = yaml.safe_load((runs / "flgamma_sece_finetuned" / "config.yaml").read_text())
    assert tuned["model"]["checkpoint"] == str(runs / "pretrain")
    assert tuned["model"]["checkpoint_skip"] == ["classifier"]
    assert tuned["learner"] == "gamma_net" and tuned["loss"]["name"] == "focal"
    # after 2 steps the fine-tuned backbone is still next to the pretrained one, the from-scratch one is not
    p, ft, sc = weights(runs / "pretrain"), weights(runs / "ce_finetuned"), weights(runs / "ce_scratch")
    body = [k for k in p if not k.startswith("classifier") and p[k].is_floating_point() and p[k].dim() > 1]
    near = sum(float((ft[k] - p[k]).norm()) for k in body)
    far = sum(float((sc[k] - p[k]).norm()) for k in body)
    assert near < 0.2 * far, (near, far)
    assert p["classifier.weight"].shape[0] == 5 and ft["classifier.weight"].shape[0] == 10
