"""Label noise and the trusted held-out set (metacal/data/label_noise.py): hand-computed flips, determinism, the
split left alone, clean test labels, the trusted cut, the loaders serving the carried labels, and the error lines."""

import pytest
import torch

from metacal import data
from metacal.data.label_noise import draws, flip, transitions
from metacal.data.loaders import InfiniteLoader, make_loader


def gm(**options):
    return data.build("gaussian_mixture", seed=0, n_train=20_000, n_test=10_000, **options)


def test_flip_symmetric_by_hand():
    # K = 4; u < 0.5 flips: samples 0, 2, 4; (y + offset) mod 4
    labels = torch.tensor([0, 1, 2, 3, 3, 1])
    u = torch.tensor([0.1, 0.9, 0.49, 0.5, 0.0, 0.7], dtype=torch.float64)
    offset = torch.tensor([1, 2, 3, 1, 2, 3])
    assert flip(labels, u, offset, 0.5, "symmetric", 4).tolist() == [1, 1, 1, 3, 1, 1]


def test_flip_pair_by_hand():
    # pair: y → y + 1 mod K whatever the offset; u ≥ rate keeps the label
    labels = torch.tensor([0, 1, 2, 3, 3, 1])
    u = torch.tensor([0.1, 0.9, 0.29, 0.3, 0.0, 0.2], dtype=torch.float64)
    offset = torch.tensor([3, 3, 3, 3, 3, 3])
    assert flip(labels, u, offset, 0.3, "pair", 4).tolist() == [1, 1, 3, 3, 0, 2]


def test_rate_zero_flips_nothing_and_symmetric_never_keeps_a_flipped_label():
    labels = torch.arange(10) % 5
    u, offset = draws(10, 5, draw_seed=3, part=0)
    assert torch.equal(flip(labels, u, offset, 0.0, "symmetric", 5), labels)
    flipped = flip(labels, torch.zeros(10, dtype=torch.float64), offset, 0.5, "symmetric", 5)
    assert (flipped != labels).all()  # offset in 1..K−1: never back to the same class


def test_transitions_counts_by_hand():
    clean, noisy = torch.tensor([0, 0, 1, 2, 2, 2]), torch.tensor([0, 1, 1, 0, 2, 1])
    assert transitions(clean, noisy, 3) == [[1, 1, 0], [0, 1, 0], [1, 1, 1]]


@pytest.mark.parametrize("kind", ["symmetric", "pair"])
def test_realised_rate_and_structure(kind):
    b = gm(noise_rate=0.4, noise_kind=kind, draw_seed=1)
    record = b.info["label_noise"]
    assert abs(record["realised"]["train"] - 0.4) < 0.01
    assert record["realised"]["train"] == pytest.approx(float((b.train.labels != b.train.clean_targets).double().mean()))
    t = torch.tensor(record["transitions"]["train"])
    assert int(t.sum()) == len(b.train)
    k = b.num_classes
    off_diagonal = t - torch.diag(torch.diag(t))
    if kind == "pair":  # every flip goes to the next class
        nxt = torch.tensor([[1 if j == (i + 1) % k else 0 for j in range(k)] for i in range(k)])
        assert int((off_diagonal * (1 - nxt)).sum()) == 0
    else:  # spread over all other classes: each off-diagonal cell near r·n_i/(K−1)
        expected = 0.4 * t.sum(1, keepdim=True).double() / (k - 1)
        assert (off_diagonal.double() - expected).abs()[off_diagonal > 0].max() < 5 * expected.max().sqrt()


def test_same_seed_same_flips_other_seed_others_and_split_untouched():
    plain = gm()
    a, b, c = gm(noise_rate=0.3, draw_seed=5), gm(noise_rate=0.3, draw_seed=5), gm(noise_rate=0.3, draw_seed=6)
    for name in ("train", "val", "meta_val", "test"):
        assert torch.equal(getattr(a, name).index, getattr(plain, name).index)  # the same samples in each split
    assert torch.equal(a.train.labels, b.train.labels)
    assert torch.equal(a.noisy_test_labels, b.noisy_test_labels)
    assert not torch.equal(a.train.labels, c.train.labels)
    assert torch.equal(a.train.clean_targets, plain.train.targets)


def test_the_flip_of_a_sample_does_not_depend_on_its_split():
    # another split seed puts samples in other splits; a sample's noisy label stays its own
    a = gm(noise_rate=0.3, draw_seed=2)
    b = data.build("gaussian_mixture", seed=0, n_train=20_000, n_test=10_000, split_seed=9, noise_rate=0.3,
                   draw_seed=2)
    label_a = torch.full((20_000,), -1)
    label_b = torch.full((20_000,), -1)
    for bundle, out in ((a, label_a), (b, label_b)):
        for name in ("train", "val", "meta_val"):
            split = getattr(bundle, name)
            out[split.index] = split.labels
    assert torch.equal(label_a, label_b)


def test_test_set_keeps_clean_labels_and_gets_a_noisy_view():
    plain, noisy = gm(), gm(noise_rate=0.2, noise_kind="pair", draw_seed=0)
    assert torch.equal(noisy.test.targets, plain.test.targets)
    view = noisy.noisy_test_labels
    assert abs(float((view != plain.test.targets).double().mean()) - 0.2) < 0.015
    assert torch.equal(view[view != plain.test.targets], (plain.test.targets[view != plain.test.targets] + 1) % 10)
    assert plain.noisy_test_labels is None


def test_trusted_keeps_clean_held_out_labels_cut_to_n():
    b = gm(noise_rate=0.4, trusted=300, draw_seed=0)
    assert (len(b.val), len(b.meta_val)) == (150, 150)
    assert b.info["trusted"] == {"n": 300, "val": 150, "meta_val": 150}
    plain = gm()
    for name in ("val", "meta_val"):
        split = getattr(b, name)
        assert not hasattr(split, "clean_targets")
        assert torch.equal(split.targets, plain.train.dataset.targets[split.index])  # clean
        assert torch.isin(split.index, getattr(plain, name).index).all()  # drawn from that split
    assert set(b.info["label_noise"]["realised"]) == {"train", "test_view"}
    assert torch.equal(b.train.labels, gm(noise_rate=0.4, draw_seed=0).train.labels)  # train as without trusted


def test_trusted_divides_in_proportion_to_the_held_out_sizes():
    b = data.build("gaussian_mixture", seed=0, n_train=2000, n_test=10, split=[0.7, 0.2, 0.1], trusted=90)
    assert (len(b.val), len(b.meta_val)) == (60, 30)


def test_loaders_serve_the_noisy_labels():
    b = gm(noise_rate=0.4, draw_seed=0)
    for batched in (True, False):
        loader = make_loader(b.train, 4096, shuffle=False, batched=batched)
        labels = torch.cat([y for _, y in loader])
        assert torch.equal(labels, b.train.labels)
    x, y = next(iter(InfiniteLoader(b.meta_val, len(b.meta_val), seed=0)))
    assert torch.equal(torch.bincount(y, minlength=10), torch.bincount(b.meta_val.labels, minlength=10))


def test_batched_loader_serves_relabelled_classes():
    # a subset of classes is relabelled 0..k−1; the whole-batch path served the original labels before
    b = data.build("gaussian_mixture", seed=0, n_train=2000, n_test=100, in_classes=[2, 3])
    labels = torch.cat([y for _, y in make_loader(b.train, 256, shuffle=False, batched=True)])
    assert labels.max() == 1 and torch.equal(labels, b.train.targets)


def test_noise_with_in_classes_flips_among_the_kept_classes():
    b = data.build("gaussian_mixture", seed=0, n_train=4000, n_test=100, in_classes=[7, 2, 5], noise_rate=0.5)
    assert set(b.train.labels.tolist()) == {0, 1, 2}
    assert torch.equal(b.train.clean_targets, data.build("gaussian_mixture", seed=0, n_train=4000, n_test=100,
                                                         in_classes=[7, 2, 5]).train.targets)


def test_posteriors_survive_the_noise():
    b = gm(noise_rate=0.2)
    assert torch.equal(b.train.posteriors, gm().train.posteriors)


@pytest.mark.parametrize("options, message", [
    ({"noise_rate": 1.0}, "noise_rate must be a number in [0, 1)"),
    ({"noise_rate": -0.1}, "noise_rate must be a number in [0, 1)"),
    ({"noise_rate": "0.2"}, "noise_rate must be a number in [0, 1)"),
    ({"noise_rate": 0.2, "noise_kind": "symetric"}, "did you mean symmetric"),
    ({"trusted": -1}, "trusted must be a whole number"),
    ({"trusted": 2.5}, "trusted must be a whole number"),
    ({"trusted": True}, "trusted must be a whole number"),
    ({"trusted": 5000}, "trusted 5000 is larger than the held-out pool it is drawn from (val + meta-val = 400"),
])
def test_bad_values_are_one_line(options, message):
    with pytest.raises(ValueError) as err:
        data.build("gaussian_mixture", seed=0, n_train=2000, n_test=10, **options)
    assert message in str(err.value) and "\n" not in str(err.value)
