"""metacal/train/cuda_graphs.py on CPU, with tests/train/graph_emulator.py in place of CUDA graphs.

The emulator has a CUDA graph's semantics (static memory, Python numbers baked in, Python side effects once, no
host reads while capturing); the first tests show it has them. Then: replayed iterations equal eager ones bit for
bit (the γ-Net's Adam capturable on both sides), through the trainer for every method family the config allows,
and everything that cannot be replayed is refused in one line before the run starts."""

from __future__ import annotations

import json
from functools import partial

import pytest
import torch
import torch.optim.adam as adam_module
from graph_emulator import EmulatedGraph, HostReadDuringCapture, capture
from train_tiny import METHODS, TINY, deep_merge, read_metrics, assert_same_numbers

from metacal import objectives
from metacal.meta import META_OPTIMIZERS, GammaNet, MetaLearner, PlainStep
from metacal.losses import build as build_loss
from metacal.models import build as build_model
from metacal.train import ConfigError, cuda_graphs, load_config, train
from metacal.train.cuda_graphs import GraphedSteps, baked_numbers, graph_problem
from metacal.train.run_dir import prepare_run_dir


@pytest.fixture
def emulated(monkeypatch):
    """CPU iterations are "captured" by the emulator, and Adam may be capturable on the CPU."""
    monkeypatch.setattr(cuda_graphs, "capture_for", lambda device: capture)
    supported = adam_module._get_capturable_supported_devices
    monkeypatch.setattr(adam_module, "_get_capturable_supported_devices", lambda *a, **k: supported(*a, **k) + ["cpu"])


# --- the emulator behaves as a CUDA graph --------------------------------------------------------------------

def test_replay_reads_the_static_inputs_and_bakes_python_numbers():
    x, w = torch.tensor([1.0, 2.0]), torch.tensor([0.5, 0.5])
    calls = []

    def step():
        calls.append(1)  # a Python side effect
        scale = 3.0 if len(calls) == 1 else 100.0  # a Python number: baked at capture
        w.add_(x * scale)
        return (w * 2).sum()

    graph, out = capture(step)
    assert isinstance(graph, EmulatedGraph)
    assert w.tolist() == [3.5, 6.5] and float(out) == 20.0  # the captured call ran once
    x.copy_(torch.tensor([10.0, 0.0]))  # a new batch in the static input
    graph.replay()
    assert calls == [1]  # Python did not run again
    assert w.tolist() == [33.5, 6.5]  # 3.0 · the NEW input, not 100.0
    assert float(out) == 80.0  # the captured output tensor holds the replay's value


def test_a_host_read_while_capturing_raises():
    t = torch.tensor([1.0, 2.0])
    with pytest.raises(HostReadDuringCapture):
        capture(lambda: float(t.sum()))
    with pytest.raises(HostReadDuringCapture):
        capture(lambda: bool(t.sum() > 0))


def test_random_operations_draw_anew_on_each_replay():
    out = torch.zeros(4)
    graph, _ = capture(lambda: out.copy_(torch.rand(4)))
    first = out.clone()
    graph.replay()
    assert not torch.equal(first, out)


# --- GraphedSteps against eager iterations ------------------------------------------------------------------------

def _meta_learner(seed: int, every: int) -> tuple[MetaLearner, torch.nn.Module, torch.nn.Module]:
    torch.manual_seed(seed)
    model = build_model("mlp", num_classes=4, in_channels=1, input_shape=(1, 8), batch_norm=True)
    net = GammaNet(feature_dim=model.feature_dim, num_heads=4)
    loss = build_loss("focal")
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    meta_opt = torch.optim.Adam(net.parameters(), lr=1e-3, capturable=True)  # both sides: the same arithmetic
    learner = MetaLearner(model, opt, objectives.build("sece"), gamma_net=net, loss=loss, meta_optimizer=meta_opt,
                          every=every)
    return learner, model, net


def _batches(n: int, batch: int = 16, last: int | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    sizes = [batch] * n + ([last] if last else [])
    return [(torch.randn(b, 8, generator=g), torch.randint(0, 4, (b,), generator=g)) for b in sizes]


def _state(*modules: torch.nn.Module) -> list[torch.Tensor]:
    return [t.detach().clone() for m in modules for t in list(m.parameters()) + list(m.buffers())]


@pytest.mark.parametrize("every", [1, 2])
def test_meta_iterations_replayed_equal_eager_bit_for_bit(emulated, every):
    batches, meta = _batches(12), _batches(12, batch=10)
    runs = {}
    for graphs in (False, True):
        learner, model, net = _meta_learner(0, every)
        learner.meta_val = iter(meta)
        stepper = GraphedSteps(learner, learner.inner.loss, capture) if graphs else learner
        outs = [stepper.step(x, y) for x, y in batches]
        runs[graphs] = (outs, _state(model, net), learner.iteration, stepper)
    (eager, eager_state, n_eager, _), (replayed, state, n, steps) = runs[False], runs[True]
    assert n == n_eager == 12
    # every `every`-th call is a meta step: each kind of iteration has its own graph after 3 eager warm-ups
    assert (steps.eager, steps.replays) == ((3, 9) if every == 1 else (6, 6))
    assert len(steps.graphs) == (1 if every == 1 else 2)
    for a, b in zip(eager_state, state):
        assert torch.equal(a, b)
    for a, b in zip(eager, replayed):
        assert torch.equal(a.loss, b.loss) and torch.equal(a.gamma, b.gamma)
        assert (a.meta_objective is None) == (b.meta_objective is None)
        if a.meta_objective is not None:
            assert torch.equal(a.meta_objective, b.meta_objective) and torch.equal(a.gamma_grad, b.gamma_grad)
            assert a.diagnostics.keys() == b.diagnostics.keys()
    # the outputs were copied out of the graph: the last replay did not overwrite the earlier ones
    assert len({float(o.loss) for o in replayed}) == len(replayed)


def test_a_partial_batch_runs_eagerly_between_replays(emulated):
    batches = _batches(6, last=5) + _batches(4)
    runs = {}
    for graphs in (False, True):
        torch.manual_seed(0)
        model = build_model("mlp", num_classes=4, in_channels=1, input_shape=(1, 8), batch_norm=True)
        loss = build_loss("focal", gamma=2.0)
        plain = PlainStep(model, loss, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
        stepper = GraphedSteps(plain, loss, capture) if graphs else plain
        losses = [stepper.step(x, y).loss for x, y in batches]
        runs[graphs] = (losses, _state(model), stepper)
    assert all(torch.equal(a, b) for a, b in zip(runs[False][0], runs[True][0]))
    assert all(torch.equal(a, b) for a, b in zip(runs[False][1], runs[True][1]))
    steps = runs[True][2]
    assert (steps.eager, steps.replays) == (4, 7)  # 3 warm-ups + the 5-sample batch; 11 iterations in all


def test_a_changed_python_number_of_the_loss_or_the_optimizer_captures_a_new_graph(emulated):
    torch.manual_seed(0)
    model = build_model("mlp", num_classes=4, in_channels=1, input_shape=(1, 8), batch_norm=True)
    loss = build_loss("focal", gamma=1.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = GraphedSteps(PlainStep(model, loss, opt), loss, capture, warmup=1)
    batches = _batches(9)
    for x, y in batches[:3]:
        steps.step(x, y)
    loss.gamma = 2.0  # the automatic γ's update
    for x, y in batches[3:6]:
        steps.step(x, y)
    opt.param_groups[0]["lr"] = 0.01  # a milestone
    for x, y in batches[6:]:
        steps.step(x, y)
    assert len(steps.graphs) == 3 and (steps.eager, steps.replays) == (3, 6)
    assert ("gamma", 2.0) in baked_numbers(loss)
    steps.new_epoch()
    assert not steps.graphs and (steps.eager, steps.replays) == (0, 0)


# --- the trainer ------------------------------------------------------------------------------------------------------

AUTO = {"loss": {"name": "focal", "params": {"gamma": 1.0}}, "learner": "auto",
        "auto": {"first_step": 1.0, "start": 1.0, "updates_per_epoch": 2}}
TRAINED = {"ce": METHODS["ce"], "adafocal": METHODS["adafocal"], "auto_gamma": AUTO,
           "ce_dece": METHODS["ce_dece"], "flgamma_sece": METHODS["flgamma_sece"],
           "flgamma_sece_head": deep_merge(METHODS["flgamma_sece"], {"meta": {"backend": "head"}}),
           "flgamma_sece_higher": deep_merge(METHODS["flgamma_sece"], {"meta": {"backend": "higher"}})}


def _train(tmp_path, method: dict, graphs: bool) -> tuple[dict, list]:
    cfg = load_config(None, base=deep_merge(deep_merge(TINY, method), {"run": {"cuda_graphs": graphs}}))
    run_dir = tmp_path / ("graphs" if graphs else "eager")
    train(cfg, prepare_run_dir(run_dir))
    return read_metrics(run_dir), json.loads((run_dir / "history.json").read_text())


@pytest.mark.parametrize("name", sorted(TRAINED))
def test_training_with_replayed_iterations_ends_where_eager_training_does(emulated, monkeypatch, tmp_path, name):
    # the graphed run makes the meta optimiser capturable (float32 bias correction on the device); so does the
    # eager one here, so that the two do the same arithmetic
    monkeypatch.setitem(META_OPTIMIZERS, "adam", partial(torch.optim.Adam, capturable=True))
    eager, _ = _train(tmp_path, TRAINED[name], False)
    replayed, history = _train(tmp_path, TRAINED[name], True)
    # 10 iterations per epoch: 3 eager warm-ups, then the capture and 6 replays (epochs capture afresh)
    assert [epoch["train"]["replayed_steps"] for epoch in history] == [7, 7]
    for section in ("val", "test"):
        assert_same_numbers(eager[section], replayed[section], abs_tol=0.0, where=section)


REFUSED = {
    "mixup": (METHODS["mixup"], "cannot replay loss mixup: it draws random numbers on the host"),
    "cosine": ({"schedule": {"name": "cosine"}}, "the cosine schedule changes it every iteration"),
    "trajectory": (deep_merge(METHODS["flgamma_sece"], {"meta": {"horizon": "trajectory"}}),
                   "meta.horizon trajectory"),
    "clipping": (deep_merge(METHODS["flgamma_sece"], {"meta": {"max_backbone_grad_norm": 5.0}}),
                 "meta.max_backbone_grad_norm"),
    "dropout": (deep_merge(METHODS["flgamma_sece"], {"model": {"options": {"dropout": 0.2}}}), "with dropout"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_a_graph_cannot_replay_is_refused_before_the_run_starts(emulated, tmp_path, name):
    method, words = REFUSED[name]
    cfg = load_config(None, base=deep_merge(deep_merge(TINY, method), {"run": {"cuda_graphs": True}}))
    with pytest.raises(ConfigError, match=words) as error:
        train(cfg, prepare_run_dir(tmp_path / "run"))
    assert "\n" not in str(error.value)
    assert not (tmp_path / "run" / "config.yaml").exists()


def test_without_cuda_the_setting_is_refused_in_one_line(tmp_path):
    cfg = load_config(None, base=deep_merge(TINY, {"run": {"cuda_graphs": True}}))
    with pytest.raises(ConfigError, match="^run.cuda_graphs needs a CUDA device; this run is on cpu$"):
        train(cfg, prepare_run_dir(tmp_path / "run"))


def test_several_processes_mixed_precision_and_unlisted_labels_are_refused(emulated):
    """(The trainer cannot change accelerate's precision within one test process: these are asked directly.)"""
    cfg = load_config(None, base=TINY)
    model = build_model("mlp", num_classes=4, in_channels=1, input_shape=(1, 8), batch_norm=True)
    loss = build_loss("ce")
    cpu = torch.device("cpu")
    assert "runs in one process (this run has 2)" in graph_problem(cfg, cpu, 2, model, loss, True)
    assert "does not list its targets" in graph_problem(cfg, cpu, 1, model, loss, False)
    bf16 = load_config(None, base=deep_merge(TINY, {"run": {"mixed_precision": "bf16"}}))
    assert "needs run.mixed_precision=no" in graph_problem(bf16, cpu, 1, model, loss, True)
    assert graph_problem(cfg, cpu, 1, model, loss, True) is None


# --- the GPU check's comparison (experiments/benchmark/graph_equivalence.py), here with the emulator ---------------

@pytest.mark.parametrize("case", ["focal", "jvp_every_2"])
def test_the_gpu_checks_comparison_finds_the_small_resnet_equal_bit_for_bit(emulated, case):
    from experiments.benchmark.graph_equivalence import compare

    row = compare(case, 8, torch.device("cpu"), capture=capture)
    assert row["bitwise_equal"] and row["max_rel_diff"] == 0.0
    assert row["replayed"] == (5 if case == "focal" else 2)  # every 2: 3 warm-ups of each kind first


def test_the_gpu_checks_comparison_sees_a_replay_that_misses_its_inputs(emulated, monkeypatch):
    """The comparison can fail: replays that never receive the new batch end elsewhere."""
    from experiments.benchmark.graph_equivalence import compare

    monkeypatch.setattr(torch, "_foreach_copy_", lambda targets, sources: None)
    row = compare("focal", 6, torch.device("cpu"), capture=capture)
    assert not row["bitwise_equal"] and row["max_rel_diff"] > 1e-6
