"""Per-sample top-label confidence and correctness of a run under shift, for the curves that a table of means cannot
give: risk–coverage curves and reliability diagrams at a severity (metacal/report/shift_figures.py draws them).

:func:`metacal.shift.evaluate.evaluate_run` records, for each column of :data:`COLUMNS` it has, the clean test split
(severity 0) and every held-out family at each severity of :data:`SEVERITIES`, pooled over those families, and
writes them to ``<run>/shift/<suite>_samples.npz`` under keys ``sev<S>/<column>/confidence`` (float32, the
largest probability) and ``sev<S>/<column>/correct`` (bool, arg max = label).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

SEVERITIES = (0, 3)  # the severities of the page's risk–coverage plot and reliability grid
COLUMNS = ("uncalibrated", "ts_nll", "ts_perturbed")


def samples_path(root: Path, suite: str) -> Path:
    return Path(root) / "shift" / f"{suite}_samples.npz"


class SampleCollector:
    """Collects (confidence, correct) per (severity, column) from probabilities and labels."""

    def __init__(self) -> None:
        self.parts: dict[tuple[int, str], list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)

    def add(self, severity: int, probs_by_column: dict[str, torch.Tensor], labels: torch.Tensor) -> None:
        if severity not in SEVERITIES:
            return
        for column, probs in probs_by_column.items():
            if column in COLUMNS:
                confidence, predicted = probs.max(dim=-1)
                self.parts[(severity, column)].append(
                    (confidence.float().cpu().numpy(), (predicted.cpu() == labels.cpu()).numpy()))

    def arrays(self) -> dict[str, np.ndarray]:
        out = {}
        for (severity, column), parts in sorted(self.parts.items()):
            out[f"sev{severity}/{column}/confidence"] = np.concatenate([c for c, _ in parts]).astype(np.float32)
            out[f"sev{severity}/{column}/correct"] = np.concatenate([k for _, k in parts]).astype(bool)
        return out

    def save(self, path: Path) -> None:
        """Written through a temporary file and renamed, so a killed evaluation leaves no half file."""
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez_compressed(tmp, **self.arrays())
        tmp.replace(path)


def load_samples(path: Path) -> dict[tuple[int, str], tuple[np.ndarray, np.ndarray]]:
    """{(severity, column): (confidence, correct)} of a samples file."""
    with np.load(path, allow_pickle=False) as data:
        keys = {tuple(k.split("/")[:2]) for k in data.files}
        return {(int(s[3:]), c): (data[f"{s}/{c}/confidence"], data[f"{s}/{c}/correct"]) for s, c in keys}
