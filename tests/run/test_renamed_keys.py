"""The keys that moved when the automatic γ got its own section: recorded sweep commands read in the new keys, and
every command the results pages print is in them (metacal/run/renamed_keys.py; configs: test_train_config.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from metacal.run.layout import SWEEP_COMMAND_FILE, read_sweep_command
from metacal.run.renamed_keys import upgrade_command

REPO = Path(__file__).resolve().parents[2]
SWEEP = "python scripts/sweep.py --configs configs/mnist1d_overconfident/{} --seeds 0 1 --out runs/x --jobs 1 "


@pytest.mark.parametrize("old, new", [
    (SWEEP.format("auto_gamma.yaml") + "--set 'meta.controller.measure_on=[meta_val]' --set meta.lr=3.0",
     SWEEP.format("auto_gamma.yaml") + "--set 'auto.measure_on=[meta_val]' --set auto.first_step=3.0"),
    (SWEEP.format("auto_ls.yaml") + "--set meta.gamma_net.init_gamma=0.5 --set meta.controller.probe=null",
     SWEEP.format("auto_ls.yaml") + "--set auto.start=0.5 --set auto.probe=null"),
    # the γ-Net's meta.lr stays its own where a config of another learner is in the command
    (SWEEP.format("flgamma_sece.yaml") + "--set meta.lr=0.001", SWEEP.format("flgamma_sece.yaml") + "--set meta.lr=0.001"),
    (SWEEP.format("auto_gamma.yaml flgamma_sece.yaml") + "--set meta.lr=3.0",
     SWEEP.format("auto_gamma.yaml flgamma_sece.yaml") + "--set meta.lr=3.0"),
    # a key that only ends like an old one is left alone
    (SWEEP.format("auto_gamma.yaml") + "--set data.meta.lr=1", SWEEP.format("auto_gamma.yaml") + "--set data.meta.lr=1"),
])  # fmt: skip
def test_an_old_sweep_command_reads_as_the_command_that_makes_the_same_runs(old, new):
    assert upgrade_command(old) == new
    assert upgrade_command(new) == new


def test_a_recorded_command_is_read_in_the_new_keys(tmp_path):
    assert read_sweep_command(tmp_path) is None
    (tmp_path / SWEEP_COMMAND_FILE).write_text(SWEEP.format("auto_gamma.yaml") + "--set meta.controller.confirm=1\n")
    assert read_sweep_command(tmp_path) == SWEEP.format("auto_gamma.yaml") + "--set auto.confirm=1"


def test_every_printed_command_of_the_results_pages_uses_the_current_keys():
    """A page's printed commands must run as printed: none may name a key the loader now refuses."""
    pages = sorted((REPO / "docs").rglob("*.md"))
    commands = [c for page in pages for c in re.findall(r"python scripts/sweep\.py[^`\n]*", page.read_text())]
    assert len(commands) > 20
    stale = [c for c in commands if upgrade_command(c) != c or re.search(r"meta\.(enabled|learner|controller)", c)]
    assert stale == []
