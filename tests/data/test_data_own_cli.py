"""A user's own data through the trainer CLI with the shipped configs/own_data/ configs (1 epoch, 2 steps):
``arrays`` and ``image_folder`` with CE and FLγ-SECE, a run without a test set, and every bad input as
one line on stderr, exit 2, no run directory left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs" / "own_data"
TINY = ["schedule.epochs=1", "schedule.milestones=[1]", "run.max_steps_per_epoch=2", "run.torch_threads=1",
        "logging.tensorboard=false", "logging.progress_bar=false", "run.save_checkpoints=false"]


def write_arrays(path: Path, n: int = 50, n_test: int | None = 12, **replace) -> Path:
    rng = np.random.default_rng(3)
    arrays = {"x_train": rng.normal(size=(n, 16)).astype(np.float32), "y_train": np.arange(n) % 4}
    if n_test:
        arrays.update(x_test=rng.normal(size=(n_test, 16)).astype(np.float32), y_test=np.arange(n_test) % 4)
    arrays.update(replace)
    np.savez(path, **{k: v for k, v in arrays.items() if v is not None})
    return path


def write_images(root: Path, test: bool = True) -> Path:
    """3 classes × 10 training (and × 2 test) 6×6 RGB PNGs."""
    rng = np.random.default_rng(4)
    for split, n in (("train", 10), ("test", 2)) if test else (("train", 10),):
        for name in ("cat", "dog", "emu"):
            (root / split / name).mkdir(parents=True)
            for i in range(n):
                Image.fromarray(rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)).save(root / split / name / f"{i}.png")
    return root


@pytest.fixture
def cli(capsys):
    """cli(config, *overrides, run_dir) → (exit code, stdout, stderr) of the trainer, in this process."""
    from metacal.train.cli import main

    def run(config: Path, run_dir: Path, *overrides: str) -> tuple[int, str, str]:
        code = main(["--config", str(config), "--run-dir", str(run_dir), "--set", *TINY, *overrides])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


@pytest.mark.slow
def test_arrays_ce_as_a_user_types_it(tmp_path):
    """``python -m metacal.train --config … --set data.name=arrays --set data.root=…`` in a fresh process."""
    path = write_arrays(tmp_path / "emb.npz")
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "metacal.train", "--config", str(CONFIGS / "arrays" / "ce.yaml"),
                           "--set", "data.name=arrays", "--set", f"data.root={path}", "--set", *TINY,
                           "data.batch_size=8", "--run-dir", str(run_dir)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert (metrics["val"]["n"], metrics["test"]["n"], metrics["test"]["num_classes"]) == (5, 12, 4)
    assert metrics["test_after_ts"]["temperature"] > 0


def test_arrays_flgamma_sece(cli, tmp_path):
    path = write_arrays(tmp_path / "emb.npz")
    code, out, err = cli(CONFIGS / "arrays" / "flgamma_sece.yaml", tmp_path / "run", f"data.root={path}",
                         "data.batch_size=8", "meta.batch_size=4")
    assert code == 0, err
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert (metrics["val"]["n"], metrics["test"]["n"]) == (5, 12)
    assert metrics["test"]["gamma_mean"] > 0  # the γ-Net ran on the test features
    assert "test at that epoch" in out


def test_image_folder_ce_with_test(cli, tmp_path):
    root = write_images(tmp_path / "pets")
    code, out, err = cli(CONFIGS / "image_folder" / "ce.yaml", tmp_path / "run", f"data.root={root}",
                         "data.batch_size=8")
    assert code == 0, err
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert (metrics["val"]["n"], metrics["test"]["n"], metrics["test"]["num_classes"]) == (3, 6, 3)


def test_image_folder_flgamma_sece_without_test_set(cli, tmp_path):
    root = write_images(tmp_path / "pets", test=False)
    run_dir = tmp_path / "run"
    code, out, err = cli(CONFIGS / "image_folder" / "flgamma_sece.yaml", run_dir, f"data.root={root}",
                         "data.batch_size=8", "meta.batch_size=2")
    assert code == 0, err
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["test"] is None and metrics["test_after_ts"] is None and metrics["val"]["n"] == 3
    assert sorted(p.name for p in (run_dir / "predictions").iterdir()) == ["val.npz"]
    assert (run_dir / "reliability.png").is_file() and "no test set; validation at that epoch" in out


def _empty_class(tmp_path):
    root = write_images(tmp_path / "pets")
    (root / "train" / "fox").mkdir()
    return "image_folder", root, [str(root / "train" / "fox"), "empty class folder"]


def _corrupt_image(tmp_path):
    root = write_images(tmp_path / "pets")
    (root / "train" / "dog" / "4.png").write_bytes(b"\x89PNG broken")
    return "image_folder", root, [str(root / "train" / "dog" / "4.png"), "cannot read the image"]


def _label_out_of_range(tmp_path):
    path = write_arrays(tmp_path / "a.npz", y_test=np.array([0, 1, 2, 3, 4] + [0] * 7))
    return "arrays", path, [f"{path}: y_test[4] = 4 is outside 0..3 (num_classes 4)"]


def _non_integer_label(tmp_path):
    path = write_arrays(tmp_path / "a.npz", y_train=np.arange(50) % 4 + 0.5)
    return "arrays", path, [str(path), "non-integer label 0.5 at index 0"]


def _missing_key(tmp_path):
    path = write_arrays(tmp_path / "a.npz", n_test=None, y_train=None)
    return "arrays", path, [str(path), "no array 'y_train'"]


def _length_mismatch(tmp_path):
    path = write_arrays(tmp_path / "a.npz", y_train=np.arange(49) % 4)
    return "arrays", path, [str(path), "x_train has 50 rows but y_train has 49 labels"]


def _missing_root(tmp_path):
    return "image_folder", tmp_path / "nowhere", [str(tmp_path / "nowhere"), "not found"]


@pytest.mark.parametrize("make", [_empty_class, _corrupt_image, _label_out_of_range, _non_integer_label, _missing_key,
                                  _length_mismatch, _missing_root], ids=lambda f: f.__name__[1:])
def test_bad_input_is_one_line_exit_2_and_no_run_dir(cli, tmp_path, make):
    name, root, fragments = make(tmp_path)
    run_dir = tmp_path / "run"
    code, out, err = cli(CONFIGS / name / "ce.yaml", run_dir, f"data.root={root}")
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert not run_dir.exists()


def _labels(n: int = 50, **changes: int) -> np.ndarray:
    y = np.arange(n) % 4
    for index, label in changes.items():
        y[int(index.removeprefix("at"))] = label
    return y


@pytest.mark.parametrize("y_train, overrides, expected", [
    (_labels(at17=12), [], "y_train[17] = 12 is outside 0..3 (classes 4..11 never occur); fix the label, or set "
                           "num_classes=13 (data.options.num_classes) if classes really lack training samples"),
    (_labels(at17=4, at30=7), ["data.options.num_classes=4"], "y_train[17] = 4 is outside 0..3 (num_classes 4; "
                                                              "2 labels outside)"),
    (_labels(at3=-1), [], "y_train[3] = -1 is outside 0..3 (labels count from 0)"),
    (_labels(at3=-1), ["data.options.num_classes=5"], "y_train[3] = -1 is outside 0..4 (num_classes 5)"),
], ids=["stray label", "above num_classes", "negative", "negative with num_classes"])
def test_a_label_out_of_range_is_named_with_its_index(cli, tmp_path, y_train, overrides, expected):
    """Not "missing classes": the offending value, its index in y_train and the range, as the CLI prints it."""
    path = write_arrays(tmp_path / "emb.npz", y_train=y_train)
    run_dir = tmp_path / "run"
    code, out, err = cli(CONFIGS / "arrays" / "ce.yaml", run_dir, f"data.root={path}", *overrides)
    assert code == 2 and err == f"error: data (arrays): {path}: {expected}\n", err
    assert not run_dir.exists()


def test_a_plain_imagefolder_root_through_the_cli(cli, tmp_path):
    """--set data.root=my_images/train, a directory of class folders (torchvision's ImageFolder root), is the
    training set itself; it is not searched as my_images/train/train."""
    root = write_images(tmp_path / "my_images")
    run_dir = tmp_path / "run"
    code, out, err = cli(CONFIGS / "image_folder" / "ce.yaml", run_dir, f"data.root={root / 'train'}",
                         "data.batch_size=8")
    assert code == 0, err
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert (metrics["val"]["n"], metrics["val"]["num_classes"], metrics["test"]) == (3, 3, None)


def test_readme_image_folder_flgamma_sece_on_a_small_folder(tmp_path, monkeypatch, capsys):
    """docs/own_data.md's image-folder FLγ-SECE command, as written (meta.batch_size 128 from the config), on a folder
    of 3 × 10 images: the meta batch is clamped to the 3-sample meta-val split with one warning line."""
    import shlex

    import torch
    import torchvision

    from metacal.train.cli import main

    page = (REPO / "docs" / "own_data.md").read_text()
    line = next(ln for ln in page.splitlines() if "image_folder/flgamma_sece.yaml" in ln and "resnet18" in ln)
    argv = shlex.split(line)
    assert argv[:3] == ["python", "-m", "metacal.train"] and "data.root=my_images" in argv
    (tmp_path / "configs").symlink_to(REPO / "configs")
    write_images(tmp_path / "my_images", test=False)
    torch.save(torchvision.models.resnet18().state_dict(), tmp_path / "resnet18.pth")
    monkeypatch.chdir(tmp_path)
    code = main([*argv[3:], "--run-dir", "run", "--set", *TINY])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.err == ("warning: meta.batch_size 128 is larger than the meta-val split (3 samples); using meta "
                       "batches of 3\n")
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["finished"] is True


def test_an_empty_meta_val_split_is_one_line(cli, tmp_path):
    root = write_images(tmp_path / "pets")
    run_dir = tmp_path / "run"
    code, out, err = cli(CONFIGS / "image_folder" / "flgamma_sece.yaml", run_dir, f"data.root={root}",
                         "data.options.split=[0.9,0.1,0.0]")
    assert code == 2 and err == ("error: the meta step needs meta-validation samples, one per process at least (1), "
                                 "but the meta-val split has 0; give it a share with data.options.split (train, val, "
                                 "meta_val fractions; default [0.8, 0.1, 0.1]) and no data.options.fold_meta_val\n"), err
    assert not run_dir.exists()


def test_an_empty_val_split_is_one_line(cli, tmp_path):
    """Without a validation sample no epoch can be evaluated: refused before training, not after the first epoch."""
    path = write_arrays(tmp_path / "emb.npz")
    run_dir = tmp_path / "run"
    code, out, err = cli(CONFIGS / "arrays" / "ce.yaml", run_dir, f"data.root={path}", "data.options.split=[1.0,0,0]")
    assert code == 2 and err == ("error: the validation split is empty (train 50, val 0, meta-val 0): each epoch is "
                                 "evaluated on it; give it a share with data.options.split (train, val, meta_val "
                                 "fractions; default [0.8, 0.1, 0.1]), more data, or metacal.fit(val=...)\n"), err
    assert not run_dir.exists()
