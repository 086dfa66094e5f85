"""experiments/conformal/numbers_cache.py (on experiments/run_cache.py): a hit equals the fresh numbers, shift
severities come back as ints, and it computes nothing; the shift suite asked for, a rewritten run file and other code
each miss; an unfinished run is computed but not stored."""

from __future__ import annotations

import json
import os
from dataclasses import asdict

import pytest

from experiments.conformal import numbers, numbers_cache
from experiments.conformal.numbers import collect
from experiments.conformal.study import Study
from tests.experiments.test_conformal_page import STEMS, make_study


def as_json(sets: numbers.RunSets) -> str:
    return json.dumps(asdict(sets), sort_keys=True)


def test_cached_sets_equal_fresh_ones_and_a_hit_computes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    study, cache = make_study(tmp_path), tmp_path / "cache"
    fresh = collect(study, tuple(STEMS), shift=False)
    first = collect(study, tuple(STEMS), shift=False, cache=cache)
    assert len(list(cache.glob("*.json"))) == sum(len(s) for s in fresh.values()) == 16
    monkeypatch.setattr(numbers, "run_sets", lambda *a: pytest.fail("recomputed a cached run"))
    second = collect(study, tuple(STEMS), shift=False, cache=cache)
    for found in (first, second):
        assert found.keys() == fresh.keys()
        for stem, runs in fresh.items():
            assert {s: as_json(r) for s, r in found[stem].items()} == {s: as_json(r) for s, r in runs.items()}


def test_shift_numbers_come_back_with_int_severities(mnist1d_run, tmp_path, monkeypatch):
    study = Study("m1d", "MNIST-1D", "b", mnist1d_run.parent, "mnist1d_natural")
    computed = numbers_cache.cached_run_sets(mnist1d_run, study, tmp_path)
    assert computed is not None and computed.shift
    monkeypatch.setattr(numbers, "run_sets", lambda *a: pytest.fail("recomputed a cached run"))
    hit = numbers_cache.cached_run_sets(mnist1d_run, study, tmp_path)
    assert as_json(hit) == as_json(computed)
    assert {type(s) for by in hit.shift.values() for s in by} == {int}
    assert hit.shift[numbers.key("ts_nll", "aps")][5] == computed.shift[numbers.key("ts_nll", "aps")][5]


def test_the_suite_a_rewritten_run_file_or_other_code_miss(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    study = make_study(tmp_path)
    run = study.runs / "ce" / "seed0"
    before = numbers_cache.key(run, study)
    assert numbers_cache.key(run, study) == before  # deterministic
    assert numbers_cache.key(run, None) != before  # --no-shift
    assert numbers_cache.key(run, Study("toy", "T", "b", study.runs, "mnist1d_natural")) != before
    os.utime(run / "metrics.json", ns=(1, 1))  # the same content rewritten, as a retrained run's file would be
    retrained = numbers_cache.key(run, study)
    assert retrained != before
    monkeypatch.setattr(numbers_cache, "code_fingerprint", lambda: "an edited metacal/conformal")
    assert numbers_cache.key(run, study) != retrained


def test_an_unfinished_run_is_computed_and_not_stored(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    study, cache = make_study(tmp_path), tmp_path / "cache"
    run = study.runs / "focal" / "seed1"
    (run / "metrics.json").unlink()  # training still running: no metrics.json yet
    assert numbers_cache.cached_run_sets(run, None, cache) is None
    assert not cache.exists()
    got = collect(study, tuple(STEMS), shift=False, cache=cache)
    assert 1 not in got["focal"] and len(list(cache.glob("*.json"))) == 15


def test_a_corrupt_entry_is_recomputed_and_rewritten(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    study, cache = make_study(tmp_path), tmp_path / "cache"
    run = study.runs / "focal2" / "seed3"
    want = as_json(numbers_cache.cached_run_sets(run, None, cache))
    entry = cache / f"{numbers_cache.key(run, None)}.json"
    entry.write_text('{"stem": "focal2"}')  # a valid JSON of the wrong shape
    assert as_json(numbers_cache.cached_run_sets(run, None, cache)) == want
    assert json.dumps(json.loads(entry.read_text()), sort_keys=True) == want


def test_the_report_reads_its_cache_and_no_cache_skips_it(tmp_path, monkeypatch):
    from experiments.conformal import cli

    monkeypatch.chdir(tmp_path)
    study = make_study(tmp_path)
    monkeypatch.setattr(cli, "study_of", lambda name: study)
    monkeypatch.setattr(cli, "default_dir", lambda: tmp_path / "cache")
    assert cli.main(["report", "toy", "--no-shift", "--out", str(tmp_path / "docs")]) == 0
    page = (tmp_path / "docs" / "conformal_toy.md").read_text()
    assert len(list((tmp_path / "cache").glob("*.json"))) == 16
    monkeypatch.setattr(numbers, "run_sets", lambda *a: pytest.fail("recomputed a cached run"))
    assert cli.main(["report", "toy", "--no-shift", "--out", str(tmp_path / "docs")]) == 0
    assert (tmp_path / "docs" / "conformal_toy.md").read_text() == page
    with pytest.raises(pytest.fail.Exception):
        cli.main(["report", "toy", "--no-shift", "--no-cache", "--out", str(tmp_path / "docs")])
