"""Winners name their deployment in words where they hold more than one GPU, and the atlas prints,
per (model, card), why configurations were infeasible."""

from __future__ import annotations

import io

import pandas as pd
from rich.console import Console

from pareto_atlas.atlas import stage as S
from pareto_atlas.atlas.answer import Answer
from pareto_atlas.atlas.evidence import quality_evidence
from pareto_atlas.atlas.infeasible import infeasible_summary
from pareto_atlas.atlas.objectives import with_derived
from pareto_atlas.atlas.tables import print_winners
from pareto_atlas.atlas.winners import winners
from pareto_atlas.report.export import winners_markdown
from pareto_atlas.simulate.space import Load, Space, Workload
from pareto_atlas.simulate.sweep import sweep
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.study import load_study
from pareto_atlas.store import Store
from synthetic import synthetic_points

PCIE = "H100-PCIe"


def _parallel_points() -> pd.DataFrame:
    """Synthetic points whose H100-PCIe configurations are TP4 x 2 replicas (8 GPUs); the rest one GPU."""
    pts = synthetic_points(seed=3, workloads=("chat-512-128",), measured_fraction=0.3)
    for f in ("tp", "pp", "replicas", "prefill_workers", "decode_workers"):
        pts[f] = 1
    pts["prefill_tp"] = 0
    on = pts.hardware == PCIE
    pts.loc[on, "tp"], pts.loc[on, "replicas"] = 4, 2
    return pts.assign(quality_evidence=quality_evidence(pts))  # as the store's points table has it


def _console() -> tuple[io.StringIO, Console]:
    buf = io.StringIO()
    return buf, Console(file=buf, width=240)


def test_a_winner_on_several_gpus_names_its_gpus_and_parallelism_and_one_gpu_says_nothing_more():
    pts = _parallel_points()
    cells = winners(pts, S.study_regimes(load_study("default"), with_derived(pts)))
    won = cells[cells.point_id.astype(bool)]
    on_pcie = won[won.hardware == PCIE]
    assert len(on_pcie) and len(won[won.hardware == "L4"])
    for c in on_pcie.itertuples():
        weights = pts.set_index("point_id").loc[c.point_id, "weights"]
        assert c.deployment == f"{weights}, TP4 \u00d7 2 replicas, 8 \u00d7 {PCIE}"
    assert (won[won.hardware == "L4"].deployment == "").all()
    md = winners_markdown(cells)
    assert f"TP4 \u00d7 2 replicas, 8 \u00d7 {PCIE}" in md
    buf, con = _console()
    print_winners(cells, con, PCIE)
    assert f"8 \u00d7 {PCIE}" in buf.getvalue()


def test_the_infeasible_summary_counts_configurations_per_reason_from_the_simulator():
    m, h100 = shipped_models()["llama-3.1-70b"], shipped_hardware()["H100-SXM"]
    ks = (Knobs(), Knobs(slots=4), Knobs(tp=2), Knobs(tp=4))
    # two loads: a configuration counts once whatever it was simulated under
    df = sweep(
        Space(m, (h100,), ks, (Workload("w", 512, 64),), (Load(concurrency=1), Load(concurrency=4)), {}), n_requests=20
    )
    df["model"] = m.name
    [entry] = infeasible_summary(df)
    assert (entry.model, entry.hardware, entry.n_infeasible, entry.n_configs) == (m.name, "H100-SXM", 2, 4)
    [(reason, n)] = entry.reasons
    assert n == 2 and "141 GB of weights" in reason and "TP x PP >= 2" in reason
    lines = entry.lines()
    assert lines[0] == f"2 of 4 configurations infeasible ({m.name} on H100-SXM)" and lines[1].startswith("  2 \u00d7 ")
    assert infeasible_summary(df[df.feasible]) == []
    # on 24 GiB cards F16 fits at no TP up to 4: one shortfall, counted once for every layout tried
    l4 = sweep(
        Space(m, (shipped_hardware()["L4"],), ks, (Workload("w", 512, 64),), (Load(concurrency=1),), {}), n_requests=20
    )
    [entry] = infeasible_summary(l4)
    assert entry.n_infeasible == entry.n_configs == 4
    assert entry.reasons == (
        (f"{m.name} F16 needs 141 GB of weights, over 90% of L4's 24 GiB: TP x PP >= 8 on 24 GiB cards", 4),
    )


def test_the_atlas_prints_why_configurations_were_infeasible(tmp_path, monkeypatch):
    pts = _parallel_points()
    bad = pts.hardware == "L4"
    pts.loc[bad, "feasible"] = False
    pts.loc[bad, "infeasible_reason"] = (
        "m F16 needs 141 GB of weights, over 90% of L4's 24 GiB: TP x PP >= 8 on 24 GiB cards"
    )
    monkeypatch.setattr(S, "all_points", lambda study, store: pts.copy())
    buf, con = _console()
    with Store(tmp_path / "store.duckdb") as store:
        S.atlas_study(load_study("default"), store, con)
    out = buf.getvalue()
    n = pts.loc[bad, "label"].nunique()
    assert f"{n} of {n} configurations infeasible (L4): none fits" in out
    assert f"  {n} \u00d7 m F16 needs 141 GB of weights" in out and "TP x PP >= 8 on 24 GiB cards" in out
    assert "infeasible (H100-PCIe)" not in out


def test_the_answer_carries_the_deployment_into_winners_json(tmp_path, monkeypatch):
    pts = _parallel_points()
    answer = Answer.of(with_derived(pts), S.study_regimes(load_study("default"), with_derived(pts)))
    assert "deployment" in answer.cells.columns
    path = tmp_path / "w.json"
    answer.cells.to_json(path, orient="records")
    back = pd.read_json(path, orient="records", dtype=False)
    assert back.deployment.fillna("").str.contains("8 \u00d7 H100-PCIe").any()


def test_pick_names_the_deployment_of_a_winner_on_several_gpus():
    from pareto_atlas.atlas.pick import pick
    from pareto_atlas.atlas.question import Question

    pts = _parallel_points()
    res = pick(pts[pts.hardware == PCIE], question=Question.make("tpot_p99_ms<=1e9"))
    assert res.winner is not None and f"TP4 \u00d7 2 replicas, 8 \u00d7 {PCIE})" in res.summary()
    one = pick(pts[pts.hardware == "L4"], question=Question.make("tpot_p99_ms<=1e9"))
    assert one.winner["deployment"] == "" and "replicas" not in one.summary()


def test_a_cell_without_a_winner_shows_no_deployment_and_no_empty_command_in_markdown():
    """A cell no configuration wins has no deployment (NaN once cells of both kinds are one frame) and,
    where its projected point needs no command, no dangling separator: the table shows neither."""
    base = dict(model="m", workload="w", load="", provenance="", direction="min", objective="tpot_p99_ms")
    won = dict(base, regime="r", hardware="H200", label="vllm:FP8+tp2", point_id="p1", value=5.0, value_lo=4.0)
    won.update(value_hi=6.0, quality_rel=0.99, note="", deployment="FP8, TP2, 2 \u00d7 H200", stack_beats_singles=True)
    empty = dict(base, regime="r", hardware="B200", label="", point_id="", value=float("nan"), value_lo=float("nan"))
    empty.update(value_hi=float("nan"), quality_rel=float("nan"), note="none meets", stack_beats_singles=False)
    empty.update(projected_label="vllm:FP8", projected_hardware="B200", projected_value=5.4, confirm_command="")
    cells = pd.DataFrame([won, empty])  # the winner's deployment and the empty cell's projection: NaN elsewhere
    md = winners_markdown(cells)
    row = next(line for line in md.splitlines() if "| B200 |" in line)
    assert "(nan)" not in md and "nan" not in row.split("|")[5]
    assert "projected — measure to confirm: vllm:FP8 on B200 (5.4) |" in row
    assert "vllm:FP8+tp2 (FP8, TP2, 2 \u00d7 H200)" in md


def test_an_moe_models_weight_reason_counts_its_gpus_per_worker_with_attention_dp_not_tp_x_pp():
    """An MoE worker spreads its experts over its TP x attention-DP GPUs (simulate.moe.weights_per_gpu):
    where its weights do not fit, the reason names the GPUs a worker needs counted that way and the
    layout with its attention-DP, not TP x PP, which tp2 attn_dp4 ep8 would seem to break. A dense
    model's reason keeps its TP x PP wording (pinned above)."""
    from pareto_atlas.simulate.memory import plan_memory
    from pareto_atlas.simulate.params import default_params

    m, h100 = shipped_models()["qwen3-235b-a22b"], shipped_hardware()["H100-SXM"]
    p = default_params(h100, "vllm")
    one = plan_memory(m, h100, Knobs(weights="F16"), 1024, 1024, p)
    split = plan_memory(m, h100, Knobs(weights="F16", tp=2, attn_dp=2, ep=4), 1024, 1024, p)
    assert not one.feasible and not split.feasible
    for plan in (one, split):
        assert "GPUs per worker (TP x attention-DP x PP) >= " in plan.reason and "TP x PP >=" not in plan.reason
    assert "at tp 2 x attn_dp 2 x pp 1 (" in split.reason
    assert plan_memory(m, h100, Knobs(weights="F16", tp=2, attn_dp=4, ep=8), 1024, 1024, p).feasible
