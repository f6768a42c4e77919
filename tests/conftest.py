"""Shared across every test directory."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _own_published_fit_cache(tmp_path_factory, monkeypatch):
    # the published fits are cached between stores in the model cache (calibrate.published_cache);
    # a test that counts fits, or changes the fit, must not read another run's
    from pareto_atlas.calibrate import published_cache

    d = tmp_path_factory.mktemp("published-fits")
    monkeypatch.setattr(published_cache, "cache_dir", lambda: d)
