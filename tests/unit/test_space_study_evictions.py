"""The (policy, keep) pairs a study's own [eviction] sweep measures are simulated beside the grid's,
and each arm under each of them is kept by the thinning like the arm itself, so that a measured
eviction effect reaches points (without pushing out the grid's arm-measured knobs)."""

from __future__ import annotations

from pareto_atlas.simulate.stage import measured_workloads, study_evictions, study_space
from pareto_atlas.spec.cards import HardwareCard, shipped_models
from pareto_atlas.spec.study import load_study


def test_the_swept_evictions_are_in_the_space_and_survive_the_thinning():
    default = load_study("default")
    swept = study_evictions(default)
    assert swept and all(p != "none" and 0 < k < 1 for p, k in swept)
    assert study_evictions(load_study("sizes")) == ()  # no [eviction] table: the grid's own
    cpu = [HardwareCard("this-cpu", "cpu", mem_bw_gbs=16.0, tflops={"fp32": 0.27})]  # no probe: a card of its kind
    card = shipped_models()["qwen2.5-0.5b"]
    space = study_space(default, cpu, card, measured_workloads(default), budget=3000)
    base = default.baseline.knobs()
    for p, k in swept:
        hits = [x for x in space.knobs if x.eviction == p and x.kv_keep == k]
        assert hits, f"{p}@{k} simulated"
        # the baseline's tokens under the swept eviction are kept by the thinning (they carry evidence)
        assert any(x.weights == base.weights and x.kv == base.kv and x.sparse_budget == 1.0 for x in hits)
