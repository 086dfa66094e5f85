"""Which post-hoc calibrators a command fits: one parser of the choice (:func:`parse_choice`) and, in one table, what
each entry point fits when nothing is named (:data:`DEFAULTS`).

A choice is ``none``, ``all`` (every registered calibrator a command can fit, shift-aware ones aside: they need
perturbed predictions and are named), or comma-separated names of :mod:`metacal.posthoc.registry`, checked and
kept in the order given, duplicates dropped.
"""

from __future__ import annotations

from typing import Callable

from metacal.registry import unknown_name

from .base import CalibratorSpec
from .registry import available, spec

#: each entry point's choice when none is named
DEFAULTS = {
    "evaluate": "all",  # python -m metacal.evaluate PRED --calib VAL: every calibrator VAL can fit
    "evaluate_run": "ts_perturbed,ets",  # … RUN --shift/--ood/--inputs: beside the run's own temperature scaling
    "report": "all",  # python -m metacal.report: the "ECE after …" columns
    "predict": "ts_nll",  # metacal.load and python -m metacal.predict: the run's own temperature scaling
}


def fitted_on_validation(calibrator: CalibratorSpec) -> bool:
    """What ``all`` takes by default: a calibrator fitted to the clean validation predictions, not shift-aware."""
    return not calibrator.shift_aware


def parse_choice(text: str | None, entry: str, flag: str | None = "--calibrators", single: bool = False,
                 fits: Callable[[CalibratorSpec], bool] = fitted_on_validation) -> tuple[str, ...]:
    """The calibrators ``text`` names (None: ``entry``'s default, :data:`DEFAULTS`): ``()`` for ``none``, those
    ``fits`` accepts for ``all``, else the names given. A one-line ValueError, starting with ``flag`` where given, for
    an empty or unknown name, or for more than one calibrator where the entry takes a ``single`` one."""
    words = [word.strip() for word in (DEFAULTS[entry] if text is None else text).split(",") if word.strip()]
    said = f"{flag}: " if flag else ""
    keyword = [word.lower() for word in words]
    if keyword == ["none"]:
        return ()
    if keyword == ["all"] and not single:
        return tuple(name for name in available() if fits(spec(name)))
    if not words:
        raise ValueError(f"{said}no name given; choose from {', '.join(available())}")
    unknown = [word for word in words if word not in available()]
    if unknown:
        options = "none" if single else "all, none"
        raise ValueError(f"{said}{unknown_name('post-hoc calibrator', unknown[0], available())} (or {options})")
    if single and len(words) > 1:
        raise ValueError(f"{said}name one post-hoc calibrator (or none), got {', '.join(words)}")
    return tuple(dict.fromkeys(words))
