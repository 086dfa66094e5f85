"""Temperature scaling: NLL fit, ECE-grid fit (brute force check), SB-ECE fit, state_dict round trip."""

import pytest
import torch

import metacal.metrics as M
from metacal.objectives import sbece
from metacal.posthoc import TemperatureScaling, default_grid


def overconfident(n=1500, k=8, true_scale=1.5, sharpen=2.5, seed=0):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, k, generator=g, dtype=torch.float64) * true_scale
    labels = torch.multinomial(z.softmax(1), 1, generator=g).squeeze(1)
    return z * sharpen, labels


def nll_at(logits, labels, t):
    return torch.nn.functional.cross_entropy(logits / t, labels).item()


@pytest.mark.parametrize("sharpen", [0.4, 1.0, 2.5])
def test_nll_fit_recovers_temperature_and_never_raises_nll(sharpen):
    logits, labels = overconfident(sharpen=sharpen, n=4000)
    ts = TemperatureScaling("nll").fit(logits, labels)
    # the data were generated calibrated at T = sharpen
    assert ts.temperature == pytest.approx(sharpen, rel=0.1)
    assert nll_at(logits, labels, ts.temperature) <= nll_at(logits, labels, 1.0) + 1e-12
    # stationary point: NLL at T·(1 ± 1%) is not lower
    for f in (0.99, 1.01):
        assert nll_at(logits, labels, ts.temperature) <= nll_at(logits, labels, ts.temperature * f) + 1e-12


def test_nll_fit_never_raises_nll_on_many_random_sets():
    for seed in range(6):
        g = torch.Generator().manual_seed(100 + seed)
        logits = torch.randn(200, 5, generator=g) * float(torch.rand(1, generator=g) * 6)
        labels = torch.randint(0, 5, (200,), generator=g)
        t = TemperatureScaling("nll").fit(logits, labels).temperature
        assert nll_at(logits.double(), labels, t) <= nll_at(logits.double(), labels, 1.0) + 1e-9


def test_ece_grid_picks_the_brute_force_minimiser():
    logits, labels = overconfident(n=1200, seed=1)
    ts = TemperatureScaling("ece_grid", num_bins=15).fit(logits, labels)
    grid = [round(0.1 * i, 1) for i in range(1, 101)]
    eces = [M.ece(torch.softmax(logits / t, 1), labels, 15).item() for t in grid]
    best = min(range(len(grid)), key=lambda i: (eces[i], i))
    assert ts.temperature == pytest.approx(grid[best], abs=1e-12)
    assert M.ece(ts.transform(logits), labels).item() == pytest.approx(eces[best], abs=1e-12)
    assert M.ece(ts.transform(logits), labels).item() < M.ece(logits.softmax(1), labels).item()
    assert default_grid()[0].item() == pytest.approx(0.1) and default_grid()[-1].item() == pytest.approx(10.0)
    assert len(default_grid()) == 100


def test_ece_grid_custom_grid():
    logits, labels = overconfident(n=800, seed=2)
    fine = torch.arange(200, 301) / 100.0  # 2.00 … 3.00 step 0.01
    ts = TemperatureScaling("ece_grid", grid=fine).fit(logits, labels)
    eces = torch.tensor([M.ece(torch.softmax(logits / float(t), 1), labels).item() for t in fine])
    assert ts.temperature == pytest.approx(float(fine[int(eces.argmin())]), abs=1e-12)


def test_sbece_grid_minimises_the_objectives_sbece():
    logits, labels = overconfident(n=800, seed=3)
    ts = TemperatureScaling("sbece").fit(logits, labels)
    values = torch.stack([sbece(logits / float(t), labels) for t in default_grid()])
    assert ts.temperature == pytest.approx(float(default_grid()[int(values.argmin())]), abs=1e-12)
    assert 1.5 < ts.temperature < 4.0  # data generated calibrated at T = 2.5


def test_state_dict_round_trip_and_transform():
    logits, labels = overconfident(n=500, seed=4)
    ts = TemperatureScaling("nll").fit(logits, labels)
    state = ts.state_dict()
    other = TemperatureScaling()
    other.load_state_dict(state)
    assert other.temperature == ts.temperature and other.method == "nll"
    new = torch.randn(10, 8, dtype=torch.float64)
    torch.testing.assert_close(other.transform(new), torch.softmax(new / ts.temperature, 1))
    assert other.transform(new.float()).dtype == torch.float32


def test_bad_inputs():
    with pytest.raises(ValueError, match="method"):
        TemperatureScaling("platt")
    with pytest.raises(ValueError, match="NaN"):
        TemperatureScaling().fit(torch.tensor([[0.0, float("nan")]]), torch.tensor([0]))
    with pytest.raises(ValueError, match="targets"):
        TemperatureScaling().fit(torch.zeros(3, 2), torch.tensor([0, 1, 2]))


def test_probabilities_as_logits_are_refused_and_real_logits_are_not():
    g = torch.Generator().manual_seed(7)
    z = torch.randn(500, 4, generator=g, dtype=torch.float64) * 3.0
    y = torch.multinomial(torch.softmax(z / 3.0, 1), 1, generator=g).squeeze(1)
    message = (r"^temperature scaling got probabilities \(every row in \[0, 1\] summing to 1\); pass logits, or "
               r"log-probabilities \(ln p\) if only probabilities exist$")
    with pytest.raises(ValueError, match=message):
        TemperatureScaling().fit(torch.softmax(z, 1), y)
    with pytest.raises(ValueError, match=message):
        TemperatureScaling().fit(torch.softmax(z, 1).float(), y)  # float32 rows sum to 1 within 1e-6 too
    # rows in [0, 1] that do not sum to 1, or a single row of a single class, are not taken for probabilities
    TemperatureScaling().fit(torch.softmax(z, 1) * 0.9, y)
    TemperatureScaling().fit(torch.tensor([[1.0]]), torch.tensor([0]))
    # ln p is accepted and gives the temperature of the logits (softmax(ln p / T) = softmax(z / T))
    assert TemperatureScaling().fit(torch.log_softmax(z, 1), y).temperature == pytest.approx(
        TemperatureScaling().fit(z, y).temperature, rel=1e-6)


@pytest.mark.parametrize("case", ["binary", "one_class", "one_hot"])
def test_edge_cases_give_finite_temperature_and_probabilities(case):
    g = torch.Generator().manual_seed(8)
    z = torch.randn(300, 2 if case == "binary" else 3, generator=g, dtype=torch.float64) * 4.0
    y = torch.multinomial(torch.softmax(z / 2.0, 1), 1, generator=g).squeeze(1)
    if case == "one_class":
        y = torch.zeros_like(y)
    if case == "one_hot":  # confidence exactly 1.0: softmax of ±1e4 logits
        z = torch.nn.functional.one_hot(z.argmax(1), 3).double() * 1e4
    ts = TemperatureScaling().fit(z, y)
    probs = ts.transform(z)
    assert 1e-2 <= ts.temperature <= 1e2 and bool(torch.isfinite(probs).all())
    torch.testing.assert_close(probs.sum(1), torch.ones(300, dtype=torch.float64), atol=1e-12, rtol=0)
    nll = torch.nn.functional.cross_entropy(z / ts.temperature, y)
    assert bool(torch.isfinite(nll)) and nll <= torch.nn.functional.cross_entropy(z, y) + 1e-12
    if case == "binary":  # labels drawn at temperature 2 from ×4 logits: T near 2
        assert 1.5 < ts.temperature < 2.7
