"""The trainer's configuration schema: one dataclass per config section, checked by OmegaConf.

Each field's comment says what it holds; the loader (metacal/train/config.py) merges YAML files and
overrides into the class :func:`config_class` makes. A learner's section is its own dataclass, registered with the
learner (metacal/meta/learners.py: ``meta`` is :class:`metacal.meta.settings.MetaSettings`, ``auto``
:class:`metacal.meta.auto.AutoSettings`). Defaults follow Wang & Golebiowski 2024 §4 (docs/conventions.md#data-splits).
"""

from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass
from typing import Any, Dict, List, Optional

from omegaconf import MISSING

from metacal.meta.learners import learner_sections


@dataclass
class DataConfig:
    name: str = MISSING  # a metacal.data name: mnist1d, gaussian_mixture, fashion_mnist, cifar10, …
    root: Optional[str] = None  # dataset directory (None: the dataset's default location)
    seed: int = 0  # seed of the train/val/meta-val split
    batch_size: int = 128  # GLOBAL batch: split across processes
    eval_batch_size: int = 512
    num_workers: int = 0
    # in-memory data (Fashion-MNIST, CIFAR and SVHN without augmentation, MNIST-1D, arrays, Gaussian mixture) served
    # as whole batches by tensor indexing: the same batches, bit for bit, as the per-sample path (false), faster
    batched: bool = True
    options: Dict[str, Any] = field(default_factory=dict)  # passed to metacal.data.build


@dataclass
class ModelConfig:
    # a metacal.models name (small_resnet, resnet18, mlp, cnn1d, …) or torchvision:<name> (any torchvision
    # classification network, e.g. torchvision:resnet18, torchvision:vit_b_16; metacal/models/torchvision_models.py)
    name: str = MISSING
    options: Dict[str, Any] = field(default_factory=dict)  # passed to metacal.models.build
    # local weights to start from: a state-dict file (torch.save / .safetensors; torchvision's .pth), a metacal
    # checkpoint directory, or a metacal run directory (its best checkpoint); never downloaded
    checkpoint: Optional[str] = None
    checkpoint_skip: List[str] = field(default_factory=list)  # tensor-name prefixes NOT loaded (a new head: [net.fc])
    # parameter-name prefixes kept fixed (requires_grad off, left out of the optimiser), e.g. [net.conv1, net.layer1]
    freeze: List[str] = field(default_factory=list)


@dataclass
class LossConfig:
    name: str = "ce"  # a metacal.losses name
    params: Dict[str, Any] = field(default_factory=dict)  # constructor arguments of the loss


@dataclass
class OptimConfig:
    name: str = "sgd"  # sgd | adamw (plain runs only: the meta step differentiates SGD's update)
    lr: float = 0.1
    momentum: float = 0.9  # sgd
    weight_decay: float = 5e-4  # sgd: L2 added to the gradient; adamw: decoupled, θ ← θ − lr·wd·θ
    nesterov: bool = False  # sgd
    betas: List[float] = field(default_factory=lambda: [0.9, 0.999])  # adamw
    eps: float = 1e-8  # adamw
    backbone_lr_scale: float = 1.0  # every parameter except the head's (model.classifier) trains at lr × this


@dataclass
class ScheduleConfig:
    name: str = "step"  # step (lr × lr_decay at each milestone epoch) | cosine | constant
    epochs: int = 350
    milestones: List[int] = field(default_factory=lambda: [150, 250])
    lr_decay: float = 0.1  # lr factor at each milestone (MultiStepLR's gamma)
    # linear warm-up over this many epochs (fractions allowed), counted in iterations: lr × (t+1)/W for the
    # first W = round(warmup_epochs × steps per epoch) iterations (metacal/train/schedules.py)
    warmup_epochs: float = 0.0


@dataclass
class EvalConfig:
    num_bins: int = 15
    select_by: str = "error"  # model selection on validation: error | nll | ece
    test_every_epoch: bool = True  # evaluate the test set every epoch (curves); else only at improvements
    # bootstrap intervals of the selected epoch's test metrics in metrics.json ("test" → "ci"): resamples
    # (0: none), level in (0, 1), generator seed and rule (basic | percentile), as `python -m metacal.evaluate --ci`
    bootstrap: int = 1000
    ci_level: float = 0.9
    ci_seed: int = 0
    ci_method: str = "basic"
    # the binning-free estimators (SECE, KDE-ECE, smECE) of the selected epoch in metrics.json: O(N²), about 10 s on
    # a CPU for 10,000 test and 6,000 validation samples; false leaves them out (sweeps that read other numbers)
    binning_free: bool = True


@dataclass
class LoggingConfig:
    tensorboard: bool = True
    progress_bar: bool = True  # tqdm bars on the main process (only when stderr is a terminal)
    # epochs between reliability-diagram images in TensorBoard, and always the last epoch (0: never); where the test
    # set is evaluated. Not 1: drawing one costs about 0.4 s on a CPU, more than a small model's epoch of training
    reliability_every: int = 5


@dataclass
class RunConfig:
    seed: int = 0
    # the method's name, recorded in metrics.json with its loss and learner (metacal/run/method.py); None: the config
    # file's stem, which is also the run folder scripts/sweep.py makes
    method: Optional[str] = None
    mixed_precision: str = "no"  # no | fp16 | bf16
    cpu: bool = False  # force CPU even when a GPU is visible
    deterministic: bool = False  # torch.use_deterministic_algorithms (slower on GPU)
    torch_threads: Optional[int] = None  # torch.set_num_threads per process (None: torch's default);
    # 1 is much faster for tiny CPU models on a busy machine (no OpenMP spin-waiting)
    malloc_retain: bool = True  # CPU runs: glibc keeps freed memory for reuse (metacal/train/process_settings.py)
    max_steps_per_epoch: Optional[int] = None  # cap on iterations per epoch (smoke tests)
    save_checkpoints: bool = True  # a checkpoint at every epoch end (needed for --resume and preemption)
    checkpoint_every_steps: int = 0  # also one every N global steps mid-epoch (0: only at epoch ends)
    # replay the training iterations from CUDA graphs (one process, fp32; metacal/train/cuda_graphs.py): several
    # times faster for a small network whose GPU step is launch-bound; refused with the reason where it cannot
    cuda_graphs: bool = False


class Config:
    """A run's config: the sections above and every registered learner's own section (metacal/meta/learners.py), in
    the order of :func:`config_class`. Loading makes an instance of that class; this one is its common base."""


def config_class() -> type[Config]:
    """The dataclass of a run's config for the learners registered now: ``data``, ``model``, ``loss``, ``learner``
    (what steers the loss during training, a metacal.meta.LEARNERS name; null: plain training), each learner's
    section in the order they were registered (built in: ``meta``, ``auto``), then ``optim``, ``schedule``,
    ``eval``, ``logging``, ``run``. A learner registered later (one's own) adds its section."""
    sections = tuple(learner_sections().items())
    if sections not in _CLASSES:
        fields = [("data", DataConfig, field(default_factory=DataConfig)),
                  ("model", ModelConfig, field(default_factory=ModelConfig)),
                  ("loss", LossConfig, field(default_factory=LossConfig)),
                  ("learner", Optional[str], None),
                  *[(name, kind, field(default_factory=kind)) for name, kind in sections],
                  ("optim", OptimConfig, field(default_factory=OptimConfig)),
                  ("schedule", ScheduleConfig, field(default_factory=ScheduleConfig)),
                  ("eval", EvalConfig, field(default_factory=EvalConfig)),
                  ("logging", LoggingConfig, field(default_factory=LoggingConfig)),
                  ("run", RunConfig, field(default_factory=RunConfig))]
        _CLASSES[sections] = make_dataclass("Config", fields, bases=(Config,), namespace={"__module__": __name__})
    return _CLASSES[sections]


_CLASSES: dict[tuple[tuple[str, type], ...], type[Config]] = {}
