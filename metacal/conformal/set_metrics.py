"""What a user asks of prediction sets (Angelopoulos et al., ICLR 2021, §4; Angelopoulos & Bates 2023, §3):

- ``coverage``: the share of inputs whose set holds the true label (the guarantee: ≥ 1 − α on exchangeable data);
- ``size_mean``, ``size_median``; ``empty``, ``singleton``: shares of sets with 0 and with 1 label;
- ``class_coverage_worst`` (and its class): the lowest coverage over the classes present — a marginal guarantee can
  hide a class that is covered far less often;
- ``size_stratified``: coverage per set-size group (0, 1, 2–3, 4–K; Angelopoulos et al.'s size-stratified coverage),
  and ``size_stratified_worst``, its lowest over the groups with samples: a set of one label that is right less
  often than 1 − α shows an adaptive score that is not adapting.
"""

from __future__ import annotations

from typing import Any

import torch

SIZE_GROUPS = ((0, 0), (1, 1), (2, 3), (4, None))  # inclusive bounds; None: up to K


def group_name(low: int, high: int | None) -> str:
    return str(low) if low == high else f"{low}+" if high is None else f"{low}-{high}"


def set_metrics(sets: torch.Tensor, labels: torch.Tensor) -> dict[str, Any]:
    """The module docstring's numbers for boolean sets (N×K) and labels (N)."""
    sets, labels = torch.as_tensor(sets).bool(), torch.as_tensor(labels).long().to(sets.device)
    if sets.ndim != 2 or labels.shape != (sets.shape[0],) or sets.shape[0] == 0:
        raise ValueError(f"sets must be N×K booleans with N ≥ 1 labels, got {tuple(sets.shape)} and "
                         f"{tuple(labels.shape)}")
    covered = sets.gather(1, labels.unsqueeze(1)).squeeze(1).double()
    size = sets.sum(dim=1)
    per_class = {int(c): float(covered[labels == c].mean()) for c in torch.unique(labels)}
    worst_class = min(per_class, key=lambda c: (per_class[c], c))
    strata = {}
    for low, high in SIZE_GROUPS:
        inside = (size >= low) & (size <= (high if high is not None else sets.shape[1]))
        if bool(inside.any()):
            strata[group_name(low, high)] = {"coverage": float(covered[inside].mean()), "n": int(inside.sum())}
    return {"n": int(sets.shape[0]), "coverage": float(covered.mean()), "size_mean": float(size.double().mean()),
            "size_median": float(size.double().median()), "empty": float((size == 0).double().mean()),
            "singleton": float((size == 1).double().mean()), "class_coverage_worst": per_class[worst_class],
            "class_coverage_worst_class": worst_class, "size_stratified": strata,
            "size_stratified_worst": min(s["coverage"] for s in strata.values())}
