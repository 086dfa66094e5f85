"""Start a model from local weights: read a state-dict file, check it against the model, copy it in.

* :func:`read_state_dict` — ``.safetensors`` (safetensors), anything else through
  ``torch.load(weights_only=True)`` (a ``torch.save``\\ d state dict: torchvision's ``.pth`` files); a
  mapping that holds the tensors under ``"state_dict"`` or ``"model"`` (Lightning, common training
  scripts) is unpacked and a DDP ``module.`` prefix stripped.
* :func:`load_weights` — strict, with one-line :class:`WeightsMismatchError`\\ s naming the missing keys,
  the unexpected keys and the shape mismatches (at most three of each, with counts). A
  :class:`~metacal.models.features.FeatureClassifier` names its tensors ``net.<name in the network>``; a
  state dict of the bare network (torchvision's, no key starting with ``net.``) is mapped onto it.
  ``skip`` lists prefixes of model keys left as initialised (the replaced head: ``[net.fc]``).
  BatchNorm's ``num_batches_tracked`` may be absent (torch fills it, as ``load_state_dict`` does for
  state dicts saved before it existed).

A prefix ``p`` matches the key ``p`` and every key below it (``p.…``), never ``p2.…``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import torch
from torch import Tensor, nn

from .features import FeatureClassifier, top_level_names


class WeightsMismatchError(ValueError):
    """The weights do not fit the model (or cannot be read as a state dict); the message is one line."""


def matches(key: str, prefix: str) -> bool:
    return key == prefix or key.startswith(prefix + ".")


def _examples(keys: Iterable[str], n: int = 3) -> str:
    keys = list(keys)
    more = f", … ({len(keys)} in all)" if len(keys) > n else ""
    return ", ".join(keys[:n]) + more


def read_state_dict(path: str | Path) -> dict[str, Tensor]:
    """The tensors of a state-dict file (module docstring); one-line errors for anything else."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(2, "no such weights file", str(path))
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            obj = load_file(str(path), device="cpu")
        else:
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - whatever the reader says, the file is not usable
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise WeightsMismatchError(f"{path} is not a state dict saved with torch.save or safetensors ({first})") from None
    for key in ("state_dict", "model"):
        if isinstance(obj, Mapping) and isinstance(obj.get(key), Mapping):
            obj = obj[key]
            break
    if not isinstance(obj, Mapping) or not obj or not all(isinstance(k, str) and torch.is_tensor(v) for k, v in obj.items()):
        raise WeightsMismatchError(f"{path} does not hold a state dict (a mapping of names to tensors); save one with "
                                   "torch.save(model.state_dict(), PATH)")
    if all(k.startswith("module.") for k in obj):
        obj = {k[len("module."):]: v for k, v in obj.items()}
    return dict(obj)


def module_name(model: nn.Module, module: nn.Module | None) -> str | None:
    """The dotted name of ``module`` inside ``model`` (None when it is not there)."""
    return next((n for n, m in model.named_modules() if m is module), None)


def load_weights(model: nn.Module, state: Mapping[str, Tensor], skip: Iterable[str] = (),
                 source: str = "the checkpoint") -> list[str]:
    """Copy ``state`` into ``model`` (module docstring); returns the model keys that were loaded."""
    own = model.state_dict()
    prefix = "net." if isinstance(model, FeatureClassifier) else ""
    original = {k: k for k in state}  # model-side key → the checkpoint's own name (for the messages)
    if prefix and not any(k.startswith(prefix) for k in state):
        original = {prefix + k: k for k in state}
        state = {prefix + k: v for k, v in state.items()}
    skip = list(skip)
    for p in skip:
        if not any(matches(k, p) for k in own):
            children = ", ".join(top_level_names(model))
            raise WeightsMismatchError(f"model.checkpoint_skip {p!r} matches no tensor of the model (its top-level "
                                       f"modules: {children}; names as in model.state_dict())")
    skipped = lambda k: any(matches(k, p) for p in skip)  # noqa: E731
    wanted = {k for k in own if not skipped(k)}
    given = {k for k in state if not skipped(k)}
    missing = sorted(k for k in wanted - given if not k.endswith("num_batches_tracked"))
    unexpected = sorted(original[k] for k in given - wanted)
    mismatched = sorted(k for k in wanted & given if tuple(state[k].shape) != tuple(own[k].shape))
    if missing or unexpected or mismatched:
        raise WeightsMismatchError(_mismatch_message(model, source, own, wanted & given, missing, unexpected,
                                                     [(k, state[k].shape, own[k].shape) for k in mismatched]))
    loaded = sorted(wanted & given)
    result = model.load_state_dict({k: state[k] for k in loaded}, strict=False)
    assert not result.unexpected_keys, result.unexpected_keys
    return loaded


def _mismatch_message(model: nn.Module, source: str, own: Mapping[str, Tensor], common: set[str],
                      missing: list[str], unexpected: list[str], mismatched: list[tuple[str, torch.Size, torch.Size]]) -> str:
    parts = []
    if mismatched:
        shapes = [f"{k} {list(a)} in the checkpoint but {list(b)} in the model" for k, a, b in mismatched]
        parts.append(f"{len(mismatched)} tensor(s) of another shape: {_examples(shapes, 2)}")
    if missing:
        parts.append(f"{len(missing)} of the model's tensors missing: {_examples(missing)}")
    if unexpected:
        parts.append(f"{len(unexpected)} tensor(s) the model does not have: {_examples(unexpected)}")
    total = len(own)
    head = module_name(model, getattr(model, "classifier", None))
    what = f"{source} does not fit the model"
    if len(common) < total / 2:
        what += f" (another architecture? only {len(common)} of its {total} tensors are in the checkpoint)"
    hint = ""
    bad = [k for k, _, _ in mismatched] + missing
    if head is not None and bad and all(matches(k, head) for k in bad) and not unexpected:
        hint = f"; model.checkpoint_skip: [{head}] keeps the model's fresh head instead"
    return f"{what}: {'; '.join(parts)}{hint}"
