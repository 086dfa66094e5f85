"""Worker for test_train_distributed.py, launched with ``torchrun --nproc_per_node 2``.

    ddp_worker.py OUT_DIR CONFIG [CONFIG ...]

Trains each config in turn into OUT_DIR/<config-stem>/ and, on every rank, saves that rank's final
backbone and γ-Net parameters to OUT_DIR/<config-stem>/rank<r>.pt.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from metacal.train.config import load_config
from metacal.train.loop import make_accelerator, train
from metacal.run.layout import RunPaths


def main() -> None:
    out, configs = Path(sys.argv[1]), sys.argv[2:]
    accelerator = None
    for config in configs:
        cfg = load_config(config)
        accelerator = make_accelerator(cfg)
        root = out / Path(config).stem
        if accelerator.is_main_process:
            root.mkdir(parents=True, exist_ok=True)
        accelerator.wait_for_everyone()
        result = train(cfg, RunPaths(root), accelerator=accelerator)
        state = {f"model.{k}": v.detach().cpu().clone() for k, v in result.model.state_dict().items()}
        if result.gamma_net is not None:
            state.update({f"gamma_net.{k}": v.detach().cpu().clone() for k, v in result.gamma_net.state_dict().items()})
        state["world_size"] = torch.tensor(accelerator.num_processes)
        control = getattr(result.stepper, "control", None)  # learner auto: this rank's scalar and last gap
        if control is not None:
            finder = control.finder
            state["auto.value"] = torch.tensor(finder.value, dtype=torch.float64)
            state["auto.gap"] = torch.tensor(result.stepper.control.last["gap"], dtype=torch.float64)
            state["auto.updates"] = torch.tensor(finder.state.updates)
        torch.save(state, root / f"rank{accelerator.process_index}.pt")
        accelerator.wait_for_everyone()
    if accelerator is not None:
        accelerator.end_training()


if __name__ == "__main__":
    main()
