"""experiments/benchmark/flops.py: the FLOP count against hand-derived figures and torch's own counter, and the
arithmetic of the meta step's passes (the ``jvp`` tangent pass computes exactly 2F − f₁)."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from experiments.benchmark.flops import BEGIN, END, FlopCount, count, first_layer, measure, section
from experiments.benchmark.meta_step import build_setup
from tests.installed import requires_fashion_mnist

ROOT = Path(__file__).resolve().parents[3]

B, D_IN, D_HID, D_OUT = 8, 5, 7, 3


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(D_IN, D_HID), nn.ReLU(), nn.Linear(D_HID, D_OUT))


def tiny_setup():
    args = Namespace(model="small_resnet", classes=10, size=12, batch=6, meta_batch=6, objective="sece")
    return build_setup(args, torch.device("cpu"))


def test_forward_and_backward_match_the_hand_count_and_torchs_counter():
    """Forward 2·B·(5·7 + 7·3) = 896; backward: both weight gradients (896) and the second layer's input
    gradient 2·B·7·3 = 336 (the first layer's input needs none) → 2128."""
    net, x = mlp(), torch.randn(B, D_IN)
    with FlopCount() as ours:
        net(x).sum().backward()
    with FlopCounterMode(display=False) as theirs:
        net(x).sum().backward()
    forward = 2 * B * (D_IN * D_HID + D_HID * D_OUT)
    assert ours.total == forward + forward + 2 * B * D_HID * D_OUT == 2128
    assert ours.total == theirs.get_total_flops()
    assert sum(ours.by_op.values()) == ours.total and set(ours.by_op) <= {"aten.addmm", "aten.mm", "aten.t"}


def test_counts_forward_mode_tangents_and_autograd_grad_on_leaves():
    """A dual weight doubles a layer's products (primal x·Wᵀ and tangent x·Ẇᵀ); ``torch.autograd.grad`` on
    leaves, which torch's FlopCounterMode cannot wrap, counts as a backward."""
    layer, x = nn.Linear(D_IN, D_OUT, bias=False), torch.randn(B, D_IN)
    with FlopCount() as counter, torch.no_grad(), fwAD.dual_level():
        weight = fwAD.make_dual(layer.weight.detach(), torch.randn(D_OUT, D_IN))
        fwAD.unpack_dual(nn.functional.linear(x, weight)).tangent.sum()
    assert counter.total == 2 * (2 * B * D_IN * D_OUT)
    w = torch.randn(D_OUT, D_IN, requires_grad=True)
    assert count(lambda: torch.autograd.grad((x @ w.T).sum(), [w])) == 2 * (2 * B * D_IN * D_OUT)


def test_first_layer_is_the_one_that_sees_the_inputs():
    model, _, _, (x, *_) = tiny_setup()
    assert first_layer(model, x) is model.stem[0]
    net = mlp()
    assert first_layer(net, torch.randn(B, D_IN)) is net[0]


def test_jvp_tangent_pass_computes_two_convolutions_per_layer_and_one_for_the_first(monkeypatch):
    """The JVP pass replays the real forward's primal outputs, so it computes only the tangent products:
    K(ẋ, W) + K(x, Ẇ) per layer, and K(x, Ẇ) alone for the first layer, whose input has no tangent —
    2F − f₁ in all. A rule that received a tensor of zeros for the first layer's input tangent would
    convolve it: 2F."""
    import metacal.meta.hypergrad_jvp as hypergrad_jvp
    from metacal.meta import MetaLearner

    model, gamma_net, objective, (x, y, xm, ym) = tiny_setup()
    with torch.no_grad():
        forward, first = count(model.train(), x), count(model.stem[0], x)
    counted = []
    original = hypergrad_jvp.network_jvp

    def counting(*args, **kwargs):
        with FlopCount() as counter:
            out = original(*args, **kwargs)
        counted.append(counter.total)
        return out

    monkeypatch.setattr(hypergrad_jvp, "network_jvp", counting)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    MetaLearner(model, opt, objective, gamma_net=gamma_net, backend="jvp").step(x, y, (xm, ym))
    assert counted == [2 * forward - first]
    assert first > 0 and forward > 10 * first


def test_the_steps_arithmetic_is_the_sum_of_their_passes():
    """At equal train and meta-val batches: floor − focal is a plain step (the meta-val forward and backward);
    ``head`` adds one meta-val forward F and the γ-Net's small products; ``jvp`` adds 2F − f₁ and a contraction
    that is a small fraction of a focal step."""
    result = measure(torch.device("cpu"), tiny_setup())
    f, big_f, f1 = result["flops"], result["forward"], result["first_layer"]
    assert f["floor"] - f["focal"] == f["plain"]
    assert f["plain"] == pytest.approx(3 * big_f - f1, rel=1e-3)  # + the loss head's tiny products
    assert 0 < f["head"] - f["focal"] - big_f < 0.01 * f["focal"]
    contraction = f["jvp"] - f["floor"] - (2 * big_f - f1)
    assert 0 < contraction < 0.01 * f["focal"]
    assert result["ratio_to_focal"]["floor"] < result["ratio_to_focal"]["jvp"] < result["ratio_to_focal"]["higher"]
    assert f["higher_recompute"] - f["higher"] == f["focal"]  # the reference code's real step, taken again


def test_section_states_the_counts_between_its_markers():
    result = measure(torch.device("cpu"), tiny_setup())
    text = section(result, "python -m experiments.benchmark.flops --cpu")
    assert text.startswith(BEGIN) and text.endswith(END)
    assert f"| meta step, `jvp` | {result['flops']['jvp'] / 1e9:.3f} | {result['ratio_to_focal']['jvp']:.2f} |" in text
    assert f"`jvp` computes\n{result['ratio_to_focal']['jvp']:.2f}" in text


def test_the_meta_step_page_keeps_the_other_scripts_sections_in_their_order():
    from experiments.benchmark import epoch_report
    from experiments.benchmark.meta_step_report import with_kept_sections

    flops = f"{BEGIN}\narithmetic\n{END}"
    epoch = f"{epoch_report.BEGIN}\nepoch\n{epoch_report.END}"
    old = f"# old table\n\n{flops}\n\n{epoch}\n"
    assert with_kept_sections("# new table\n", old) == f"# new table\n\n{flops}\n\n{epoch}\n"
    assert with_kept_sections("# new\n", f"# old\n{epoch}\n{flops}\n") == f"# new\n\n{epoch}\n\n{flops}\n"
    assert with_kept_sections("# new\n", "# old, no sections\n") == "# new\n"


@requires_fashion_mnist
def test_the_trainers_iterations_compute_what_the_benchmarks_steps_compute(tmp_path, monkeypatch):
    """The ResNet regime trains bench_meta_step's setup (small_resnet, batches of 128 images of 28×28): its CE
    iteration computes exactly the plain step's products; FLγ-SECE's adds the meta step's, as `jvp` does."""
    from experiments.benchmark.flops import trainer_flops
    from experiments.benchmark.meta_step import default_setup

    monkeypatch.chdir(ROOT)
    trainer = trainer_flops(torch.device("cpu"), steps=1)
    bench = measure(torch.device("cpu"), default_setup(torch.device("cpu")))["flops"]
    assert trainer["ce"] == bench["plain"]
    assert trainer["flgamma_sece"] / trainer["ce"] == pytest.approx(bench["jvp"] / bench["plain"], rel=0.01)


def test_without_fashion_mnist_the_trainers_rows_are_left_out_in_one_line(tmp_path, monkeypatch):
    from experiments.benchmark.flops import table, trainer_flops

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("METACAL_NO_SYSTEM_DATASETS", "1")
    monkeypatch.setenv("METACAL_DATA", str(tmp_path))
    line = trainer_flops(torch.device("cpu"), steps=1)
    assert line.startswith("the trainer's rows are left out: dataset 'fashion_mnist' not found") and "\n" not in line
    result = measure(torch.device("cpu"), tiny_setup())
    assert table({**result, "trainer": line}).endswith("\n\n" + line)
