"""The trainer's configuration schema: one dataclass per config section, checked by OmegaConf.

Each field's comment says what it holds; the loader (metacal/train/config.py) merges YAML files and
overrides into :class:`Config`. Defaults follow Wang & Golebiowski 2024 §4 (docs/conventions.md#data-splits).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from omegaconf import MISSING

from metacal.meta.auto import AutoSettings

#: the section each learner reads: the automatic scalar ``auto`` (:class:`metacal.meta.auto.AutoSettings`), every
#: other learner (the γ-Net, the loss's meta-parameters, one of one's own) ``meta``
LEARNER_SECTIONS = {"auto": "auto"}


def learner_section(learner: str | None) -> str | None:
    """The config section ``learner`` reads; None for plain training (no learner)."""
    return None if learner is None else LEARNER_SECTIONS.get(learner, "meta")


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
class MetaConfig:
    # the section of the meta learners (``learner: gamma_net``: FLγ-*, focal loss with per-sample γ from a γ-Net;
    # ``learner: loss``: the loss's own meta_parameters(), e.g. ce_learnable_l2 coefficients for CE-DECE/SECE),
    # and of a learner of one's own: a hypergradient step of them after every backbone step
    backend: str = "jvp"  # hypergradient backend of metacal.meta: higher | jvp | head
    # what the γ-Net's bias (the γ level) is differentiated through: "step" (one-step lookahead, the paper)
    # or "trajectory" (all past steps, forward-mode; metacal/meta/trajectory.py)
    horizon: str = "step"
    horizon_decay: float = 1.0  # trajectory: a step k iterations back counts β^k (1: all; 0: the last only)
    # γ-Net only: the meta lr of its per-sample shape (attention A, weight W) is lr × shape_lr_scale; its
    # bias b (the γ level) uses lr. 0 freezes the shape: one learned γ for every sample.
    shape_lr_scale: float = 1.0
    objective: str = "sece"  # a metacal.objectives name (the meta-validation objective)
    objective_params: Dict[str, Any] = field(default_factory=dict)
    gamma_net: Dict[str, Any] = field(default_factory=dict)  # GammaNet options (tau, init_gamma, output …)
    ce_weight: float = 0.0  # meta objective J = objective + ce_weight·CE
    every: int = 1  # a meta step every n-th iteration (the others are plain steps at the current γ)
    max_meta_grad_norm: Optional[float] = None  # clip φ's gradient (total norm)
    max_backbone_grad_norm: Optional[float] = None  # clip the backbone's gradient in meta runs (total norm)
    optimizer: str = "adam"  # adam | sgd
    # 1e-4, not Bohdal et al.'s 1e-3: with τ = 0.01 an Adam step of 1e-3 on the γ-Net's bias moves γ by 0.1
    # per iteration and the one-step γ-Net runs away on the over-confident MNIST-1D regime (measured in
    # docs/ablations/meta_signal.md);
    # every shipped config uses this value except the trajectory method, whose restoring signal takes 1e-3
    lr: float = 1e-4
    weight_decay: float = 0.0
    batch_size: int = 128  # global meta-validation batch, split across processes


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
    # the method's name, recorded in metrics.json with its loss and learner (metacal/method.py); None: the config
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


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    # what steers the loss during training, a metacal.meta.LEARNERS name: gamma_net | loss (the meta step, section
    # meta) | auto (one scalar of the loss set by root-finding on the held-out calibration gap, section auto,
    # metacal/meta/auto.py); null: plain training
    learner: Optional[str] = None
    meta: MetaConfig = field(default_factory=MetaConfig)
    auto: AutoSettings = field(default_factory=AutoSettings)
    optim: OptimConfig = field(default_factory=OptimConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    run: RunConfig = field(default_factory=RunConfig)
