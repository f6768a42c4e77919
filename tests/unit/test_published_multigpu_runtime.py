"""How calibrate.published_multigpu runs its fits (issue 31's bar: the command finishes in minutes): each
distinct training set fitted once, in worker processes, with the same figures as a fit per fold in
turn; and the whole calibration kept in the fit cache. The fit itself is a stand-in here (the real one
takes minutes): deterministic and different for every training set, so a fit handed to the wrong fold
changes a figure."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from pareto_atlas.calibrate import published_multigpu as pm
from pareto_atlas.calibrate.published_table import load_multigpu
from pareto_atlas.simulate.params import default_params

CARD = "B200"  # two engines, one document each: each engine's own rows are the other's LOEO training set


def _fake_fit(calls):
    def fit_card(frame, models, hw):
        calls.append(len(frame))
        mark = int((frame.prompt_tokens.astype(int) * frame.output_tokens.astype(int) + frame.slots).sum()) % 997
        return replace(default_params(hw, "vllm"), eff_bw=0.4 + mark / 2500.0), None

    return fit_card


def _same(a, b) -> bool:
    # field for field, NaN equal to NaN (a fit from a worker process is a copy: its NaN another object)
    return json.dumps(a.to_dict(), sort_keys=True) == json.dumps(b.to_dict(), sort_keys=True)


@pytest.fixture
def fake(monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(pm, "fit_card", _fake_fit(calls))
    return calls


def _one_fit_per_fold(table, card):
    """The held-out errors as calibrate_multigpu made them before: a fit per fold, in turn."""
    rows = table.rows[table.rows.gpu == card]
    hw = pm.shipped_hardware()[card]
    sampled = {e: pm.sample_rows(g) for e, g in rows.groupby("engine", sort=False)}
    built = {e: pm._frames(s, hw) for e, s in sampled.items()}
    out = {}
    for engine, s in sampled.items():
        frame, models = built[engine]
        others = [e for e in sampled if e != engine]
        tf = pd.concat([built[e][0] for e in others], ignore_index=True)
        tm = [m for e in others for m in built[e][1]]
        tl = np.concatenate([sampled[e].engine.to_numpy() for e in others])
        out[engine] = {
            "LOSO": pm._held_out(frame, models, hw, s.source_id.to_numpy()),
            "LOMO": pm._held_out(frame, models, hw, s.model.to_numpy()),
            "LOEO": pm._held_out(frame, models, hw, s.engine.to_numpy(), tf, tm, tl),
            "params": pm.fit_card(frame, models, hw)[0],
        }
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_each_training_set_is_fitted_once_with_the_figures_of_a_fit_per_fold(fake, workers):
    table = load_multigpu()
    cals = pm.calibrate_multigpu(table, [CARD], workers=workers)
    if workers == 1:
        # two engines: each one's full fit is also the other's leave-one-engine-out fit (4 fits before)
        assert len(fake) == 2
    ref = _one_fit_per_fold(table, CARD)
    assert [c.engine for c in cals] == list(ref)
    for c in cals:
        assert _same(c.params, ref[c.engine]["params"])
        for sc in pm.SCHEMES:
            got = c.anchors[[f"{t}_{sc}" for t in pm.TARGETS]].to_numpy(float)
            np.testing.assert_array_equal(got, ref[c.engine][sc])
        assert np.isfinite(c.anchors[[f"{t}_LOEO" for t in pm.TARGETS]].to_numpy(float)).any()


def test_the_calibration_is_kept_in_the_fit_cache_and_a_damaged_file_is_refitted(fake, monkeypatch):
    made = []
    real = pm.calibrate_multigpu

    def counted(*a, **k):
        made.append(1)
        return real(*a, **k)

    monkeypatch.setattr(pm, "calibrate_multigpu", counted)
    monkeypatch.setenv("PARETO_ATLAS_FIT_WORKERS", "1")
    first = pm.multigpu_calibrations(hardware=[CARD])
    again = pm.multigpu_calibrations(hardware=[CARD])
    assert len(made) == 1  # read back, not refitted
    assert pm.report_lines(again) == pm.report_lines(first)
    for a, b in zip(first, again):
        assert (
            _same(a.params, b.params)
            and np.array_equal(a.bar_check, b.bar_check, equal_nan=True)
            and a.bar_level == b.bar_level
        )
        pd.testing.assert_frame_equal(a.anchors, b.anchors, check_dtype=False)
    # another engine asked for is another entry; a file that does not read back is refitted
    pm.multigpu_calibrations(hardware=[CARD], engines=["vllm"])
    assert len(made) == 2
    from pareto_atlas.calibrate import published_cache

    for f in published_cache.cache_dir().glob("multigpu-*.json"):
        f.write_text('{"key": "x"')
    pm.multigpu_calibrations(hardware=[CARD])
    assert len(made) == 3


def test_fit_workers_reads_the_environment_and_names_it_when_wrong(monkeypatch):
    monkeypatch.setenv("PARETO_ATLAS_FIT_WORKERS", "3")
    assert pm.fit_workers() == 3
    monkeypatch.setenv("PARETO_ATLAS_FIT_WORKERS", "0")
    with pytest.raises(ValueError, match="PARETO_ATLAS_FIT_WORKERS"):
        pm.fit_workers()
    monkeypatch.delenv("PARETO_ATLAS_FIT_WORKERS")
    assert pm.fit_workers() >= 1
