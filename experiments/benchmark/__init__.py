"""Benchmark machinery behind scripts/bench_*.py: peak-memory meters (:mod:`.memory`) and the timed
training steps of the meta-step benchmark (:mod:`.meta_step`). Targets live in the scripts, never in tests."""
