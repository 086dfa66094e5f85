"""metacal: training calibrated classifiers in PyTorch.

Subpackages mirror the concepts (docs/layout.md): ``metrics`` (measure calibration), ``objectives`` (differentiable
calibration errors), ``losses`` (inner training objectives), ``meta`` (the learners: γ-Net and one-step
hypergradients, the automatic γ), ``data``, ``models``, ``posthoc``, ``plots`` (the reliability diagram), ``run``
(a run directory's files), ``train``, ``predict`` (a finished run as a calibrated classifier), ``shift`` (a finished
run on shifted or new data), ``evaluate`` (its command line), ``report`` and ``sweep``. ``registry``,
``distributed``, ``wording``, ``machine``, ``atomic_io`` and ``writable`` import nothing of metacal's rooms, so any
layer may use them; ``predictions`` (the predictions files) stands on them and on the metrics' input checks.

``metacal.fit(model, train, val=..., test=..., config=..., overrides=[...])`` trains one's own network on
one's own datasets (metacal/train/fit.py); it is imported on first use, so ``import metacal.metrics`` stays
free of the trainer's dependencies. ``metacal.evaluate_run(run_dir, shift=..., ood=..., inputs=...)`` evaluates a
finished run's network on shifted, unseen or new data without retraining (metacal/shift/evaluate.py).
``metacal.auto_gamma(loss, held_out)`` sets a focal loss's γ (or label smoothing's ε) in a training loop of one's own:
call its ``update(model)`` once per epoch (metacal/meta/gap_control.py).
``metacal.load(run_dir, calibrator="ts_nll")`` returns a finished run as a calibrated classifier
(``predict_proba``, ``predict``, ``export``; metacal/predict/model.py).

Modules that moved into the rooms answer to their old dotted names for one release (:data:`MOVED`): an import
hook, not a file left behind, hands out the module under its new name with a DeprecationWarning.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any, Mapping, Sequence

__version__ = "0.1.0"

#: the public functions, each imported from its module on first use
PUBLIC = {"fit": "metacal.train.fit", "evaluate_run": "metacal.shift.evaluate", "auto_gamma": "metacal.meta.auto",
          "load": "metacal.predict.model"}

#: old dotted name → the module's name now; served by :class:`MovedModules` until the next release
MOVED = {
    "metacal.method": "metacal.run.method",
    "metacal.run_layout": "metacal.run.layout",
    "metacal.run_predictor": "metacal.run.predictor_info",
    "metacal.run_calibration": "metacal.run.calibration",
    "metacal.train.renamed_keys": "metacal.run.renamed_keys",
    "metacal.run_model": "metacal.predict.network",
    "metacal.predictor": "metacal.predict.model",
    "metacal.export": "metacal.predict.export",
    "metacal.shift_eval": "metacal.shift.evaluate",
    "metacal.shift_table": "metacal.shift.table",
    "metacal.shift_samples": "metacal.shift.samples",
    "metacal.evaluate_run_cli": "metacal.evaluate.run_options",
    "metacal.evaluate_ood": "metacal.evaluate.ood",
    "metacal.report.machine": "metacal.machine",
}


def moved_warning(old: str, new: str, depth: int) -> None:
    """The DeprecationWarning of an old name, pointed at the code that used it (``depth`` frames above the caller;
    the import system's own frames are skipped)."""
    warnings.warn(f"{old} is now {new}; the old name goes in the next release", DeprecationWarning,
                  stacklevel=depth + 2)


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old name of :data:`MOVED` as the module it names now (the same module object, so state is
    shared): the placeholder module the import system makes is replaced in ``sys.modules`` by the real one."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
                  ) -> ModuleSpec | None:
        return importlib.util.spec_from_loader(fullname, self) if fullname in MOVED else None

    def create_module(self, spec: ModuleSpec) -> None:
        return None  # the default placeholder; exec_module swaps it for the real module

    def exec_module(self, module: ModuleType) -> None:
        new = MOVED[module.__name__]
        moved_warning(module.__name__, new, 1)
        sys.modules[module.__name__] = importlib.import_module(new)


def moved_attribute(package: str, name: str, names: Mapping[str, str]) -> Any:
    """For a package that replaced a module of its own name: the old module's attribute ``name`` from the package's
    module ``names[name]``, with a DeprecationWarning (once); AttributeError for any other name."""
    if name not in names:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    where = f"{package}.{names[name]}"
    moved_warning(f"{package}.{name}", f"{where}.{name}", 2)
    value = getattr(importlib.import_module(where), name)
    setattr(sys.modules[package], name, value)  # warned once: later look-ups find it
    return value


if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
    sys.meta_path.insert(0, MovedModules())


def __getattr__(name: str) -> Any:
    if name not in PUBLIC:
        raise AttributeError(f"module 'metacal' has no attribute {name!r}")
    return getattr(importlib.import_module(PUBLIC[name]), name)
