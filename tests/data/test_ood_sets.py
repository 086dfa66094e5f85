"""OOD sets: the scikit-learn digits as far-OOD images / vectors, and the in_classes semantic split."""

import pytest
import torch

from metacal.data import build
from metacal.data.ood_sets import ood_inputs
from metacal.data.class_split import RelabeledSubset
from metacal.data.ood_digits import digits_as_images, digits_as_vectors
from tests.installed import requires_fashion_mnist



def test_digits_as_images_and_vectors():
    x = digits_as_images(3, 32, 32)
    assert x.shape == (1797, 3, 32, 32) and float(x.min()) >= 0 and float(x.max()) <= 1
    assert torch.equal(x[:, 0], x[:, 2])  # grey replicated
    assert float(x.max()) == pytest.approx(1.0, abs=0.05)  # value 16 → 1
    same = digits_as_images(1, 8, 8)  # 8 → 8: bilinear at the pixel centres is the identity
    from sklearn.datasets import load_digits
    assert torch.allclose(same[:, 0], torch.tensor(load_digits().images, dtype=torch.float32) / 16, atol=1e-6)
    v = digits_as_vectors((1, 40))
    assert v.shape == (1797, 1, 40)
    assert float(v.mean()) == pytest.approx(0.0, abs=1e-5) and float(v.std()) == pytest.approx(1.0, abs=1e-4)


def test_digits_are_model_ready_for_images(fashion_gz_dir):
    tiny = build("fashion_mnist", root=fashion_gz_dir.root)  # random pixels: only the digits' normalisation matters
    x = ood_inputs(tiny, "digits")
    assert x.shape == (1797, 1, 28, 28)
    assert float(x.min()) == pytest.approx(-0.2860 / 0.3530, abs=1e-5)  # black background → (0 − mean)/std


def test_in_classes_on_a_gaussian_mixture():
    b = build("gaussian_mixture", n_train=2000, n_test=1000, in_classes=[9, 8, 0, 1, 2, 3, 4, 5])
    full = build("gaussian_mixture", n_train=2000, n_test=1000)
    assert b.num_classes == 8 and b.classes == ["9", "8", "0", "1", "2", "3", "4", "5"]
    order = torch.tensor([9, 8, 0, 1, 2, 3, 4, 5])
    for split in ("train", "val", "meta_val", "test"):
        part, whole = getattr(b, split), getattr(full, split)
        assert isinstance(part, RelabeledSubset)
        original = whole.targets
        kept = torch.isin(original, order)
        assert len(part) == int(kept.sum())
        for new, old in enumerate(order.tolist()):  # counts per class survive the remapping c_i → i
            assert int((part.targets == new).sum()) == int((original == old).sum())
        x, y = part[0]
        assert int(y) == int(part.targets[0]) and 0 <= int(y) < 8
    ood = b.ood
    held = full.test.targets[~torch.isin(full.test.targets, order)]
    assert sorted(ood.targets.unique().tolist()) == [6, 7] and len(ood) == len(held)
    post = b.test.posteriors
    assert post.shape == (len(b.test), 8) and torch.allclose(post.sum(1), torch.ones(len(b.test)))
    x = ood_inputs(b, "held_out_classes")
    assert torch.equal(x, full.test.dataset.inputs[ood.index])


def test_in_classes_with_train_subset_counts_kept_samples():
    b = build("gaussian_mixture", n_train=2000, n_test=100, in_classes=[0, 1, 2], train_subset=50)
    assert len(b.train) == 50 and isinstance(b.train, RelabeledSubset) and int(b.train.targets.max()) <= 2


@pytest.mark.parametrize("bad, match", [([0, 0, 1], "listed more than once"), ([0, 10], "outside 0..9"),
                                        ([3], "at least 2"), (list(range(10)), "at least 2 and at most 9"),
                                        ("0,1", "list of class indices")])
def test_bad_in_classes(bad, match):
    with pytest.raises(ValueError, match=f"in_classes.*{match}|{match}.*in_classes|in_classes"):
        build("gaussian_mixture", n_train=100, n_test=20, in_classes=bad)
    with pytest.raises(ValueError, match=match):
        build("gaussian_mixture", n_train=100, n_test=20, in_classes=bad)


def test_held_out_classes_need_in_classes():
    b = build("gaussian_mixture", n_train=100, n_test=20)
    with pytest.raises(ValueError, match="in_classes"):
        ood_inputs(b, "held_out_classes")
    with pytest.raises(ValueError, match="did you mean digits"):
        ood_inputs(b, "digit")
    assert ood_inputs(b, "digits").shape == (1797, 1, 10)


@requires_fashion_mnist
def test_in_classes_on_fashion_mnist():
    b = build("fashion_mnist", in_classes=list(range(8)))
    assert b.num_classes == 8 and b.classes[-1] == "Sneaker"
    assert len(b.test) == 8000 and len(b.ood) == 2000  # 1,000 test images per class
    assert sorted(b.ood.targets.unique().tolist()) == [8, 9]
    assert torch.bincount(b.test.targets).tolist() == [1000] * 8
    x = ood_inputs(b, "held_out_classes")
    assert torch.equal(x[:5], torch.stack([b.ood[i][0] for i in range(5)]))
