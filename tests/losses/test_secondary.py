"""Primary + β·secondary: the warm-up schedule, the value, "none" reduction, the presets' defaults."""

import pytest
import torch
import torch.nn.functional as F

from metacal import losses, objectives


def _batch(n=16, k=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (2 * torch.randn(n, k, generator=g, dtype=torch.float64)).requires_grad_(True), \
        torch.randint(0, k, (n,), generator=g)


def _mdca_by_hand(z, y):
    """(1/K) Σ_c |mean_i p_ic − mean_i 1[y_i = c]| (MDCA, Hebbalaguppe et al. 2022)."""
    p = F.softmax(z, -1)
    return (p.mean(0) - F.one_hot(y, p.shape[1]).to(p.dtype).mean(0)).abs().mean()


def test_secondary_weight_is_off_before_warmup_and_on_after():
    z, y = _batch()
    loss = losses.build("mdca", primary="ce", beta=2.0, warmup_epochs=3)
    ce = F.cross_entropy(z, y)
    for epoch in (0, 1, 2):
        loss.set_epoch(epoch)
        assert loss.secondary_weight() == 0.0
        torch.testing.assert_close(loss(z, y), ce)
    for epoch in (3, 10):
        loss.set_epoch(epoch)
        assert loss.secondary_weight() == 2.0
        torch.testing.assert_close(loss(z, y), ce + 2.0 * _mdca_by_hand(z, y))


def test_reduction_none_adds_batch_term_to_every_sample():
    z, y = _batch(seed=1)
    loss = losses.build("sbece", beta=0.5, reduction="none")
    per = loss(z, y)
    sb = objectives.build("sbece")(z, y)
    assert per.shape == (16,)
    torch.testing.assert_close(per, F.cross_entropy(z, y, reduction="none") + 0.5 * sb)
    torch.testing.assert_close(per.mean(), losses.build("sbece", beta=0.5)(z, y))


@pytest.mark.parametrize("name, secondary, beta, primary",
                         [("ce_mmce", "mmce", 8.0, "ce"), ("mdca", "mdca", 1.0, "focal"),
                          ("sbece", "sbece", 1.0, "ce"), ("avuc", "avuc", 1.0, "ce"),
                          ("savuc", "savuc", 1.0, "ce")])
def test_presets_equal_primary_plus_beta_objective(name, secondary, beta, primary):
    z, y = _batch(seed=2)
    loss = losses.build(name)
    assert loss.beta == beta and loss.primary_name == primary and loss.secondary_name == secondary
    prim = losses.build(primary, **({"gamma": 1.0} if primary == "focal" else {}))(z, y)
    torch.testing.assert_close(loss(z, y), prim + beta * objectives.build(secondary)(z, y))


def test_generic_passes_extra_and_hooks_to_primary():
    z, y = _batch(seed=3)
    g = torch.full((16,), 2.0, dtype=torch.float64)
    loss = losses.build("primary_plus_secondary", primary="focal", secondary="savuc", beta=0.3)
    expected = losses.build("focal")(z, y, gamma=g) + 0.3 * loss.secondary(z, y)
    torch.testing.assert_close(loss(z, y, gamma=g), expected)
    flsc = losses.build("primary_plus_secondary", primary="flsc531", secondary="mdca")
    flsc.set_epoch(120)
    assert flsc.primary.epoch == 120 and flsc.primary.current_gamma() == 3.0


def test_bad_configuration():
    with pytest.raises(ValueError, match="primary_params"):
        losses.build("mdca", primary_params={"reduction": "none"})
    with pytest.raises(ValueError, match="warmup"):
        losses.build("avuc", warmup_epochs=-1)
    with pytest.raises(ValueError, match="sbece"):
        losses.build("sbece", secondary="mdca")
    with pytest.raises(KeyError):
        losses.build("primary_plus_secondary", secondary="nope")
