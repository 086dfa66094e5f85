"""Properties every objective shares: registry/build, module == function, permutation invariance, finiteness
(all-correct, all-wrong, batch of 1, confidence exactly 1 from ±1e4 logits) in float32 and float64, dtype
agreement, gradcheck through the nn.Module."""

import inspect

import pytest
import torch

import metacal.objectives as objectives
from metacal.registry import UnknownNameError

NAMES = ["avuc", "dece", "mdca", "mmce", "savuc", "sbece", "sbece_label", "sece"]
FUNCTIONS = {
    "sece": objectives.sece,
    "dece": objectives.dece,
    "sbece": objectives.sbece,
    "sbece_label": objectives.sbece_label,
    "avuc": objectives.avuc,
    "savuc": objectives.savuc,
    "mmce": objectives.mmce,
    "mdca": objectives.mdca,
}
# smoother settings for gradcheck (steep defaults make finite differences noisy, not wrong)
SMOOTH = {
    "sece": {"bandwidth": 0.1, "t_a": 5.0},
    "dece": {"t_a": 5.0, "t_b": 0.1},
    "sbece": {"temperature": 0.01},
    "sbece_label": {"temperature": 0.01},
    "avuc": {"kappa": 0.6},
    "savuc": {"kappa": 0.3, "temperature": 0.5},
    "mmce": {},
    "mdca": {},
}


def test_available_and_unknown_name():
    assert objectives.available() == NAMES
    with pytest.raises(UnknownNameError, match="available: avuc, dece, mdca"):
        objectives.build("ece")


@pytest.mark.parametrize("name", NAMES)
def test_module_params_are_function_keywords(name):
    module = objectives.build(name)
    fn_params = list(inspect.signature(FUNCTIONS[name]).parameters)[2:]
    assert list(module.keywords) == fn_params
    with pytest.raises(ValueError, match="has no option"):
        objectives.build(name, not_a_param=1)


def test_bad_values_fail_at_construction():
    with pytest.raises(ValueError, match="bandwidth"):
        objectives.build("sece", bandwidth=-1.0)
    with pytest.raises(ValueError, match="p must be"):
        objectives.build("sbece", p=4)


@pytest.mark.parametrize("name", NAMES)
def test_module_matches_function_and_gradcheck(name):
    torch.manual_seed(11)
    logits = torch.randn(8, 3, dtype=torch.float64).requires_grad_()
    targets = torch.randint(0, 3, (8,))
    module = objectives.build(name, **SMOOTH[name])
    assert module(logits, targets).item() == pytest.approx(
        FUNCTIONS[name](logits, targets, **SMOOTH[name]).item(), abs=0.0
    )
    assert module(logits, targets).item() > 0
    assert torch.autograd.gradcheck(lambda z: module(z, targets), (logits,))


@pytest.mark.parametrize("name", NAMES)
def test_permutation_invariance(name):
    torch.manual_seed(12)
    logits = torch.randn(40, 5, dtype=torch.float64) * 2
    targets = torch.randint(0, 5, (40,))
    perm = torch.randperm(40)
    module = objectives.build(name)
    a, b = module(logits, targets), module(logits[perm], targets[perm])
    assert a.item() == pytest.approx(b.item(), rel=1e-10, abs=1e-13)


def _cases(dtype):
    torch.manual_seed(13)
    base = torch.randn(6, 4, dtype=dtype) * 3
    wrong = (base.argmax(1) + 1) % 4
    saturated = torch.tensor([[1e4, -1e4, 0.0, 0.0], [-1e4, 1e4, 0.0, -1e4], [0.0, 0.0, 1e4, -1e4]], dtype=dtype)
    return {
        "all_correct": (base, base.argmax(1)),
        "all_wrong": (base, wrong),
        "batch_of_one": (base[:1], torch.tensor([2])),
        "confidence_one_correct": (saturated, saturated.argmax(1)),
        "confidence_one_wrong": (saturated, (saturated.argmax(1) + 1) % 4),
        "confidence_one_mixed": (saturated, torch.tensor([0, 0, 2])),
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", NAMES)
def test_finite_values_and_gradients(name, dtype):
    module = objectives.build(name)
    for case, (logits, targets) in _cases(dtype).items():
        z = logits.clone().requires_grad_()
        value = module(z, targets)
        value.backward()
        assert value.dtype == dtype and value.dim() == 0, case
        assert torch.isfinite(value), (case, value)
        assert torch.isfinite(z.grad).all(), (case, z.grad)


@pytest.mark.parametrize("name", NAMES)
def test_saturated_values(name):
    # confidence exactly 1: correct → calibrated; wrong → maximally miscalibrated
    logits = torch.tensor([[1e4, -1e4, 0.0], [0.0, 1e4, -1e4]], dtype=torch.float64)
    module = objectives.build(name)
    correct = module(logits, torch.tensor([0, 1])).item()
    wrong = module(logits, torch.tensor([1, 2])).item()
    # soft bins leak ~1e−8 membership into the neighbouring bin; the ℓ2 root turns that into ~1e−4
    assert correct == pytest.approx(0.0, abs=2e-4 if name.startswith("sbece") else 1e-6)
    if name in ("sece", "dece", "sbece", "sbece_label"):
        assert wrong == pytest.approx(1.0, abs=1e-5)  # |0 − 1| in every bin / sample


@pytest.mark.parametrize("name", NAMES)
def test_float32_agrees_with_float64(name):
    torch.manual_seed(14)
    logits = torch.randn(32, 5, dtype=torch.float64)
    targets = torch.randint(0, 5, (32,))
    module = objectives.build(name)
    v64 = module(logits, targets).item()
    v32 = module(logits.float(), targets).item()
    assert v32 == pytest.approx(v64, rel=1e-4, abs=1e-5)
