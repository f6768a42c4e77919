"""No verdict without evidence: the guard decides on intervals (task score and KL divergence), and a
configuration whose quality or speed rests only on priors is projected, never a winner by default."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pareto_atlas.atlas.evidence import confirm_command, evidence_ok, quality_evidence, speed_evidence
from pareto_atlas.atlas.pick import pick
from pareto_atlas.atlas.regimes import Regime, admission
from pareto_atlas.atlas.winners import projected_cases, winners
from pareto_atlas.quality.stats import mcnemar_exact, paired_difference
from pareto_atlas.spec.knobs import Knobs


def point(
    pid: str,
    knobs: Knobs,
    *,
    cost: float,
    rel: float = 1.0,
    rel_lo: float = 1.0,
    rel_hi: float = 1.0,
    qprov: str = "measured",
    qev: str = "measured",
    prov: str = "simulated",
    hw: str = "L4",
    calib: str = "calibrated on 16 anchors",
    kld: float = math.nan,
    kld_lo: float = math.nan,
    kld_hi: float = math.nan,
) -> dict:
    return {
        "point_id": pid,
        "label": knobs.label(),
        "hardware": hw,
        "workload": "chat",
        **knobs.to_dict(),
        "optimizations": "+".join(knobs.optimizations()),
        "n_opts": len(knobs.optimizations()),
        "provenance": prov,
        "prior_source": "prior:li2024eagle" if prov == "prior" else "",
        "calib_provenance": calib,
        "quality": 0.4 * rel,
        "quality_lo": 0.2,
        "quality_hi": 0.6,
        "quality_rel": rel,
        "quality_rel_lo": rel_lo,
        "quality_rel_hi": rel_hi,
        "quality_provenance": qprov,
        "quality_evidence": qev,
        "kld": kld,
        "kld_lo": kld_lo,
        "kld_hi": kld_hi,
        "tpot_p99_ms": 20.0,
        "ttft_p99_ms": 100.0,
        "throughput_tok_s": 1.0 / cost,
        "cost_per_mtok": cost,
        "price_per_hour": 1.0,
        "price_date": "2026-07",
        "lat_rel_err": 0.1,
        "thr_rel_err": 0.1,
        "feasible": True,
    }


BASE = Knobs(weights="F16")
PRIOR_STACK = Knobs(weights="FP8", spec="eagle", spec_k=4, sparse_budget=0.25, slots=128)


def table() -> pd.DataFrame:
    return pd.DataFrame(
        [
            point("base", BASE, cost=1.0, qprov="inherited:f16", qev="inherited"),
            point(
                "prior-stack",
                PRIOR_STACK,
                cost=0.1,
                rel_lo=0.9,
                rel_hi=1.02,
                qprov="prior:micikevicius2022fp8 (FP8 weights of the Q4_K_M source)+prior:ribar2023sparq",
                qev="prior",
                prov="prior",
            ),
            point(
                "fp8-sim",
                Knobs(weights="FP8"),
                cost=0.3,
                rel_lo=0.9,
                rel_hi=1.02,
                qprov="prior:micikevicius2022fp8 (FP8 weights of the Q4_K_M source)",
                qev="prior",
            ),
        ]
    )


def test_a_prior_only_stack_cannot_win_by_default_and_is_projected_with_its_command():
    pts = table()
    cell = winners(pts, [Regime("cheap", "cost_per_mtok")], study_ref="default").set_index("hardware").loc["L4"]
    assert cell["point_id"] == "base"
    assert cell["quality_evidence"] == "inherited" and cell["speed_evidence"] == "calibrated"
    assert cell["projected_label"] == PRIOR_STACK.label() and cell["n_projected"] == 2
    cmd = cell["confirm_command"]
    assert "pareto-atlas quality default --kind evict --policies topk --keeps 0.25" in cmd  # the sparse prior
    assert 'weights = "FP8"' in cmd and "vllm" in cmd  # the weight prior, on a GPU
    assert 'spec = "eagle"' in cmd  # the speed prior
    proj = projected_cases(pts, [Regime("cheap", "cost_per_mtok")], winners(pts, [Regime("cheap", "cost_per_mtok")]))
    assert list(proj["point_id"]) == ["prior-stack", "fp8-sim"] and proj["confirm_command"].str.len().gt(0).all()


def test_the_opt_in_lets_priors_win():
    pts = table()
    cell = winners(pts, [Regime("cheap", "cost_per_mtok")], allow_priors=True).set_index("hardware").loc["L4"]
    assert (
        cell["point_id"] == "prior-stack" and cell["quality_evidence"] == "prior" and cell["speed_evidence"] == "prior"
    )
    assert pick(pts, None, "cost_per_mtok").winner["point_id"] == "base"
    assert pick(pts, None, "cost_per_mtok", allow_priors=True).winner["point_id"] == "prior-stack"
    r = pick(pts, None, "cost_per_mtok")
    assert list(r.projected["point_id"])[:1] == ["prior-stack"] and "confirm:" in r.summary()


def test_allowed_priors_are_judged_on_their_central_value_measured_boundaries_are_not():
    pts = table()
    pts.loc[pts.point_id == "base", ["quality_rel", "quality_rel_lo", "quality_rel_hi"]] = [0.97, 0.8, 1.1]
    pts.loc[pts.point_id == "fp8-sim", ["quality_rel", "quality_rel_lo"]] = [0.94, 0.85]
    a = admission(pts, Regime("cheap", "cost_per_mtok", quality_floor=0.95), allow_priors=True).set_index(pts.point_id)
    assert a["guard"].to_dict() == {"base": "boundary", "prior-stack": "boundary", "fp8-sim": "boundary"}
    # the prior at 1.0 passes on its word; the prior at 0.94 does not; a measured boundary stays on record
    assert a["admitted"].to_dict() == {"base": False, "prior-stack": True, "fp8-sim": False}


def test_kl_divergence_votes_in_the_guard():
    k = Knobs(weights="Q4_0")
    pts = pd.DataFrame(
        [
            # GSM8K cannot tell (boundary), KL clearly under the limit: in
            point("kl-in", k, cost=0.5, rel=0.9, rel_lo=0.6, rel_hi=1.2, kld=0.001, kld_lo=0.0009, kld_hi=0.0012),
            # GSM8K clearly in, KL clearly over the limit: out (either axis clearly failing removes it)
            point("kl-out", k, cost=0.4, rel=1.0, rel_lo=0.97, rel_hi=1.03, kld=0.5, kld_lo=0.45, kld_hi=0.55),
            # GSM8K boundary, KL straddles the limit: boundary
            point("kl-edge", k, cost=0.3, rel=0.9, rel_lo=0.6, rel_hi=1.2, kld=0.05, kld_lo=0.04, kld_hi=0.06),
            # no KL and a task interval that straddles: boundary
            point("task-only", k, cost=0.2, rel=0.9, rel_lo=0.6, rel_hi=1.2),
        ]
    )
    a = admission(pts, Regime("cheap", "cost_per_mtok", kld_max=0.05)).set_index(pts.point_id)
    assert a["guard"].to_dict() == {"kl-in": "in", "kl-out": "out", "kl-edge": "boundary", "task-only": "boundary"}
    assert a["admitted"].to_dict() == {"kl-in": True, "kl-out": False, "kl-edge": False, "task-only": False}
    # without a KL limit the task interval decides alone
    b = admission(pts, Regime("cheap", "cost_per_mtok")).set_index(pts.point_id)
    assert b.loc["kl-out", "admitted"] and not b.loc["kl-in", "admitted"]


def test_a_measured_kl_divergence_is_quality_evidence_for_a_prior_task_score():
    pts = pd.DataFrame(
        [
            point(
                "q8",
                Knobs(weights="Q8_0"),
                cost=0.5,
                rel_lo=0.98,
                qprov="prior:lossless re-encoding of the Q4_K_M source",
                qev="prior",
                kld=0.001,
                kld_lo=0.0009,
                kld_hi=0.0011,
            )
        ]
    )
    assert evidence_ok(pts).all()
    assert not evidence_ok(pts.assign(kld=np.nan)).all()


def test_evidence_is_read_from_old_tables_without_the_column():
    pts = table().drop(columns=["quality_evidence"])
    assert list(quality_evidence(pts)) == ["inherited", "prior", "prior"]
    assert list(speed_evidence(pts.assign(calib_provenance=["uncalibrated default", "", ""]))) == [
        "uncalibrated",
        "prior",
        "calibrated",
    ]


def test_confirm_command_for_an_eviction_prior_names_policy_and_keep():
    row = pd.Series(
        point(
            "x",
            Knobs(weights="Q4_K_M", eviction="h2o", kv_keep=0.5),
            cost=1.0,
            qprov="prior:cai2024pyramidkv",
            qev="prior",
        )
    )
    assert (
        confirm_command(row, "default")
        == "pareto-atlas quality default --kind evict --policies h2o --keeps 0.5 --task retrieval"
    )


def test_paired_difference_matches_newcombes_published_example():
    # Newcombe (1998), Stat Med 17:873, paired example a=12, b=9, c=2, d=21: method 10 gives
    # 0.1591 [0.0178, 0.2883]; the exact McNemar p for 9 vs 2 discordant pairs is 0.0654.
    x = [1] * 12 + [1] * 9 + [0] * 2 + [0] * 21
    y = [1] * 12 + [0] * 9 + [1] * 2 + [0] * 21
    d = paired_difference(x, y)
    assert d.diff == pytest.approx(0.1591, abs=5e-4)
    assert d.lo == pytest.approx(0.0178, abs=1e-3) and d.hi == pytest.approx(0.2883, abs=1.5e-3)
    assert d.mcnemar_p == pytest.approx(0.0654, abs=5e-4) and mcnemar_exact(0, 0) == 1.0


def test_identical_answers_on_ten_items_do_not_prove_the_floor():
    d = paired_difference([1] * 4 + [0] * 6, [1] * 4 + [0] * 6)
    rel, lo, hi = d.rel_interval()
    assert rel == 1.0 and lo < 0.95 < 1.0 < hi  # ten items cannot rule out a 5 % loss
    d200 = paired_difference([1] * 80 + [0] * 120, [1] * 80 + [0] * 120)
    assert d200.rel_interval()[1] > lo  # more items, tighter


def test_a_configuration_an_arm_already_serves_is_confirmed_by_measuring_that_arm():
    from pareto_atlas.atlas.evidence import StudyRef

    row = pd.Series(
        point(
            "q8",
            Knobs(weights="Q8_0", slots=8),
            cost=1.0,
            qprov="prior:lossless re-encoding of the Q4_K_M source",
            qev="prior",
        )
    )
    ref = StudyRef("default", {Knobs(weights="Q8_0").quality_key(): "q8_0"})
    assert confirm_command(row, ref).startswith("pareto-atlas quality default --kind kld --arm q8_0")
    assert confirm_command(row, "default").startswith('add [[arms]] name = "confirm", weights = "Q8_0"')


def test_a_card_calibrated_on_one_published_anchor_is_calibrated_not_a_default():
    pts = table().assign(
        calib_provenance=[
            "calibrated on 1 published anchor (vllm: vllm-perf-ci 1); error bar: none held out, kept at the uncalibrated default's",
            "uncalibrated default",
            "calibrated on 16 anchors (this-cpu)",
        ],
        provenance="simulated",
    )
    assert list(speed_evidence(pts)) == ["calibrated", "uncalibrated", "calibrated"]


def test_a_kl_backed_winner_says_so_in_its_quality_evidence():
    pts = pd.DataFrame(
        [
            point(
                "q8",
                Knobs(weights="Q8_0"),
                cost=0.5,
                rel_lo=0.98,
                qev="prior",
                qprov="prior:lossless re-encoding of the Q4_K_M source",
                kld=0.001,
                kld_lo=0.0009,
                kld_hi=0.0011,
            )
        ]
    )
    cell = winners(pts, [Regime("cheap", "cost_per_mtok", kld_max=0.05)]).set_index("hardware").loc["L4"]
    assert cell["point_id"] == "q8" and cell["quality_evidence"] == "kl-measured"
    assert cell["evidence"].startswith("quality KL-measured")


def test_a_projected_point_of_a_target_model_is_not_confirmed_by_measuring_the_study_model():
    # the study's arms and evict stage measure its [model] (the 0.5B); a 7B target's eviction point
    # cannot be confirmed by them, so the command names the 7B and how it could be measured
    from pareto_atlas.atlas.evidence import StudyRef

    ref = StudyRef("default", {}, "qwen2.5-coder-0.5b-instruct")
    knobs = Knobs(weights="F16", eviction="snapkv", kv_keep=0.25)
    row = pd.Series(point("e", knobs, cost=1.0, qprov="prior:snapkv (li2024snapkv)", qev="prior"))
    own = confirm_command(pd.concat([row, pd.Series({"model": "qwen2.5-coder-0.5b-instruct"})]), ref)
    assert own.startswith("pareto-atlas quality default --kind evict --policies snapkv --keeps 0.25")
    target = confirm_command(pd.concat([row, pd.Series({"model": "qwen2.5-7b-instruct"})]), ref)
    assert "pareto-atlas quality default --kind evict" not in target
    assert target.startswith("measure qwen2.5-7b-instruct itself") and "snapkv effect at keep 0.25" in target


def test_a_projected_speed_of_the_study_model_names_what_would_measure_it_on_that_card():
    """A GPU card whose fit saw no size of the study's own model projects its speed: the confirm command
    names what would measure one there (before: an empty command, printed as a bare "confirm:")."""
    from pareto_atlas.simulate.targets import SPEED_PROJECTED, second_size_hint

    row = pd.Series(point("b", Knobs(weights="FP8"), cost=1.0, qprov="published:card", qev="published"))
    hint = second_size_hint("B200", "u1.toml")
    row["calib_provenance"] = f"uncalibrated default; {SPEED_PROJECTED} for m: the fit saw 0 model size(s); {hint}"
    row["model"] = "m"
    assert confirm_command(row, "u1.toml") == hint
    assert "pareto-atlas calibrate u1.toml --published --table ROWS.csv" in hint
    row["calib_provenance"] = "calibrated on 12 published anchors"
    assert confirm_command(row, "u1.toml") == ""
