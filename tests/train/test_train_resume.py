"""A run resumed at an epoch boundary ends exactly where an uninterrupted run ends (CPU, deterministic).

The meta method exercises every checkpointed piece: model + SGD momentum, MultiStepLR, γ-Net, the
meta optimiser (Adam moments), the meta-val InfiniteLoader position, the train sampler epoch and the
RNG states (the mixture data has no augmentation, so the RNG matters for nothing else here).
"""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file
from train_tiny import read_metrics

META = {"loss": {"name": "focal"}, "model": {"name": "mlp", "options": {"hidden": [32]}},
        "learner": "gamma_net", "meta": {"objective": "sece", "backend": "jvp"},
        "schedule": {"epochs": 3, "milestones": [2]}}


def final_state(run_dir):
    return load_file(str(run_dir / "checkpoints" / "latest" / "model.safetensors"))


@pytest.mark.slow
@pytest.mark.parametrize("method", ["flgamma_sece", "adafocal"])
def test_resume_matches_uninterrupted_run(method, write_config, run_cli, tmp_path):
    overrides = META if method == "flgamma_sece" else {**META, "loss": {"name": "adafocal"},
                                                       "learner": None}
    config = write_config(method, overrides)
    full, part = tmp_path / "full", tmp_path / "part"
    assert run_cli(["--config", config, "--run-dir", full])[0] == 0
    # stop after epoch 1 (schedule.epochs=1 keeps milestones and everything else identical) ...
    assert run_cli(["--config", config, "--run-dir", part, "--set", "schedule.epochs=1"])[0] == 0
    # ... then continue from the saved config with the full length
    code, out, err = run_cli(["--run-dir", part, "--resume", "--set", "schedule.epochs=3"])
    assert code == 0, err
    assert "resumed from" in out and "epoch   1/3" not in out and "epoch   2/3" in out

    a, b = read_metrics(full), read_metrics(part)
    assert a["epoch"] == b["epoch"]
    for split in ("val", "test", "test_after_ts"):
        for key in ("error", "nll", "ece", "ace", "mce"):
            assert a[split][key] == pytest.approx(b[split][key], abs=1e-6), (split, key)
    sa, sb = final_state(full), final_state(part)
    assert sa.keys() == sb.keys()
    for name in sa:
        torch.testing.assert_close(sa[name], sb[name], rtol=0, atol=1e-6)


def test_resume_without_checkpoint_is_a_clean_error(run_cli, tmp_path):
    code, _, err = run_cli(["--run-dir", tmp_path / "empty", "--resume"])
    assert code == 2 and "cannot resume" in err and len(err.strip().splitlines()) == 1
