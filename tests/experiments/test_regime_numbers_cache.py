"""experiments/regimes/numbers_cache.py: a hit equals a fresh computation and computes nothing; a rewritten run file,
other calibrators or other code miss; a corrupt entry is recomputed."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict
from pathlib import Path

import pytest

from experiments.regimes import numbers, numbers_cache
from experiments.regimes.numbers import collect
from metacal.run.layout import read_run
from tests.experiments.test_regimes import make_study

CALIBRATORS = ("ts_nll", "ets")


def same(a: numbers.RunNumbers, b: numbers.RunNumbers) -> bool:
    x, y = asdict(a), asdict(b)
    nan = lambda v: isinstance(v, float) and math.isnan(v)  # noqa: E731
    return x.keys() == y.keys() and all(x[k] == y[k] or (nan(x[k]) and nan(y[k])) for k in x)


@pytest.fixture
def toy(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return make_study(tmp_path), tmp_path / "cache"


def test_cached_numbers_equal_fresh_ones_and_a_hit_computes_nothing(toy, monkeypatch):
    study, cache = toy
    fresh = collect(study, CALIBRATORS)
    first = collect(study, CALIBRATORS, cache=cache)
    assert len(list(cache.glob("*.json"))) == sum(len(s) for st in fresh.values() for s in st.values()) == 16
    monkeypatch.setattr(numbers, "run_numbers", lambda *a: pytest.fail("recomputed a cached run"))
    second = collect(study, CALIBRATORS, cache=cache)
    for found in (first, second):
        for stem, runs in fresh["pair30"].items():
            for seed, want in runs.items():
                assert same(found["pair30"][stem][seed], want)


def test_a_retrained_run_other_calibrators_or_other_code_miss(toy, monkeypatch):
    run = read_run(Path("runs/regimes/toy/pair30/ce/seed0").resolve())
    before = numbers_cache.key(run, CALIBRATORS)
    assert numbers_cache.key(run, CALIBRATORS) == before  # deterministic
    assert numbers_cache.key(run, ("ts_nll",)) != before
    path = run.predictions_path("test")
    run.predictions("test").save(path)  # the same content rewritten, as a retrained run's file would be
    os.utime(path, ns=(1, 1))
    retrained = numbers_cache.key(run, CALIBRATORS)
    assert retrained != before
    monkeypatch.setattr(numbers_cache, "code_fingerprint", lambda: "an edited metacal/posthoc")
    assert numbers_cache.key(run, CALIBRATORS) != retrained


def test_a_corrupt_entry_is_recomputed(toy):
    study, cache = toy
    run = read_run(Path("runs/regimes/toy/pair30/mixup/seed1"))
    want = numbers_cache.cached_run_numbers(run, CALIBRATORS, cache)
    entry = cache / f"{numbers_cache.key(run, CALIBRATORS)}.json"
    entry.write_text("{half")
    assert same(numbers_cache.cached_run_numbers(run, CALIBRATORS, cache), want)
    assert same(numbers.RunNumbers(**json.loads(entry.read_text())), want)  # and rewritten whole
