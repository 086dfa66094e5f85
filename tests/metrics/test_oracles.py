"""Independent oracles on random inputs (confidence < 1): torchmetrics, netcal, relplot, the SECE objective."""

import numpy as np
import pytest
import torch

import metacal.metrics as M


def random_predictions(n=1500, k=7, scale=2.0, seed=1, calibrated=True):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, k, generator=g, dtype=torch.float64) * scale
    probs = z.softmax(1)
    source = probs if calibrated else torch.full_like(probs, 1.0 / k)
    labels = torch.multinomial(source, 1, generator=g).squeeze(1)
    return probs, labels


@pytest.mark.parametrize("num_bins", [10, 15])
@pytest.mark.parametrize("seed", [0, 1])
def test_ece_mce_rmsce_match_torchmetrics(num_bins, seed):
    from torchmetrics.functional.classification import multiclass_calibration_error as tm

    probs, labels = random_predictions(seed=seed)
    assert probs.max() < 1.0  # torchmetrics would open an extra bin for exactly 1.0
    k = probs.shape[1]
    # torchmetrics computes in float32 → agreement to ~1e-7
    assert M.ece(probs, labels, num_bins).item() == pytest.approx(tm(probs, labels, k, num_bins, "l1").item(), abs=1e-6)
    assert M.mce(probs, labels, num_bins).item() == pytest.approx(
        tm(probs, labels, k, num_bins, "max").item(), abs=1e-6
    )
    # torchmetrics' l2 = sqrt(Σ_b (n_b/N)(A_b − C_b)²), i.e. our RMSCE (Karandikar et al. 2021, eq. 6, p = 2)
    assert M.rmsce(probs, labels, num_bins).item() == pytest.approx(
        tm(probs, labels, k, num_bins, "l2").item(), abs=1e-6
    )


@pytest.mark.parametrize("num_bins", [10, 15])
def test_ece_mce_match_netcal(num_bins):
    from netcal.metrics import ECE, MCE

    probs, labels = random_predictions(seed=3, k=5)
    p, y = probs.numpy(), labels.numpy()
    assert M.ece(probs, labels, num_bins).item() == pytest.approx(ECE(num_bins).measure(p, y), abs=1e-6)
    assert M.mce(probs, labels, num_bins).item() == pytest.approx(MCE(num_bins).measure(p, y), abs=1e-6)


def test_smece_matches_relplot():
    import relplot

    probs, labels = random_predictions(seed=4)
    conf, correct = probs.max(1).values.numpy(), (probs.argmax(1) == labels).double().numpy()
    assert M.smece(probs, labels) == pytest.approx(relplot.smECE(conf, correct), abs=1e-9)
    # an over-confident model has a clearly larger smECE than a calibrated one
    hot = (torch.log(probs) * 3).softmax(1)
    assert M.smece(hot, labels) > M.smece(probs, labels) + 0.1


def test_sece_metric_is_the_objectives_sece_with_hard_accuracy_and_chunking_agrees():
    from metacal.objectives.sece import sece_from_confidence
    from metacal.metrics.smooth import sece_chunked

    probs, labels = random_predictions(n=600, seed=5)
    conf, _, correct = M.top_label(probs, labels)
    ref = sece_from_confidence(conf, correct, 0.01).item()
    assert M.sece_metric(probs, labels).item() == pytest.approx(ref, abs=1e-12)
    assert sece_chunked(conf, correct, 0.01, chunk=97).item() == pytest.approx(ref, abs=1e-12)


def _kde_ece_numpy(conf, correct, h, grid_size):
    """Independent loop-based KDE-ECE (reflected triweight, KDEpy std-convention bandwidth)."""
    radius = 3.0 * h
    x = np.linspace(0.0, 1.0, grid_size)

    def density(points):
        out = np.zeros_like(x)
        for centre in np.concatenate([points, -points, 2.0 - points]):
            u = (x - centre) / radius
            out += np.where(np.abs(u) <= 1, 35 / 32 * (1 - u**2) ** 3, 0.0)
        return out

    f_all, f_cor = density(conf), density(conf[correct > 0.5])
    acc = np.minimum(np.divide(f_cor, f_all, out=np.zeros_like(x), where=f_all > 0), 1.0)
    return np.trapezoid(np.abs(x - acc) * f_all, x) / np.trapezoid(f_all, x)


def test_kde_ece_against_loop_implementation_and_bandwidth_rule():
    probs, labels = random_predictions(n=300, seed=6)
    conf, _, correct = M.top_label(probs, labels)
    c, a = conf.numpy(), correct.numpy()
    h = np.std(c[a > 0.5]) * (2 * len(c)) ** -0.2  # std(conf of correct)·(2N)^(−1/5), ddof 0
    from metacal.metrics.kde import kde_bandwidth

    assert kde_bandwidth(conf, correct) == pytest.approx(h, rel=1e-12)
    assert M.kde_ece(probs, labels).item() == pytest.approx(_kde_ece_numpy(c, a, h, 2049), abs=1e-9)


def test_kde_ece_limits():
    # all confidences in a narrow band around .9 with accuracy exactly .5 (alternating): acc(x) = f_cor/f_all
    # is ≈ .5 wherever there is mass, so KDE-ECE ≈ |.9 − .5| = .4 (band width ±.01 → error ≲ .01)
    conf = 0.9 + 0.01 * torch.linspace(-1, 1, 400, dtype=torch.float64)
    correct = (torch.arange(400) % 2).double()
    assert M.kde_ece_from_confidence(conf, correct).item() == pytest.approx(0.4, abs=0.01)
    # calibrated samples: labels drawn from the confidences → KDE-ECE small
    g = torch.Generator().manual_seed(0)
    conf = 0.3 + 0.7 * torch.rand(4000, generator=g, dtype=torch.float64)
    correct = (torch.rand(4000, generator=g, dtype=torch.float64) < conf).double()
    assert M.kde_ece_from_confidence(conf, correct).item() < 0.02
