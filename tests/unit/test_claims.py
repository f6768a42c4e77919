"""The `paper` study and its claim-by-claim table: a study without arms builds on published evidence
alone, the verdicts are computed from the atlas (changing a winner flips one), and the paper's
numbers (report/paper_claims.toml) are read by no computation."""

from __future__ import annotations

import ast
import io
from pathlib import Path

import pytest
from rich.console import Console

from pareto_atlas import stages
from pareto_atlas.report import claim_checks as K
from pareto_atlas.report import claims as C
from pareto_atlas.report import paper_answers as A
from pareto_atlas.spec.study import StudyError, load_study, parse_study
from pareto_atlas.store import Store

SRC = Path(__file__).resolve().parents[2] / "src" / "pareto_atlas"


def small_paper(slots: tuple[int, ...] = (1, 8)):
    """The paper study on a grid small enough for the default suite: its three cards, weights and KV
    types, n-gram speculation, one and eight slots (as many clients), 20 requests a point."""
    s = load_study("paper")
    grid = s.simulate.grid.model_copy(
        update={
            "eviction": ["none"],
            "spec": ["none", "ngram"],
            "batching": ["continuous"],
            "slots": list(slots),
            "sparse_budget": [1.0],
        }
    )
    sim = s.simulate.model_copy(update={"concurrency": list(slots), "utilization": [], "n_requests": 20, "grid": grid})
    return s.model_copy(update={"simulate": sim})


@pytest.fixture()
def uncalibrated(monkeypatch):
    # the published fit takes a minute on 2 cores; the claims logic does not depend on it
    import pareto_atlas.calibrate.published_stage as ps

    monkeypatch.setattr(ps, "published_params", lambda *a, **k: {})


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """The small paper study simulated once (uncalibrated) for the tests that only read it."""
    import pareto_atlas.calibrate.published_stage as ps
    from pareto_atlas.simulate.stage import simulate_study

    study = small_paper()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ps, "published_params", lambda *a, **k: {})
        store = Store(tmp_path_factory.mktemp("paper") / "store.duckdb")
        simulate_study(study, store, Console(quiet=True))
    yield study, store
    store.close()


def _view(study, store, points=None):
    from pareto_atlas.atlas.stage import confirm_ref, study_points, study_regimes

    points = study_points(study, store) if points is None else points
    return A.atlas_view(points, study_regimes(study, points), study.model.name, study.workload.name, confirm_ref(study))


CTX = {"model": "qwen2.5-7b-instruct", "card": "qwen2.5-7b", "task": "gsm8k"}


def _rows(view) -> dict[str, K.ClaimRow]:
    return {r.id: r for r in K.claim_rows(view, C.load_references(), CTX)}


def _fp8_row(view) -> K.ClaimRow:
    refs = C.load_references()
    ref = next(c for c in refs["claims"] if c["id"] == "fp8-winners")
    return K.CHECKS["fp8-winners"](view, ref, {**CTX, "cards": refs["cards"]})[0]


def test_paper_study_is_builtin_without_arms_and_its_grid_is_the_papers():
    from pareto_atlas.simulate.space import default_knobs

    s = load_study("paper")
    assert not s.arms and not s.measures and s.claims == "paper" and s.baseline.weights == "F16"
    assert s.prices == {"L4": 0.39, "A100-80G-PCIe": 1.39, "H100-PCIe": 2.89} and s.price_date == "2026-07"
    kept = [k for k in default_knobs("gpu") if s.simulate.grid.keeps(k)]
    assert {k.weights for k in kept} == {"F16", "AWQ4", "FP8"} and {k.kv for k in kept} == {"f16", "fp8"}
    assert {k.spec for k in kept} == {"none", "ngram", "draft"} and {k.batching for k in kept} == {"continuous", "slo"}
    assert len(kept) == 3 * 2 * 2 * 3 * 2 * 4 * 2


@pytest.mark.parametrize(
    "grid, msg",
    [
        ('weights = ["FP4"]', "simulate.grid: weights: 'FP4' is not one of"),
        ("kv = []", "simulate.grid: kv: an empty list keeps no configuration"),
        ("slots = [0]", "simulate.grid.slots.0"),
    ],
)
def test_bad_grid_is_one_line_naming_the_field(grid, msg):
    text = f'name = "g"\n[model]\nname = "m"\ncard = "qwen2.5-7b"\n[simulate.grid]\n{grid}\n'
    with pytest.raises(StudyError) as e:
        parse_study(text, "g.toml")
    assert str(e.value).startswith("g.toml: ") and msg in str(e.value) and "\n" not in str(e.value)


def test_build_of_a_study_without_arms_skips_measuring_and_prints_the_claims(tmp_path, uncalibrated):
    buf = io.StringIO()
    ctx = stages.Context(
        small_paper(slots=(1,)), tmp_path, Store(tmp_path / "store.duckdb"), Console(file=buf, width=200)
    )
    with ctx:
        stages.build(ctx)
    out = buf.getvalue()
    assert "no [[arms]], nothing to measure on an engine: skipping measure, quality, kld, evict, calibrate" in out
    assert "── measure" not in out and "── simulate" in out and "── report" in out
    assert "The seed paper's claims, claim by claim" in out and (tmp_path / "paper_claims.md").is_file()
    assert "no winner rests on prior-only quality" in out


def test_claims_table_verdicts_and_the_evidence_rule(small):
    study, store = small
    view = _view(study, store)
    rows = _rows(view)
    refs = C.load_references()
    assert all(r.verdict in (K.AGREES, K.DIFFERS, K.CANNOT) for r in rows.values())
    assert {r["id"] for r in refs["claims"]} == {i.split(":")[0] for i in rows}
    # FP8 weights and an FP8 KV cache have no published score for the model: the honest answer
    assert rows["fp8-winners"].verdict == K.CANNOT and "FP8 weights" in rows["fp8-winners"].evidence
    assert rows["fp8-kv-eliminated"].verdict == K.CANNOT
    assert rows["awq-boundary"].verdict == K.CANNOT and "W4A16" in rows["awq-boundary"].evidence
    # no winner rests on a prior: the model at its own precision, with its published baseline score
    ev = A.winner_evidence(view)
    assert ev and all(e not in A.PRIOR_ONLY and e for e, _ in ev.values())
    assert all(A.winner(view, n).weights == "F16" for n in ev)


def test_a_winner_that_changes_flips_the_verdict(small):
    """Give FP8 weights a published score: FP8 then wins where it is faster and the FP8 claim's
    verdict moves off "cannot say" on the product's own count."""
    from pareto_atlas.atlas.stage import study_points

    study, store = small
    before = _fp8_row(_view(study, store))
    pts = study_points(study, store)
    fp8 = (pts.weights == "FP8") & (pts.kv == "f16")
    pts.loc[fp8, ["quality_rel", "quality_rel_lo", "quality_rel_hi"]] = [1.0, 0.99, 1.01]
    pts.loc[fp8, "quality_evidence"] = "published"
    pts.loc[fp8, "quality_provenance"] = "published:test"
    view = _view(study, store, pts)
    after = _fp8_row(view)
    n = sum(A.winner(view, r.name).weights == "FP8" for r in view.regimes)
    assert before.verdict == K.CANNOT and n >= 1
    assert after.verdict == (K.AGREES if n == 3 else K.DIFFERS) and f"FP8 is in {n} of 4" in after.answer


def test_the_references_are_read_by_no_computation(tmp_path, uncalibrated, monkeypatch):
    """With the references' loader raising, the whole computation still runs: simulate, atlas, and
    every answer the claims table compares with them."""
    from pareto_atlas.atlas.stage import atlas_study
    from pareto_atlas.simulate.stage import simulate_study

    def refuse(*a, **k):
        raise AssertionError("a computation read the paper's references")

    monkeypatch.setattr(C, "load_references", refuse)
    study = small_paper(slots=(1,))
    with Store(tmp_path / "s.duckdb") as store:
        simulate_study(study, store, Console(quiet=True))
        atlas_study(study, store, Console(quiet=True))
        view = _view(study, store)
    for r in view.regimes:
        A.winner(view, r.name), A.projected_beating_winner(view, r.name)
    A.frontier_counts(view), A.frontier_counts(view, evidence_only=True)
    A.meets_budget(view, "tight-latency", "L4"), A.tpot_ratio(view, "L4", {}, weights="AWQ4")
    A.guard_verdicts(view, A.is_knobs(weights="AWQ4"), "quality-floor"), A.spec_gains(view, "ngram")
    A.reprice_moves(view, {"A100-80G-PCIe": 2.0})
    with pytest.raises(AssertionError, match="references"), Store(tmp_path / "s.duckdb") as store:
        C.claims_study(study, store, tmp_path, Console(quiet=True))


READERS = {"load_references", "paper_ratio_refs"}
PRINTERS = {
    ("report/claims.py", "claims_study"),
    ("report/claims.py", "load_references"),
    ("report/claims.py", "paper_ratio_refs"),
    ("report/claims.py", "ratio_lines"),
    ("report/claims.py", "page_claims"),
}  # the HTML atlas prints the table too


def test_only_the_printers_name_the_references():
    """Statically: the file's name appears only in report.claims, and its loaders are called only
    from printing functions."""
    seen = set()
    for path in SRC.rglob("*.py"):
        rel = str(path.relative_to(SRC))
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):  # code that could open the file names it in a string
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "paper_claims.toml" in node.value:
                assert rel == "report/claims.py", f"{rel} names the references file"
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
                if name in READERS or (isinstance(node, ast.alias) and node.name in READERS):
                    seen.add((rel, fn.name))
    assert seen and seen <= PRINTERS, sorted(seen - PRINTERS)


@pytest.mark.slow
def test_build_paper_end_to_end(tmp_path):
    """`build --study paper` as shipped (published fits, the full grid): exits 0 and prints the table."""
    from typer.testing import CliRunner

    from pareto_atlas.cli import app

    res = CliRunner().invoke(app, ["build", "--study", "paper", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    md = (tmp_path / "paper_claims.md").read_text()
    assert md.count("\n| ") >= 13 and "no winner rests on prior-only quality" in res.output


def test_a_study_without_arms_answers_from_the_ladder_and_sparse_attention_is_not_the_dense_score():
    """The model of a study without arms is not "measured here"; a sparse-attention configuration of
    it rests on a prior, never on the dense model's published score (the published table has no
    sparse rows)."""
    from pareto_atlas.calibrate.stage import model_card
    from pareto_atlas.simulate.space import Workload
    from pareto_atlas.simulate.targets import study_targets
    from pareto_atlas.spec.cards import shipped_hardware
    from pareto_atlas.spec.knobs import Knobs
    from pareto_atlas.store.ladder import target_quality

    s = load_study("paper")
    t = study_targets(s, model_card(s), [shipped_hardware()["L4"]], [Workload("chat-512-128", 512, 128)])[0]
    assert not t.measured and t.name == "qwen2.5-7b-instruct"
    dense = target_quality(Knobs(weights="F16"), t, "gpu", s, {}, "gsm8k")
    sparse = target_quality(Knobs(weights="F16", sparse_budget=0.25), t, "gpu", s, {}, "gsm8k")
    assert dense.evidence == "reference" and "published:" in dense.provenance
    assert sparse.evidence == "prior" and "prior:" in sparse.provenance and sparse.rel_lo < 1.0


@pytest.mark.parametrize("stage", ["measure", "quality", "kld", "calibrate"])
def test_measuring_stages_of_a_study_without_arms_say_so_in_one_line(tmp_path, stage):
    with stages.Context(load_study("paper"), tmp_path, Store(tmp_path / "s.duckdb"), Console(quiet=True)) as ctx:
        with pytest.raises(StudyError, match=rf"^{stage}: study 'paper' has no \[\[arms\]\], nothing to run"):
            getattr(stages, stage)(ctx)


def test_stacked_vs_single_rates_are_compared_on_an_interval():
    lo, hi = K.rate_difference(11, 126, 10, 144)  # 8.7 % vs 6.9 %: not separated
    assert lo < 0 < hi
    lo, hi = K.rate_difference(60, 100, 10, 100)
    assert 0 < lo < 0.5 < hi < 0.65
