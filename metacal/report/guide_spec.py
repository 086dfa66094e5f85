"""What the method guide reads, from a YAML file beside the guide (this repository's: docs/method_guide.yaml): the
results pages and their column names, the shift pages, each regime's table rows, and the training-time methods the
over-confident verdict may recommend. The library names no page of its own; a page or method added to the file
appears in the guide at the next ``python scripts/method_guide.py --readme README.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

KEYS = ("pages", "shift_pages", "rows", "recommend")
OPTIONAL = ("regime_pages",)  # the regime study's pages (noisy labels, overlap, long tail): metacal/report/regime_guide.py
REGIMES = ("over", "under")


@dataclass(frozen=True)
class GuideSpec:
    """``pages``/``shift_pages``/``regime_pages``: CSV stem under the results folder → the name of its column or
    block, in order; ``rows``: regime ("over", "under") → its table's methods in order ("ce+ts": CE + temperature
    scaling); ``recommend``: regime → the methods its verdict may name."""

    pages: Mapping[str, str]
    shift_pages: Mapping[str, str]
    rows: Mapping[str, tuple[str, ...]]
    recommend: Mapping[str, tuple[str, ...]]
    regime_pages: Mapping[str, str] = field(default_factory=dict)


def _names(path: Path, key: str, value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError(f"{path}: '{key}' must map each CSV stem to a name (stem: Name)")
    return dict(value)


def _per_regime(path: Path, key: str, value: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, Mapping) or set(value) - set(REGIMES) or not all(
            isinstance(v, list) and all(isinstance(m, str) for m in v) for v in value.values()):
        raise ValueError(f"{path}: '{key}' must map regimes ({', '.join(REGIMES)}) to lists of method names")
    return {regime: tuple(methods) for regime, methods in value.items()}


def load_guide_spec(path: str | Path) -> GuideSpec:
    """The file's :class:`GuideSpec`; a one-line ValueError (or FileNotFoundError) naming what is wrong."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"method guide: no page list {path} (a YAML file with {', '.join(KEYS)})")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ValueError(f"{path}: not valid YAML ({' '.join(str(err).split())})") from None
    if not isinstance(data, Mapping) or not set(KEYS) <= set(data) <= set(KEYS + OPTIONAL):
        got = ", ".join(map(str, data)) if isinstance(data, Mapping) else type(data).__name__
        raise ValueError(f"{path}: needs the keys {', '.join(KEYS)} (and may have {', '.join(OPTIONAL)}); got {got}")
    return GuideSpec(pages=_names(path, "pages", data["pages"]), shift_pages=_names(path, "shift_pages",
                     data["shift_pages"]), rows=_per_regime(path, "rows", data["rows"]),
                     recommend=_per_regime(path, "recommend", data["recommend"]),
                     regime_pages=_names(path, "regime_pages", data.get("regime_pages", {})))
