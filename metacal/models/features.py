"""Any ``nn.Module`` as a metacal classifier: its own forward gives the logits, a forward hook the features.

The meta step and the γ-Net need ``model(x, return_features=True)`` → ``(logits, features)`` and
``model.classifier``, the ``nn.Linear`` head applied last (docs/conventions.md#interfaces). A stock network
(torchvision, timm-style, one's own) has a head but no ``return_features``; :class:`FeatureClassifier`
supplies it without editing the network:

* **head** — the ``nn.Linear`` whose output IS the network's output (the logits). Given by dotted name
  (``"fc"``, ``"heads.head"``), or found by :func:`probe_contract`: one forward on a random batch with a
  hook on every ``nn.Linear``, the head being the one whose output tensor is the returned tensor. Without
  an input shape to probe with, the last ``nn.Linear`` registered is taken. With ``num_classes`` a head
  of another width is replaced by ``nn.Linear(in_features, num_classes)`` (PyTorch's default init).
* **features** — by default the head's input, captured by a forward pre-hook on the head, so that
  ``logits = head(features)`` holds exactly (what the ``head`` hypergradient backend differentiates).
  ``feature_layer`` names another module instead; its output, flattened to (N, d), is what the γ-Net
  reads (the ``head`` backend is then refused: ``features_are_head_input`` is False).

The hooks are registered for one ``return_features=True`` call and removed after it, so a patched copy
(``higher``), a DDP wrapper or ``torch.func.functional_call`` behave like the module itself, and a plain
``model(x)`` runs the network untouched. Contract violations are one-line :class:`ContractError`\\ s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn


class ContractError(ValueError):
    """A network that cannot serve as a metacal classifier (no head, no reachable features, bad shapes)."""


def submodule(net: nn.Module, name: str, what: str) -> nn.Module:
    """``net.get_submodule(name)`` with a one-line error listing the top-level children."""
    try:
        return net.get_submodule(name)
    except AttributeError:
        children = ", ".join(n for n, _ in net.named_children()) or "none"
        raise ContractError(f"{what} {name!r} is not a module of {type(net).__name__} "
                            f"(its top-level modules: {children})") from None


def set_submodule(net: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, leaf = name.rpartition(".")
    setattr(net.get_submodule(parent) if parent else net, leaf, module)


def top_level_names(model: nn.Module) -> list[str]:
    """The first-level module names a user can use as prefixes of ``model``'s tensor names (for a
    :class:`FeatureClassifier`: ``net.<child>``)."""
    if isinstance(model, FeatureClassifier):
        return [f"net.{n}" for n, _ in model.net.named_children()]
    return [n for n, _ in model.named_children()]


def last_linear(net: nn.Module) -> str:
    """Name of the last ``nn.Linear`` registered in ``net`` (the head of most classification networks)."""
    names = [n for n, m in net.named_modules() if isinstance(m, nn.Linear)]
    if not names:
        raise ContractError(f"{type(net).__name__} has no nn.Linear head, so it has no reachable features; "
                            "give the head's name (head=...) or a feature_layer")
    return names[-1]


class FeatureClassifier(nn.Module):
    """``net`` with the metacal contract: ``model(x)`` → logits, ``model(x, return_features=True)`` →
    (logits, features) from ONE forward pass, ``model.classifier`` the head, ``model.feature_dim``.

    Args:
        net: the network; ``net(x)`` must return the logits tensor (N, K).
        head: dotted name of the final ``nn.Linear`` in ``net``; None: found by probing (``input_shape``)
            or the last ``nn.Linear`` registered.
        feature_layer: dotted name of the module whose output (flattened) are the features; None: the
            head's input.
        num_classes: replace a head of another width by a fresh ``nn.Linear(in_features, num_classes)``.
        input_shape: one input without the batch dimension, for the probe (head search, feature size,
            shape checks). Required with ``feature_layer``.
        input_adapter: a parameter-free module applied to ``x`` before ``net`` (e.g. channel repeat).

    Parameter and state-dict names are ``net.<name in net>``.
    """

    def __init__(self, net: nn.Module, head: str | None = None, feature_layer: str | None = None,
                 num_classes: int | None = None, input_shape: Sequence[int] | None = None,
                 input_adapter: nn.Module | None = None) -> None:
        super().__init__()
        self.net = net
        self.adapter = input_adapter
        if head is None:
            head = find_head(net, self._adapted_shape(input_shape)) if input_shape is not None else last_linear(net)
        module = submodule(net, head, "head")
        if not isinstance(module, nn.Linear):
            raise ContractError(f"head {head!r} is a {type(module).__name__}, not an nn.Linear; the meta step "
                                "needs a linear head (name it with head=...)")
        if num_classes is not None and module.out_features != num_classes:
            set_submodule(net, head, nn.Linear(module.in_features, num_classes, bias=module.bias is not None))
        self.head_name = head
        self.feature_layer = feature_layer
        if feature_layer is not None:
            submodule(net, feature_layer, "feature_layer")
            if input_shape is None:
                raise ContractError("feature_layer needs input_shape (the feature size is read from a probe forward)")
        self.feature_dim = self.classifier.in_features
        self.features_are_head_input = feature_layer is None
        if input_shape is not None:
            probe = probe_contract(self, input_shape, num_classes)
            self.feature_dim, self.features_are_head_input = probe["feature_dim"], probe["features_are_head_input"]

    @property
    def classifier(self) -> nn.Linear:  # type: ignore[override]
        """The head inside ``net`` (not registered twice: its parameters are named ``net.<head>.*``)."""
        return self.net.get_submodule(self.head_name)  # type: ignore[return-value]

    def _adapted_shape(self, input_shape: Sequence[int] | None) -> tuple[int, ...] | None:
        if input_shape is None or self.adapter is None:
            return None if input_shape is None else tuple(input_shape)
        with torch.no_grad():
            return tuple(self.adapter(torch.zeros(1, *input_shape)).shape[1:])

    def forward(self, x: Tensor, return_features: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        if self.adapter is not None:
            x = self.adapter(x)
        if not return_features:
            return _logits(self, self.net(x))
        captured: list[tuple[Any, int | None]] = []  # (features, version counter when captured)

        def keep(value: Any) -> None:
            captured.append((value, value._version if torch.is_tensor(value) else None))

        if self.feature_layer is None:
            handle = self.classifier.register_forward_pre_hook(lambda m, args: keep(args[0]))
        else:
            handle = self.net.get_submodule(self.feature_layer).register_forward_hook(lambda m, a, out: keep(out))
        try:
            logits = _logits(self, self.net(x))
        finally:
            handle.remove()
        where = repr(self.feature_layer) if self.feature_layer else f"the input of head {self.head_name!r}"
        if len(captured) != 1 or not torch.is_tensor(captured[0][0]):
            raise ContractError(f"features: {where} was reached {len(captured)} times in the forward pass (need "
                                "exactly once, as a tensor): no reachable features; name a feature_layer that runs once")
        features, version = captured[0]
        if features._version != version:
            raise ContractError(f"features: the output of {where} is modified in place later in the forward pass "
                                "(e.g. by ReLU(inplace=True)); name the module after it as feature_layer")
        return logits, torch.flatten(features, 1)


def _logits(model: FeatureClassifier, out: Any) -> Tensor:
    if not torch.is_tensor(out):
        raise ContractError(f"{type(model.net).__name__} returned {type(out).__name__}, not a logits tensor "
                            "(inception_v3/googlenet: set aux_logits: false)")
    return out


def find_head(net: nn.Module, input_shape: Sequence[int] | None) -> str:
    """The ``nn.Linear`` whose output tensor is ``net``'s output on a probe batch (eval mode, no grad)."""
    if input_shape is None:
        return last_linear(net)
    outputs: dict[str, Tensor] = {}
    handles = [m.register_forward_hook(lambda m, a, out, n=n: outputs.__setitem__(n, out))
               for n, m in net.named_modules() if isinstance(m, nn.Linear)]
    try:
        out = _probe_forward(net, input_shape)
    finally:
        for h in handles:
            h.remove()
    found = [n for n, o in outputs.items() if o is out]
    if not found:
        raise ContractError(f"no nn.Linear of {type(net).__name__} produces its output, so it has no linear head to "
                            "read features from; name the head (head=...) or wrap the network so a Linear comes last")
    return found[-1]


def _probe_forward(model: nn.Module, input_shape: Sequence[int], **kwargs: Any) -> Any:
    """One forward of 2 seeded random inputs in eval mode without grad; the training flags, the global RNG
    and every buffer stay as they were."""
    modes = {m: m.training for m in model.modules()}
    param = next(model.parameters(), None)
    device = param.device if param is not None else torch.device("cpu")
    dtype = param.dtype if param is not None and param.is_floating_point() else torch.float32
    x = torch.randn(2, *input_shape, generator=torch.Generator().manual_seed(0)).to(device, dtype)
    model.eval()
    try:
        with torch.no_grad():
            return model(x, **kwargs)
    except ContractError:
        raise
    except (RuntimeError, ValueError, TypeError, AssertionError, IndexError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ContractError(f"{type(model).__name__} cannot run on inputs of shape {tuple(input_shape)}: {first}") from None
    finally:
        for m, mode in modes.items():
            m.training = mode


def probe_contract(model: nn.Module, input_shape: Sequence[int], num_classes: int | None = None) -> dict[str, Any]:
    """Check the metacal contract on one probe forward; returns ``feature_dim`` and ``features_are_head_input``.

    Checks: ``model(x, return_features=True)`` gives logits (2, K) (K = ``num_classes`` when given) and
    features (2, d); ``model.classifier`` is an ``nn.Linear`` applied last (its output is the logits);
    ``model(x)`` gives the same logits."""
    head = getattr(model, "classifier", None)
    if not isinstance(head, nn.Linear):
        raise ContractError(f"{type(model).__name__}.classifier must be the nn.Linear head (models contract); "
                            f"got {type(head).__name__}")
    seen: dict[str, Tensor] = {}
    handle = head.register_forward_hook(lambda m, args, out: seen.update(inp=args[0], out=out))
    try:
        out = _probe_forward(model, input_shape, return_features=True)
    finally:
        handle.remove()
    if not (isinstance(out, tuple) and len(out) == 2 and all(torch.is_tensor(t) for t in out)):
        raise ContractError(f"{type(model).__name__}(x, return_features=True) must return (logits, features); "
                            f"got {type(out).__name__}")
    logits, features = out
    if "out" not in seen or seen["out"] is not logits:
        raise ContractError(f"{type(model).__name__}: the output of classifier is not the logits (the head must be "
                            "applied last, logits = classifier(features))")
    if logits.dim() != 2 or (num_classes is not None and logits.shape[1] != num_classes):
        want = f"(N, {num_classes})" if num_classes is not None else "(N, K)"
        raise ContractError(f"{type(model).__name__}: logits have shape {tuple(logits.shape)}, expected {want}")
    if features.dim() != 2 or features.shape[0] != logits.shape[0]:
        raise ContractError(f"{type(model).__name__}: features have shape {tuple(features.shape)}, expected (N, d)")
    head_input = torch.flatten(seen["inp"], 1)
    return {"feature_dim": int(features.shape[1]),
            "features_are_head_input": head_input.shape == features.shape and torch.equal(head_input, features)}


def keeps_contract(net: nn.Module, input_shape: Sequence[int] | None, num_classes: int | None = None) -> bool:
    """Whether ``net`` already serves as a metacal classifier: a :class:`~metacal.models.base.Classifier`
    or :class:`FeatureClassifier` of the right width, or (with ``input_shape``) any module passing
    :func:`probe_contract`."""
    from .base import Classifier

    if isinstance(net, (Classifier, FeatureClassifier)):
        return num_classes is None or net.classifier.out_features == num_classes
    if input_shape is None or not isinstance(getattr(net, "classifier", None), nn.Linear):
        return False
    try:
        probe_contract(net, input_shape, num_classes)
    except ContractError:
        return False
    return True


def wrap(net: nn.Module, num_classes: int | None = None, *, head: str | None = None, feature_layer: str | None = None,
         input_shape: Sequence[int] | None = None) -> nn.Module:
    """``net`` itself if it already keeps the contract (:func:`keeps_contract`) and no head/feature layer is
    named, else a :class:`FeatureClassifier` around it (the Python entry point for a user's own network)."""
    if head is None and feature_layer is None and keeps_contract(net, input_shape, num_classes):
        return net
    return FeatureClassifier(net, head=head, feature_layer=feature_layer, num_classes=num_classes,
                             input_shape=input_shape)
