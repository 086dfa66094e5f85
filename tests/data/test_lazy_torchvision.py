"""torchvision is imported by image data only: its import (about 2 s on 2 CPU cores, it loads ``torch._dynamo``)
is not paid by ``--help``, a refused config or a run on vectors (metacal/data/transforms.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

VECTORS = """
import sys
import metacal, metacal.train.cli, metacal.evaluate, metacal.predict
from metacal.data import build
from metacal.data.batched import batched_view, deterministic
bundle = build("gaussian_mixture", n_train=200, n_test=50)
view = batched_view(bundle.train)
x, y = view.__getitems__([0, 1, 2])
assert x.shape == (3, 1, 10) and deterministic(None)
print("torchvision" in sys.modules)
"""

IMAGES = """
import sys
import torch
from metacal.data.batched import batched_view
from metacal.data.image_datasets import ImageArrayDataset
from metacal.data.transforms import eval_transform
images = torch.arange(4 * 2 * 2, dtype=torch.uint8).reshape(4, 1, 2, 2)
view = batched_view(ImageArrayDataset(images, torch.arange(4), eval_transform([0.5], [0.25])))
x, _ = view.__getitems__([1, 3])
assert torch.equal(x, (images[[1, 3]].float() / 255 - 0.5) / 0.25)
print("torchvision" in sys.modules)
"""


def loads_torchvision(code: str) -> bool:
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.split()[-1] == "True"


def test_the_entry_points_and_a_run_on_vectors_leave_torchvision_unloaded():
    assert not loads_torchvision(VECTORS)


def test_image_data_loads_torchvision_and_batches_as_before():  # the probe above can see the import
    assert loads_torchvision(IMAGES)
