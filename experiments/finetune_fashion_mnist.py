"""The fine-tuning example: pretrain ``small_resnet`` on Fashion-MNIST classes 0–4 with CE, then fine-tune it
on all 10 classes (a small labelled subset) with CE and with FLγ-SECE — the head replaced, everything else
started from the pretrained checkpoint — next to CE from scratch, and compare calibration on a generated page.

Every run goes through :func:`metacal.fit` (own datasets: class and size subsets of the 8:1:1 split of the
official train set; own model: ``small_resnet`` built in Python), with the method configs of
``configs/fashion_mnist/`` and the fine-tuning keys ``model.checkpoint`` / ``model.checkpoint_skip``. The page
(``docs/examples/finetune_fashion_mnist.md``) holds only numbers read from the runs' metrics.json.

    python scripts/finetune_example.py --page docs/examples/finetune_fashion_mnist.md   # the published page
    python scripts/finetune_example.py --quick                                         # seconds, not a result
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import torch

import metacal

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "fashion_mnist"  # the checkout's, beside experiments/
PRETRAIN_CLASSES = (0, 1, 2, 3, 4)


@dataclass(frozen=True)
class Sizes:
    """How much data and how long: the full example and the ``--quick`` smoke test."""

    pretrain: int  # training images of classes 0–4
    finetune: int  # training images of all 10 classes (the small labelled set)
    val: int  # val and meta-val images each (from the 8:1:1 split)
    test: int  # test images (official test set; 10,000 = all)
    pretrain_epochs: int
    finetune_epochs: int
    max_steps: int | None = None


FULL = Sizes(pretrain=8000, finetune=2000, val=2000, test=10000, pretrain_epochs=4, finetune_epochs=10)
QUICK = Sizes(pretrain=400, finetune=200, val=200, test=300, pretrain_epochs=1, finetune_epochs=1, max_steps=2)
FINETUNE_LR = 0.05  # every fine-tuning run (and the from-scratch reference): SGD, cosine schedule from this lr
COMMON = ["schedule.name=cosine", "run.torch_threads=1", "logging.progress_bar=false", "logging.tensorboard=false",
          "eval.test_every_epoch=false", "data.eval_batch_size=1000"]


def subset(dataset: Any, n: int | None, seed: int, classes: Sequence[int] | None = None):
    """A seeded ``n``-sample subset (sorted; None: all) of ``dataset``, restricted to ``classes`` when given."""
    from metacal.data import DataSubset

    targets = torch.as_tensor(dataset.targets)
    pool = torch.arange(len(targets)) if classes is None else torch.nonzero(
        torch.isin(targets, torch.tensor(classes))).reshape(-1)
    if n is None:
        return DataSubset(dataset, pool)
    if n > len(pool):
        raise ValueError(f"asked for {n} samples, only {len(pool)} available")
    keep = pool[torch.randperm(len(pool), generator=torch.Generator().manual_seed(seed))[:n]].sort().values
    return DataSubset(dataset, keep)


def small_resnet(num_classes: int, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return metacal.models.build("small_resnet", num_classes=num_classes, in_channels=1, input_shape=(1, 28, 28))


def run_all(sizes: Sizes, runs: Path, seed: int) -> dict[str, dict[str, Any]]:
    """The four runs (:data:`RUNS`); per run its metrics.json, seconds, run directory and data sizes."""
    bundle = metacal.data.build("fashion_mnist", seed=seed)
    parts = {"val": subset(bundle.val, sizes.val, seed), "meta_val": subset(bundle.meta_val, sizes.val, seed + 1),
             "test": subset(bundle.test, sizes.test, seed + 2)}
    pre_parts = {k: subset(v, None, seed, PRETRAIN_CLASSES) for k, v in parts.items()}  # the same images, classes 0–4
    data = {"pretrain": (subset(bundle.train, sizes.pretrain, seed, PRETRAIN_CLASSES), pre_parts),
            "finetune": (subset(bundle.train, sizes.finetune, seed + 3), parts)}
    steps = [] if sizes.max_steps is None else [f"run.max_steps_per_epoch={sizes.max_steps}"]
    pretrained = [f"model.checkpoint={runs / 'pretrain'}", "model.checkpoint_skip=[classifier]"]
    tune = [*COMMON, *steps, f"schedule.epochs={sizes.finetune_epochs}", f"optim.lr={FINETUNE_LR}"]
    plans = {"pretrain": ("pretrain", 5, "ce.yaml", [*COMMON, *steps, f"schedule.epochs={sizes.pretrain_epochs}"]),
             "ce_scratch": ("finetune", 10, "ce.yaml", tune),
             "ce_finetuned": ("finetune", 10, "ce.yaml", [*tune, *pretrained]),
             "flgamma_sece_finetuned": ("finetune", 10, "flgamma_sece.yaml", [*tune, *pretrained])}
    results: dict[str, dict[str, Any]] = {}
    for key, (which, k, config, overrides) in plans.items():
        train, given = data[which]
        print(f"{key}: configs/fashion_mnist/{config} + {' '.join(overrides)}", flush=True)
        t0 = time.time()
        result = metacal.fit(small_resnet(k, seed), train, **given, config=CONFIGS / config, run_dir=runs / key,
                             overwrite=True, overrides=[*overrides, f"run.seed={seed}"])
        results[key] = {"metrics": result.metrics, "seconds": time.time() - t0, "run_dir": runs / key,
                        "sizes": {"train": len(train), **{p: len(d) for p, d in given.items()}}, "overrides": overrides}
    return results


ROWS = (("ce_scratch", "CE from scratch", "random initialisation"),
        ("ce_finetuned", "CE, fine-tuned", "pretrained, new head"),
        ("flgamma_sece_finetuned", "FLγ-SECE, fine-tuned", "pretrained, new head"))
HEADER = ("| run | start | test error % | test NLL | test ECE % | TS temperature T | test ECE % after TS | "
          "selected epoch | minutes |")


def row(label: str, start: str, r: dict[str, Any]) -> str:
    m = r["metrics"]
    test, ts = m["test"], m["test_after_ts"]
    cells = [label, start, f"{100 * test['error']:.2f}", f"{test['nll']:.3f}", f"{100 * test['ece']:.2f}",
             f"{ts['temperature']:.2f}", f"{100 * ts['ece']:.2f}", str(m["epoch"]), f"{r['seconds'] / 60:.1f}"]
    return "| " + " | ".join(cells) + " |"


def epochs(n: int) -> str:
    return f"{n} epoch" + ("" if n == 1 else "s")


def regime(t: float) -> str:
    """T > 1: temperature scaling softens the logits, so the model was over-confident; T < 1: under-confident."""
    return "over-confident" if t > 1 else "under-confident" if t < 1 else "calibrated in temperature"


def page(results: dict[str, dict[str, Any]], sizes: Sizes, command: str, minutes: float, quick: bool) -> str:
    from metacal.machine import machine_markdown

    pre, ce, fl = results["pretrain"], results["ce_finetuned"], results["flgamma_sece_finetuned"]
    t_ce = ce["metrics"]["test_after_ts"]["temperature"]
    n = results["ce_finetuned"]["sizes"]
    p = pre["sizes"]
    lines = [
        "# Fine-tuning a pretrained network on Fashion-MNIST: CE and FLγ-SECE",
        "",
        f"Generated by `{command}` ({minutes:.0f} min wall-clock on the machine below, one thread per run, "
        f"{datetime.now(timezone.utc):%Y-%m-%d}). Every number is read from the runs' metrics.json; one seed "
        "(`run.seed`, also the data subsets), so read the differences as one example, not as a result.",
        "",
    ]
    if quick:
        lines += ["**QUICK MODE**: tiny data and 1–2 steps per epoch, a smoke test of the script; the numbers mean "
                  "nothing.", ""]
    lines += [
        "## The story",
        "",
        f"1. **Pretrain** `small_resnet` with CE on Fashion-MNIST classes 0–4 only ({p['train']} training images, "
        f"{epochs(sizes.pretrain_epochs)}, cosine schedule; val {p['val']}, test {p['test']} images of those classes).",
        f"2. **Fine-tune** it on all 10 classes from a small labelled set ({n['train']} training images; val "
        f"{n['val']}, meta-val {n['meta_val']}, test {n['test']} images; {epochs(sizes.finetune_epochs)}, SGD lr "
        f"{FINETUNE_LR} with a cosine schedule): the 5-class head is replaced by a fresh 10-class one "
        "(`model.checkpoint: <pretraining run>`, `model.checkpoint_skip: [classifier]`), once with CE and once "
        "with FLγ-SECE (the γ-Net reads the backbone's penultimate features, meta-learned on SECE over the "
        "meta-val images). CE from scratch on the same data and schedule is the reference.",
        "",
        "All four runs are `metacal.fit` calls on datasets and a model built in Python "
        "(experiments/finetune_fashion_mnist.py), with the method configs of `configs/fashion_mnist/`.",
        "",
        "## Pretraining (classes 0–4)",
        "",
        "| test error % | test NLL | test ECE % | TS temperature T | selected epoch | minutes |",
        "| --- | --- | --- | --- | --- | --- |",
        "| " + " | ".join([f"{100 * pre['metrics']['test']['error']:.2f}", f"{pre['metrics']['test']['nll']:.3f}",
                          f"{100 * pre['metrics']['test']['ece']:.2f}",
                          f"{pre['metrics']['test_after_ts']['temperature']:.2f}", str(pre["metrics"]["epoch"]),
                          f"{pre['seconds'] / 60:.1f}"]) + " |",
        "",
        "## Fine-tuning on all 10 classes",
        "",
        HEADER,
        "| " + " | ".join(["---"] * (HEADER.count("|") - 1)) + " |",
        *(row(label, start, results[key]) for key, label, start in ROWS),
        "",
        "ECE: 15 equal-width bins. TS: temperature scaling fitted by NLL on the validation images; T > 1 means the "
        "logits were too sharp (over-confident), T < 1 too flat (under-confident).",
        "",
        f"**Regime**: fine-tuned CE is **{regime(t_ce)}** here (T = {t_ce:.2f}). "
        f"FLγ-SECE fine-tuned: test ECE {100 * fl['metrics']['test']['ece']:.2f}% vs CE's "
        f"{100 * ce['metrics']['test']['ece']:.2f}%, test error {100 * fl['metrics']['test']['error']:.2f}% vs "
        f"{100 * ce['metrics']['test']['error']:.2f}%, T = {fl['metrics']['test_after_ts']['temperature']:.2f}.",
        "",
        "## Run it on your own data",
        "",
        "The same calls work for any datasets of `(input tensor, label)` and any network whose last layer is an "
        "`nn.Linear` (README, \"Your own data and model\"):",
        "",
        "```python",
        "pre = metacal.fit(small_resnet(5), train_0_to_4, val=val_0_to_4, test=test_0_to_4,",
        "                  config=\"configs/fashion_mnist/ce.yaml\", run_dir=\"runs/pretrain\")",
        "metacal.fit(small_resnet(10), train, val=val, meta_val=meta_val, test=test,",
        "            config=\"configs/fashion_mnist/flgamma_sece.yaml\", run_dir=\"runs/finetuned\",",
        "            overrides=[\"model.checkpoint=runs/pretrain\", \"model.checkpoint_skip=[classifier]\"])",
        "```",
        "",
        "Each run directory (`--runs`, default `runs/finetune_example/`) holds the CLI's files: config.yaml, "
        "metrics.json, predictions, reliability.png, checkpoints (the pretraining run's best one is what the "
        "fine-tuned runs start from).",
        "",
        "## Machine",
        "",
        machine_markdown().rstrip(),
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="finetune_example.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 1 epoch of 2 steps: a smoke test (seconds)")
    parser.add_argument("--runs", type=Path, help="where the four run directories go (default runs/finetune_example, "
                                                  "runs/finetune_example-quick with --quick); replaced if present")
    parser.add_argument("--page", type=Path, help="the Markdown page (default <runs>/finetune_fashion_mnist.md); "
                                                  "docs/examples/finetune_fashion_mnist.md is the published one")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    runs = args.runs or Path("runs/finetune_example-quick" if args.quick else "runs/finetune_example")
    target = args.page or runs / "finetune_fashion_mnist.md"
    sizes = QUICK if args.quick else FULL
    command = "python scripts/finetune_example.py" + "".join(
        f" {flag}" for flag in (["--quick"] if args.quick else []) + ([f"--page {shlex.quote(str(args.page))}"]
                                                                      if args.page else []))
    from metacal.data import DataNotFoundError

    t0 = time.time()
    try:
        results = run_all(sizes, runs, args.seed)
    except DataNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page(results, sizes, command, (time.time() - t0) / 60, args.quick))
    (runs / "results.json").write_text(json.dumps({k: {**v, "run_dir": str(v["run_dir"])} for k, v in results.items()},
                                                  indent=2))
    print(f"page: {target}")
    return 0
