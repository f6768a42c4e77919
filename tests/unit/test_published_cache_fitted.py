"""published_cache.fitted, the one place the one-GPU fits are read from the fit cache or fitted and kept
(calibrate.published_link and benchmarks/bench_engine_schedulers.py call it): a second call with the same
table and cards reads the first's fits back and fits nothing; other cards are another key."""

from __future__ import annotations

from pareto_atlas.calibrate import published_cache
from pareto_atlas.calibrate.published_table import load_published


def test_fitted_fits_once_then_reads_the_cache(monkeypatch):
    # tests/conftest.py gives each test an empty cache folder
    calls = []
    fake = lambda table, cards: calls.append(list(cards)) or []  # noqa: E731
    monkeypatch.setattr(published_cache, "calibrate_published_formats", fake)
    table = load_published()
    assert published_cache.fitted(table, ["H200"]) == []
    assert published_cache.fitted(table, ["H200"]) == []
    assert calls == [["H200"]]
    published_cache.fitted(table, ["L4"])
    assert calls == [["H200"], ["L4"]]
    assert len(list(published_cache.cache_dir().glob("*.json"))) == 2
