"""Crash-safe, resumable checkpoints built on accelerate ``save_state``/``load_state``.

What a checkpoint holds: everything prepared by the Accelerator (model, optimizer) or registered with
``accelerator.register_for_checkpointing`` (scheduler, :class:`TrainState`, a stateful loss — AdaFocal's
bin γ, mixup's generator —, the γ-Net, the meta step with its meta optimiser, the meta-validation
InfiniteLoader position); the RNG states of every process (accelerate's ``random_states_<rank>.pkl``:
python ``random``, numpy, torch CPU and CUDA); ``progress_rank<r>.pt`` — this rank's per-epoch
accumulators (loss sums, step counts, the γ of every sample so far) so that a run resumed mid-epoch
reports the same epoch numbers —; ``config.yaml`` (the resolved config, to refuse an incompatible
resume); ``train_state.json`` (readable counters) and ``MANIFEST.json`` (size and sha256 of every file).
The train sampler needs no state: accelerate's seedable sampler is re-seeded per epoch, and a
mid-epoch resume skips the batches already done with ``accelerator.skip_first_batches``.

Layout and write protocol (``run_dir/checkpoints/``)::

    ckpt-000000120/           a complete checkpoint: global step 120, mid-epoch
    ckpt-000000200-e0005/     a complete checkpoint at the end of epoch 5
    latest -> ckpt-…          relative symlink to the newest complete checkpoint
    best   -> ckpt-…-eNNNN    the end-of-epoch checkpoint of the best validation epoch
    .tmp-ckpt-…/              being written (ignored; removed by the next save)

1. every process writes its files into ``.tmp-<name>/``; 2. the main process writes MANIFEST.json and
train_state.json, fsyncs every file and the directory (:func:`_write_manifest`); 3. ``rename(.tmp-<name>,
<name>)`` + fsync of ``checkpoints/`` (:func:`_publish`); 4. at an improved epoch, ``best`` is switched
atomically (new symlink + ``os.replace``; :func:`_point`); 5. ``latest`` likewise; 6. checkpoints that neither
``latest`` nor ``best`` name are deleted (renamed to ``.tmp-deleted-*`` first; :func:`_prune`). So every
``ckpt-*`` directory is complete, and a kill at any moment leaves at least the previous good checkpoint in place.

Finding the checkpoint to resume from (:func:`find_latest`): the complete ``ckpt-*`` with the highest
(global step, end-of-epoch) — normally what ``latest`` names; after a kill between steps 3 and 5 the
newer renamed directory wins (it is complete). A checkpoint whose files do not match its manifest
(truncated or corrupted later, e.g. by a full disk or a copy) is NOT silently skipped: loading it raises
:class:`CheckpointError` naming the file (the CLI exits 2 and deletes nothing).

A save that fails while writing (a full disk, a quota, an I/O error: ``OSError``, or the ``RuntimeError`` /
``SafetensorError`` torch and safetensors turn such errors into) removes its temporary directory — which
also gives the space back — and raises :class:`CheckpointWriteError`: one line naming the checkpoint, the
cause, the free space left and the newest complete checkpoint, which the failed save did not touch.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator

from metacal.atomic_io import (describe_write_failure, fsync_dir, fsync_tree, point_symlink, write_errors,
                               write_text_atomic)
from metacal.wording import current

from .train_state import EpochProgress, TrainState  # noqa: F401  (the checkpoint's contents; re-exported)

MANIFEST = "MANIFEST.json"
STATE_JSON = "train_state.json"
CONFIG = "config.yaml"


class CheckpointError(ValueError):
    """A checkpoint that cannot be used (missing, corrupt, or made by an incompatible config)."""


class CheckpointWriteError(CheckpointError):
    """A checkpoint could not be written (e.g. the disk is full); the previous complete one is untouched."""


def _write_failed(err: BaseException, checkpoints: Path, tmp: Path, final: Path) -> CheckpointWriteError:
    """Remove the partial checkpoint (that frees its space) and describe the failure in one line."""
    if tmp.exists():
        shutil.rmtree(tmp, ignore_errors=True)
    latest, said = find_latest(checkpoints), current()
    if latest is not None:
        kept = (f"the newest complete checkpoint {latest} is intact; free some space, then continue with "
                f"{said.args(run_dir=checkpoints.parent, resume=True)}")
    else:
        kept = f"no complete checkpoint exists yet; free some space, then start again with {said.arg('overwrite')}"
    return CheckpointWriteError(f"cannot write checkpoint {final}: {describe_write_failure(err, checkpoints)}; {kept}")


def checkpoint_name(state: TrainState) -> str:
    end = f"-e{state.epoch:04d}" if state.step_in_epoch == 0 else ""
    return f"ckpt-{state.global_step:09d}{end}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def save_checkpoint(accelerator: Accelerator, checkpoints: Path, state: TrainState, progress: dict[str, Any],
                    config_yaml: str, best: bool = False) -> Path:
    """Write a complete checkpoint of the current state (protocol in the module docstring); returns its path."""
    checkpoints = Path(checkpoints)
    name = checkpoint_name(state)
    tmp, final = checkpoints / f".tmp-{name}", checkpoints / name
    main = accelerator.is_main_process
    if main:
        checkpoints.mkdir(parents=True, exist_ok=True)
        if tmp.exists():
            shutil.rmtree(tmp)
    accelerator.wait_for_everyone()
    try:
        accelerator.save_state(str(tmp))
        torch.save(progress, tmp / f"progress_rank{accelerator.process_index}.pt")
        accelerator.wait_for_everyone()
        if main:
            _write_manifest(tmp, state, config_yaml, accelerator.num_processes)
            _publish(tmp, final)
            if best:  # before `latest`: whatever a kill leaves, `best` matches the state a resume continues
                _point(checkpoints / "best", name)
            _point(checkpoints / "latest", name)
            _prune(checkpoints)
    except write_errors() as err:
        raise _write_failed(err, checkpoints, tmp, final) from None
    accelerator.wait_for_everyone()
    return final


def _write_manifest(tmp: Path, state: TrainState, config_yaml: str, num_processes: int) -> None:
    """Complete the temporary directory: config, readable counters, the manifest of every file; fsync all."""
    (tmp / CONFIG).write_text(config_yaml)
    (tmp / STATE_JSON).write_text(json.dumps(
        {k: v for k, v in state.state_dict().items() if k != "history"}, indent=2, default=str))
    files = sorted(p for p in tmp.rglob("*") if p.is_file())
    manifest = {"files": {str(p.relative_to(tmp)): {"size": p.stat().st_size, "sha256": _sha256(p)}
                          for p in files},
                "global_step": state.global_step, "epoch": state.epoch, "step_in_epoch": state.step_in_epoch,
                "num_processes": num_processes}
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))
    fsync_tree(tmp)


def _publish(tmp: Path, final: Path) -> None:
    """Rename the complete temporary directory to its checkpoint name, durably."""
    if final.exists():  # only a leftover of a killed run can carry this name: `latest` is older
        _remove(final)
    tmp.rename(final)
    fsync_dir(final.parent)


def _point(link: Path, name: str) -> None:
    """Switch a pointer; on a filesystem without symlinks, ``<link>.txt`` holds the name instead (resuming
    never needs the pointers: :func:`find_latest` reads the manifests)."""
    try:
        point_symlink(link, name)
    except OSError:
        write_text_atomic(link.with_name(link.name + ".txt"), name + "\n")


def _referenced(checkpoints: Path) -> set[Path]:
    keep = set()
    for link in ("latest", "best"):
        if (checkpoints / link).is_symlink():
            keep.add((checkpoints / link).resolve())
        if (checkpoints / f"{link}.txt").is_file():
            keep.add((checkpoints / (checkpoints / f"{link}.txt").read_text().strip()).resolve())
    return keep


def _prune(checkpoints: Path) -> None:
    """Delete checkpoints neither ``latest`` nor ``best`` names, and leftover temporary directories."""
    keep = _referenced(checkpoints)
    for entry in checkpoints.iterdir():
        if entry.is_symlink() and entry.name.startswith("."):  # a pointer left by a kill inside point_symlink
            entry.unlink()
        if entry.is_symlink() or not entry.is_dir():
            continue
        if entry.name.startswith(".tmp-") or (entry.name.startswith("ckpt-") and entry.resolve() not in keep):
            _remove(entry)


def _remove(directory: Path) -> None:
    """Rename out of the ``ckpt-*`` namespace first (atomic), then delete: a kill during the deletion
    never leaves a half-deleted directory that looks like a checkpoint."""
    doomed = directory
    if not directory.name.startswith(".tmp-"):
        doomed = directory.with_name(f".tmp-deleted-{directory.name}")
        if doomed.exists():
            shutil.rmtree(doomed, ignore_errors=True)
        directory.rename(doomed)
    shutil.rmtree(doomed, ignore_errors=True)


def _order(directory: Path) -> tuple[int, int] | None:
    """(global step, 1 at an epoch end) of a complete checkpoint directory; None if it is not one."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
        return int(manifest["global_step"]), int(manifest["step_in_epoch"] == 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def find_latest(checkpoints: Path) -> Path | None:
    """The checkpoint to resume from (module docstring), or None when there is no complete one."""
    checkpoints = Path(checkpoints)
    if not checkpoints.is_dir():
        return None
    found = [(order, entry) for entry in checkpoints.iterdir()
             if entry.name.startswith("ckpt-") and entry.is_dir() and (order := _order(entry)) is not None]
    return max(found)[1] if found else None


def no_checkpoint_message(root: Path) -> str:
    """Why ``root`` cannot be resumed (no complete checkpoint), for the one-line error."""
    checkpoints = Path(root) / "checkpoints"
    legacy = checkpoints / "latest"
    if legacy.is_dir() and not legacy.is_symlink() and (legacy / STATE_JSON).is_file():
        return (f"cannot resume: {legacy} was written by an older metacal without a manifest, so it cannot be "
                f"verified; start the run again with {current().arg('overwrite')}")
    return (f"cannot resume: {root} holds no complete checkpoint yet ({checkpoints}/ckpt-*); "
            f"start it again with {current().arg('overwrite')}")


def verify_checkpoint(directory: Path) -> dict[str, Any]:
    """Check every file against MANIFEST.json (size, then sha256); returns the manifest."""
    directory = Path(directory)
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
        files = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError):
        raise CheckpointError(f"checkpoint {directory} has no readable {MANIFEST}; it is incomplete or not a "
                              "metacal checkpoint") from None
    for rel, meta in files.items():
        path = directory / rel
        if not path.is_file():
            raise CheckpointError(f"checkpoint {directory} is corrupt: {rel} is missing")
        size = path.stat().st_size
        if size != meta["size"]:
            raise CheckpointError(f"checkpoint {directory} is corrupt: {rel} has {size} bytes, expected "
                                  f"{meta['size']} (truncated?); nothing was changed")
        if _sha256(path) != meta["sha256"]:
            raise CheckpointError(f"checkpoint {directory} is corrupt: {rel} does not match its checksum; "
                                  "nothing was changed")
    return manifest


def check_model_shapes(directory: Path, model: torch.nn.Module) -> None:
    """Refuse a checkpoint whose backbone tensors differ in name or shape from ``model``'s."""
    path = Path(directory) / "model.safetensors"
    if not path.is_file():
        return  # non-safetensors format: accelerate's own errors are wrapped by load_checkpoint
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        saved = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    current = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    if saved.keys() != current.keys():
        diff = sorted(saved.keys() ^ current.keys())[:3]
        raise CheckpointError(f"checkpoint {directory} holds a different model (tensors {', '.join(diff)} are in "
                              "only one of checkpoint and config); resume with the run's own config")
    for key, shape in saved.items():
        if shape != current[key]:
            raise CheckpointError(f"checkpoint {directory} does not match the configured model: {key} has shape "
                                  f"{list(shape)} in the checkpoint but {list(current[key])} now "
                                  "(other number of classes or architecture?)")


def load_checkpoint(accelerator: Accelerator, directory: Path, model: torch.nn.Module) -> dict[str, Any]:
    """Verify, then restore everything prepared or registered with ``accelerator``; returns this rank's
    epoch accumulators (``progress_rank<r>.pt``, empty dict at an epoch boundary)."""
    directory = Path(directory)
    manifest = verify_checkpoint(directory)
    check_model_shapes(directory, model)
    saved_n = int(manifest.get("num_processes", 1))
    if manifest.get("step_in_epoch", 0) and saved_n != accelerator.num_processes:
        raise CheckpointError(f"checkpoint {directory} was saved mid-epoch by {saved_n} process(es); resume it "
                              f"with the same number of processes (now {accelerator.num_processes})")
    try:
        accelerator.load_state(str(directory))
        progress_file = directory / f"progress_rank{accelerator.process_index}.pt"
        progress = torch.load(progress_file, weights_only=True) if progress_file.is_file() else {}
    except Exception as err:  # noqa: BLE001 - any failure here means "this checkpoint does not fit"
        detail = " ".join(str(err).split())[:300]
        raise CheckpointError(f"cannot load checkpoint {directory} ({type(err).__name__}: {detail}); "
                              "was it written by another config or version?") from None
    return progress
