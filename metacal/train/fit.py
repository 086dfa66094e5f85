"""``metacal.fit``: the trainer on one's own datasets and network, from Python, into the CLI's run directory.

The method comes from a config (a YAML file such as ``configs/methods/flgamma_sece.yaml`` or a dataset's
``configs/fashion_mnist/flgamma_sece.yaml``, or a loaded :class:`Config`) plus dot-list overrides; the data
and the model come from the arguments. :func:`fit` checks them (:func:`check_model`, the labels through
:func:`metacal.data.from_datasets`), then runs the same :func:`metacal.train.train` as the command line,
with the ready bundle and network handed to its setup. The saved config.yaml names them
``data.name: python:<dataset class>`` and ``model.name: python:<model class>``: the command line refuses
such a config in one line (it cannot rebuild them); ``fit(..., run_dir=DIR, resume=True)`` continues it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn
from torch.utils.data import Dataset

from metacal.data import from_datasets
from metacal.models.features import ContractError, FeatureClassifier, probe_contract, wrap

from .components import PYTHON
from .compat import checkpoint_to_resume, saved_config
from .config import Config, ConfigError, load_config, split_override, to_dict
from .loop import RunResult, make_accelerator, train_in_dir
from .run_dir import default_run_dir, remove_if_empty, shared_run_dir

# keys fit takes from its arguments: a config file's values are replaced, an override of them is refused
FROM_ARGUMENTS = ("data.name", "data.root", "model.name", "model.options")
# data.options that apply to datasets given from Python (keywords of metacal.data.from_datasets)
DATA_OPTIONS = ("num_classes", "classes", "train_subset", "split", "fold_meta_val", "split_seed")


def fit(model: nn.Module, train: Dataset, *, val: Dataset | None = None, meta_val: Dataset | None = None,
        test: Dataset | None = None, config: str | Path | Config | None = None, run_dir: str | Path | None = None,
        overrides: Sequence[str] = (), resume: bool = False, overwrite: bool = False) -> RunResult:
    """Train ``model`` on ``train`` with the method of ``config`` into ``run_dir``; returns the run's result.

    Args:
        model: an ``nn.Module`` whose ``model(x)`` returns logits (N, K): a metacal model
            (``return_features=True``), one wrapped by :func:`metacal.models.wrap` (to name a ``head`` or a
            ``feature_layer``), or any network whose last op is an ``nn.Linear`` (a stock torchvision model):
            it is wrapped here, the γ-Net reading the head's input through a forward hook. Trained in place
            (its initial weights are the caller's; ``run.seed`` seeds the splits, the loaders and the γ-Net).
        train, val, meta_val, test: map-style datasets of ``(input tensor, integer label)``. Without ``val``
            and ``meta_val`` the seeded 8:1:1 split of ``train`` (``data.seed``) makes them; a part given takes
            nothing from train. Without ``test`` the run has no test set (metrics.json ``test: null``).
            Datasets bring their own transforms: the val / meta-val parts cut from ``train`` read ``train``
            as it is (give ``val``/``meta_val`` when ``train`` augments).
        config: a YAML path (its ``base:`` chain included) or a loaded :class:`Config`; None: the schema's
            defaults (CE, SGD lr 0.1, 350 epochs — set ``schedule.epochs``). ``data.name``, ``data.root``,
            ``model.name`` and ``model.options`` are IGNORED (they come from the arguments; an override of them
            is refused). ``data.options`` may hold only ``num_classes``, ``classes``, ``train_subset``,
            ``split``, ``fold_meta_val``, ``split_seed`` (others are refused: one line). Every other key
            applies as on the command line, ``model.checkpoint``/``checkpoint_skip``/``freeze`` to ``model``
            (parameter names as in ``model.named_parameters()``, ``net.<name>`` once wrapped).
        run_dir: the run directory (default ``runs/<config stem or "fit">-<timestamp>``); the same files as
            the CLI writes: config.yaml, runtime.json, tensorboard/, checkpoints/, predictions/, metrics.json.
        overrides: dot-list strings as ``--set`` takes them (``"optim.lr=0.05"``, ``"schedule.milestones=[3]"``).
        resume: continue ``run_dir`` from its newest checkpoint (config: its own unless ``config`` is given);
            the same datasets and the same kind of model must be passed again.
        overwrite: replace an existing ``run_dir`` (its content is deleted once the run has started).

    Bad input raises before anything is written, with a one-line message: :class:`ConfigError`,
    :class:`metacal.data.DataFormatError` (labels not integers 0..K−1, items not ``(tensor, label)``),
    :class:`metacal.models.ContractError` (logits not (N, K), K ≠ the number of classes, no reachable
    features), FileExistsError (``run_dir`` not empty). Works under ``torchrun`` / ``accelerate launch``
    (every process calls fit with the same arguments; batches are global, split across processes).
    """
    cfg = fit_config(config, overrides, run_dir, resume)
    options = dict(cfg.data.options)
    bundle = from_datasets(train, val=val, meta_val=meta_val, test=test, name="metacal.fit", seed=cfg.data.seed,
                           **options)
    bundle = dataclasses.replace(bundle, **{part: Int64Labels(getattr(bundle, part))
                                            for part in ("train", "val", "meta_val", "test")
                                            if getattr(bundle, part) is not None})
    net = check_model(model, bundle)
    cfg = dataclasses.replace(
        cfg, data=dataclasses.replace(cfg.data, name=PYTHON + type(train).__name__, root=None),
        model=dataclasses.replace(cfg.model, name=PYTHON + describe(model), options={}))
    accelerator = make_accelerator(cfg)
    stem = config if isinstance(config, (str, Path)) else "fit"
    root = Path(run_dir) if run_dir is not None else default_run_dir(stem)
    existed = root.exists()
    paths = shared_run_dir(root, accelerator, resume=resume, overwrite=overwrite)
    try:
        return train_in_dir(cfg, paths, accelerator, resume=resume, overwrite=overwrite, bundle=bundle, model=net)
    except BaseException:
        if not existed and accelerator.is_main_process:
            remove_if_empty(paths.root)  # created by this call and still empty: leave no trace
        raise


def fit_config(config: str | Path | Config | None, overrides: Sequence[str], run_dir: str | Path | None,
               resume: bool) -> Config:
    """The run's config: ``config`` (or, resuming without one, the run's saved config) + ``overrides``; the
    keys fit takes from its arguments are refused as overrides, ``data.options`` limited to :data:`DATA_OPTIONS`."""
    if isinstance(overrides, str) or not all(isinstance(o, str) for o in overrides):
        raise ConfigError(f"overrides must be a list of 'section.key=value' strings; got {overrides!r}")
    overrides = list(overrides)
    for item in overrides:
        key = split_override(item)[0]
        if any(key == k or key.startswith(k + ".") for k in FROM_ARGUMENTS):
            raise ConfigError(f"override {item!r}: metacal.fit takes {key} from its arguments (the datasets and "
                              "the model); leave it out")
    base: dict[str, Any] = {"data": {"name": PYTHON}, "model": {"name": PYTHON}}  # the arguments fill them in
    path = None
    if isinstance(config, Config):
        base = to_dict(config)
    elif config is not None:
        if not isinstance(config, (str, Path)):
            raise ConfigError(f"config must be a YAML path or a metacal.train.Config; got {type(config).__name__}")
        path = config
    elif resume:
        if run_dir is None:
            raise ConfigError("resume=True needs run_dir (the run to continue)")
        root = Path(run_dir)
        base = to_dict(saved_config(root, checkpoint_to_resume(root)))
    cfg = load_config(path, overrides, base=base)
    extra = sorted(set(cfg.data.options) - set(DATA_OPTIONS))
    if extra:
        raise ConfigError(f"data.options.{extra[0]} does not apply to datasets given to metacal.fit (they bring their "
                          f"own transforms); fit takes data.options {', '.join(DATA_OPTIONS)} — drop it "
                          "(overrides=['data.options={}'] clears the config's)")
    return cfg


def describe(model: nn.Module) -> str:
    """The model's class name (``FeatureClassifier(ResNet)`` for a wrapped network): what config.yaml records."""
    if isinstance(model, FeatureClassifier):
        return f"FeatureClassifier({type(model.net).__name__})"
    return type(model).__name__


def check_model(model: nn.Module, bundle: Any) -> nn.Module:
    """``model`` with the metacal contract (wrapped if needed), checked on two training inputs: logits of
    shape (N, K) with K = the data's number of classes, and features the γ-Net can read. One-line
    :class:`ContractError` otherwise. The checks run in eval mode without grad; ``model`` is left as it was."""
    if not isinstance(model, nn.Module):
        raise ContractError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    x = torch.stack([bundle.train[i][0] for i in range(min(2, len(bundle.train)))])
    shape, k = tuple(bundle.input_shape), bundle.num_classes
    logits = _forward(model, x)
    if not torch.is_tensor(logits):
        raise ContractError(f"model(x) must return the logits tensor (N, K); on {len(x)} training inputs of shape "
                            f"{shape} {type(model).__name__} returned a {type(logits).__name__}")
    if logits.dim() != 2 or logits.shape[0] != len(x):
        raise ContractError(f"model(x) must return logits of shape (N, K); on {len(x)} training inputs of shape "
                            f"{shape} {type(model).__name__} returned shape {tuple(logits.shape)}")
    if logits.shape[1] != k:
        raise ContractError(f"the model's logits have K={logits.shape[1]} columns but the labels have {k} classes "
                            f"(0..{k - 1}); give the model a {k}-class head (or set data.options.num_classes="
                            f"{logits.shape[1]} if classes are missing from the training data)")
    try:
        net = wrap(model, input_shape=shape)
        probe_contract(net, shape, k)
    except ContractError as err:
        raise ContractError(f"no reachable features for the γ-Net: {err} (metacal.models.wrap(model, head=..., "
                            f"feature_layer=..., input_shape={shape}) names them; pass its result to fit)") from None
    return net


def _forward(model: nn.Module, x: torch.Tensor) -> Any:
    """One eval-mode forward without grad on ``x`` (moved to the model's device); training flags restored."""
    modes = {m: m.training for m in model.modules()}
    param = next(model.parameters(), None)
    model.eval()
    try:
        with torch.no_grad():
            return model(x.to(param.device) if param is not None else x)
    except (RuntimeError, ValueError, TypeError, AssertionError, IndexError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ContractError(f"{type(model).__name__} cannot run on the training inputs (shape {tuple(x.shape[1:])}, "
                            f"dtype {x.dtype}): {first}") from None
    finally:
        for m, mode in modes.items():
            m.training = mode


class Int64Labels(Dataset):
    """``dataset`` with every label as an int64 scalar tensor (after :func:`from_datasets` checked they are
    integers 0..K−1), so losses never see a float or int32 label; ``targets`` passes through."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getitem__(self, index: int) -> tuple[Any, torch.Tensor]:
        x, y = self.dataset[index]
        return x, torch.as_tensor(y).reshape(()).to(torch.int64)

    @property
    def targets(self) -> Any:
        targets = getattr(self.dataset, "targets", None)
        if targets is None:
            raise AttributeError("targets")
        return targets
