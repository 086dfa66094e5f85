"""Worker for test_fit_distributed.py, launched with ``torchrun --nproc_per_node 2``.

    fit_ddp_worker.py OUT_DIR

Every rank builds the same datasets and the same stock ``nn.Sequential`` (seeded), calls ``metacal.fit``
for each entry of :data:`RUNS` into OUT_DIR/<name>/ and saves its final network and γ-Net parameters to
OUT_DIR/<name>/rank<r>.pt.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from accelerate import PartialState
from torch import nn
from torch.utils.data import TensorDataset

import metacal

COMMON = ["schedule.epochs=1", "schedule.milestones=[1]", "data.batch_size=32", "data.eval_batch_size=64",
          "eval.test_every_epoch=false", "logging.progress_bar=false", "run.torch_threads=1"]
RUNS = {
    # FLγ-SECE, 6 meta steps: backbone through DDP, γ-Net meta gradients averaged over the ranks
    "meta": COMMON + ["loss.name=focal", "learner=gamma_net", "meta.objective=sece",
                      "meta.backend=jvp", "meta.lr=0.01", "meta.batch_size=20", "run.max_steps_per_epoch=6"],
    # plain CE, 5 steps of momentum SGD: DDP's averaged gradient of 16 + 16 samples = one process's of 32
    "plain": COMMON + ["loss.name=ce", "optim.lr=0.1", "run.max_steps_per_epoch=5"],
}


def data(n: int, seed: int) -> TensorDataset:
    """4 Gaussian blobs in R^8 (class c has mean 2·e_c)."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 4
    return TensorDataset(torch.randn(n, 8, generator=g) + 2.0 * nn.functional.one_hot(y, 8).float(), y)


def network() -> nn.Module:
    """A stock network without return_features (BatchNorm-free): fit wraps it, features = the head's input."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))


def state_of(result) -> dict[str, torch.Tensor]:
    state = {f"model.{k}": v.detach().cpu().clone() for k, v in result.model.state_dict().items()}
    if result.gamma_net is not None:
        state.update({f"gamma_net.{k}": v.detach().cpu().clone() for k, v in result.gamma_net.state_dict().items()})
    return state


def main() -> None:
    out = Path(sys.argv[1])
    for name, overrides in RUNS.items():
        result = metacal.fit(network(), data(400, 0), test=data(120, 1), run_dir=out / name, overrides=overrides)
        state = PartialState()
        saved = {**state_of(result), "world_size": torch.tensor(state.num_processes)}
        torch.save(saved, out / name / f"rank{state.process_index}.pt")
        state.wait_for_everyone()


if __name__ == "__main__":
    main()
