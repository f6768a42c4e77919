"""The link fit's floor (published_link.MEASURED_FLOOR): an engine's latency factor, fitted or held out, never
below its all-reduce as aiconfigurator measured it on the card, and untouched where the card has no such row."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pareto_atlas.calibrate import published_link as pl
from pareto_atlas.spec.cards import shipped_hardware

HW = shipped_hardware()
N_S = len(pl.LATENCY_SCALES)


def _err() -> tuple[np.ndarray, np.ndarray]:
    """(grid, rows, targets) errors on one link_eff: vllm's rows fit best free (index 0), trtllm's at index 6,
    sglang's at index 1."""
    eng = np.array(["vllm", "vllm", "trtllm", "trtllm", "sglang", "sglang"])
    err = np.full((N_S, len(eng), 1), 0.5)
    err[0, :2] = 0.0
    err[6, 2:4] = 0.0
    err[1, 4:] = 0.0
    return err, eng


def test_the_floor_binds_only_engines_with_measured_rows_and_only_from_below():
    err, eng = _err()
    every = np.ones(len(eng), bool)
    assert pl._choose(err, eng, every, True)[2] == {"vllm": 0, "trtllm": 6, "sglang": 1}
    # vllm floored at 3 (its best, 0, is below); trtllm's best (6) is above its floor 2 and stays
    _, _, picks = pl._choose(err, eng, every, True, {"vllm": 3, "trtllm": 2})
    assert picks == {"vllm": 3, "trtllm": 6, "sglang": 1}
    # no floor of sglang: its own best, whatever the others' floors
    assert pl._choose(err, eng, every, True, {"sglang": 0})[2]["sglang"] == 1
    # the errors the floored fit reports are the floored factor's
    fitted = pl._errors_at(err, eng, 0, 0, picks)
    assert fitted[:2].ravel().tolist() == [0.5, 0.5] and fitted[2:].ravel().tolist() == [0.0] * 4


def test_a_held_out_engine_without_training_rows_is_floored_too():
    err, eng = _err()
    train = eng != "vllm"  # vllm left out (LOEO)
    i, pooled, scales = pl._held_choice(err, eng, train, True, {}, {"vllm": 5})
    assert scales["vllm"] == max(pooled, 5) == 5
    # a floor below the pooled factor leaves the pooled factor
    assert pl._held_choice(err, eng, train, True, {}, {"vllm": 0})[2]["vllm"] == pooled
    # a measured fallback below the floor is raised to it
    assert pl._held_choice(err, eng, train, True, {"vllm": 2}, {"vllm": 4})[2]["vllm"] == 4
    # no floor, no fallback: the pooled factor, as before
    assert "vllm" not in pl._held_choice(err, eng, train, True, {}, {"trtllm": 6})[2]


def test_floors_are_the_measured_grid_points_and_on_by_default(monkeypatch):
    assert pl.MEASURED_FLOOR is True
    got = pl.measured_floors(HW["H200"])
    df = pl.allreduce_table()
    assert set(got) == set(df[df.gpu == "H200"].engine) == {"trtllm", "vllm"}
    assert all(pl.LATENCY_SCALES[i] > 0 for i in got.values())  # a measured collective is never free
    monkeypatch.setattr(pl, "MEASURED_FALLBACK", True)
    assert got == pl.measured_latency_scales(HW["H200"])  # the same grid point as the fallback's
    assert pl.measured_floors(HW["A100-80G-PCIe"]) == {}  # no measured row for the card
    monkeypatch.setattr(pl, "MEASURED_FLOOR", False)
    assert pl.measured_floors(HW["H200"]) == {}  # off: no floor


def test_the_factor_used_never_goes_below_the_floor():
    cal = pl.LinkCalibration(
        "H200", 0.7, 1.0, pd.DataFrame(), 0.5, 0.3, "LOSO", "", latency_by_engine={"vllm": 0.0, "trtllm": 16.0}
    )
    cal = pl.LinkCalibration(**{**cal.__dict__, "floor_by_engine": {"vllm": 2.0, "trtllm": 2.0, "sglang": 4.0}})
    assert cal.latency_for("vllm") == 2.0  # fitted free, floored
    assert cal.latency_for("trtllm") == 16.0  # above its floor
    assert cal.latency_for("sglang") == 4.0  # no rows: the pooled x1, floored
    assert cal.latency_for("other") == 1.0  # no floor: the pooled factor
    back = pl._decode(pl._encode(cal))
    assert back.floor_by_engine == cal.floor_by_engine and back.latency_for("vllm") == 2.0
