"""One parser of the calibrator choice and one table of each entry point's default (metacal/posthoc/choice.py): the
keywords, the names in the order given, and the one-line errors every command shows alike."""

from __future__ import annotations

import pytest

from metacal.posthoc import registry
from metacal.posthoc.choice import DEFAULTS, parse_choice

NOT_SHIFT_AWARE = tuple(n for n in registry.available() if not registry.spec(n).shift_aware)


def test_each_entry_point_states_its_default_once():
    assert parse_choice(None, "evaluate") == parse_choice(None, "report") == NOT_SHIFT_AWARE
    assert NOT_SHIFT_AWARE[:8] == ("ts_nll", "ts_ece", "hb", "vector", "matrix", "dirichlet", "isotonic", "ets")
    assert parse_choice(None, "evaluate_run") == ("ts_perturbed", "ets")
    assert parse_choice(None, "predict", single=True) == ("ts_nll",)
    assert set(DEFAULTS) == {"evaluate", "evaluate_run", "report", "predict"}


def test_keywords_and_names():
    assert parse_choice("none", "report") == parse_choice(" None ", "predict", single=True) == ()
    assert parse_choice("all", "evaluate", fits=lambda spec: spec.input == "probs") == ("hb", "isotonic")
    assert parse_choice(" ets, ts_nll,ets ", "report") == ("ets", "ts_nll")  # the order given, duplicates dropped


@pytest.mark.parametrize("text, single, message", [
    ("platt", False, "--calibrators: unknown post-hoc calibrator 'platt'; available: ts_nll, ts_ece, hb, vector, "),
    ("vector,matrx", False, "--calibrators: unknown post-hoc calibrator 'matrx'; did you mean matrix?"),
    (" , ", False, "--calibrators: no name given; choose from ts_nll, ts_ece, hb"),
    ("all", True, "--calibrators: unknown post-hoc calibrator 'all'; "),
    ("ts_nll,ets", True, "--calibrators: name one post-hoc calibrator (or none), got ts_nll, ets"),
])  # fmt: skip
def test_bad_choices_are_one_line(text, single, message):
    with pytest.raises(ValueError) as info:
        parse_choice(text, "report", single=single)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)
    if "unknown" in message:
        assert str(info.value).endswith("(or none)" if single else "(or all, none)")
