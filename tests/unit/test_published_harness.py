"""A collection's harness wait (calibrate.published_harness): a count of requests always queued, fitted on
the collection's rows of other models only, taken by a published row's as-run deployment and by nothing else."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pareto_atlas.calibrate import published_harness as ph
from pareto_atlas.calibrate import published_runs as pr
from pareto_atlas.calibrate.published_table import COLUMNS, PARALLEL_DEFAULT

GAP = "/x/aic-auto-gap-analysis/data/h100_sxm"


def test_a_rows_collection_is_its_source_file_less_its_engine_and_version():
    assert ph.collection_of(f"{GAP}/trtllm/1.0.0rc3/m.csv", "trtllm", "1.0.0rc3") == GAP
    assert ph.collection_of(f"{GAP}/sglang/0.5.1.post1/m.csv", "sglang", "0.5.1.post1") == GAP
    # a tail naming another engine or version is not stripped; a flat file is a collection of its own
    assert ph.collection_of(f"{GAP}/trtllm/1.0.0rc3/m.csv", "vllm", "1.0.0rc3").endswith("m.csv")
    assert ph.collection_of("2026-04-06.csv", "trtllm", "unstated") == "2026-04-06.csv"
    assert ph.collection_of("", "trtllm", "x") == ""
    row = pd.Series(
        {
            "engine": "vllm",
            "engine_version": "0.12.0",
            "notes": f"agg; silicon_data_source: source_file={GAP}/vllm/0.12.0/q.csv; model=Q",
        }
    )
    assert ph.source_file(row) == f"{GAP}/vllm/0.12.0/q.csv" and ph.collection(row) == GAP


def _synthetic(monkeypatch, waits: dict[str, float], n: int = 8):
    """A collection whose rows of each model have L = waits[model] (TTFT x clients / E2E), 8 clients."""
    rows = []
    for model, L in waits.items():
        # E2E = TTFT + 99 x TPOT; L = 8 TTFT / E2E  =>  TTFT = L x 99 x TPOT / (8 - L)
        tpot = 10.0
        ttft = L * 99 * tpot / (8 - L)
        rows += [dict(collection="C", model=model, load_value="8", ttft_ms=ttft, tpot_ms=tpot, output_tokens="100")] * n
    frame = pd.DataFrame(rows)
    frame["L"] = ph.littles_l(frame)
    assert np.allclose(frame.L, [waits[m] for m in frame.model])
    monkeypatch.setattr(ph, "collection_rows", lambda: frame)
    ph.fit_wait.cache_clear()
    return frame


def test_the_count_rests_on_other_models_rows_only(monkeypatch):
    _synthetic(monkeypatch, {"a": 1.3, "b": 0.2})
    # a's rows wait (L >= 1) and b's do not: b gets a's count, a gets b's, never its own
    assert ph.fit_wait("C", "b").count == 1
    assert ph.fit_wait("C", "a").count == 0
    assert ph.fit_wait("C", "c").count == 0  # the low quantile over a's and b's rows pooled
    assert (
        "fitted, not sourced" in ph.fit_wait("C", "b").provenance()
        and "b left out" in ph.fit_wait("C", "b").provenance()
    )
    ph.fit_wait.cache_clear()


def test_too_few_rows_of_other_models_fit_no_wait(monkeypatch):
    _synthetic(monkeypatch, {"a": 2.5, "b": 0.2}, n=ph.MIN_ROWS - 1)
    w = ph.fit_wait("C", "b")
    assert (w.count, w.rows) == (0, ph.MIN_ROWS - 1) and "(< 6)" in w.provenance()
    ph.fit_wait.cache_clear()


def _row(**kw) -> pd.Series:
    r = {c: "" for c in COLUMNS} | dict(PARALLEL_DEFAULT)
    r.update(
        source_id=pr.AICONFIGURATOR,
        engine="trtllm",
        engine_version="1.0.0rc3",
        gpu="H100-SXM",
        model="b",
        weights="BF16",
        prompt_tokens="1024",
        output_tokens="128",
        load="concurrency",
        load_value="8",
        notes="silicon_data_source: source_file=C; model=b",
    )
    r.update({k: str(v) for k, v in kw.items()})
    return pd.Series(r)


def test_the_as_run_deployment_takes_the_wait_and_the_switch_removes_it(monkeypatch):
    _synthetic(monkeypatch, {"a": 1.3, "b": 0.2})
    run = pr.row_run(_row())
    assert (run.max_seqs, run.queued) == (7, 1)  # 8 clients, one always queued: 7 seats
    assert pr.row_run(_row(model="a")).max_seqs == 8
    monkeypatch.setenv(ph.ENV, "0")
    assert ph.harness_wait(_row()) is None and pr.row_run(_row()).max_seqs == 8
    assert ph.cache_part() == "|harness-off"
    ph.fit_wait.cache_clear()


def test_the_fit_cache_never_reads_a_fit_made_with_the_term_off_back_on(monkeypatch):
    from pareto_atlas.calibrate.published_cache import fit_key
    from pareto_atlas.calibrate.published_table import load_published

    table = load_published()
    on = fit_key(table)
    monkeypatch.setenv(ph.ENV, "0")
    assert fit_key(table) != on


def test_on_the_shipped_tables_the_8b_rows_wait_and_the_collections_other_models_do_not():
    """The finding of docs/results/2026-12-02-harness-wait.md: in aiconfigurator's H100-SXM gap-analysis
    collection the Llama-3.1-8B rows (TensorRT-LLM 1.0.0rc3) have L >= 1 on most rows at <= 16 clients,
    the same engine version's Qwen3-32B and Qwen3-235B rows do not, so the count fitted without the 8B is 0."""
    rows = ph.collection_rows()
    gap = rows[rows.collection.str.endswith("aic-auto-gap-analysis/data/h100_sxm")]
    assert len(gap), "the H100-SXM gap-analysis collection is in the shipped tables"
    low = gap[gap.load_value.astype(float) <= ph.LOW]
    own = low[low.model == "llama-3.1-8b"].L
    assert np.quantile(own, ph.QUANTILE) >= 1.0
    trt32 = low[(low.model == "qwen3-32b") & (low.engine == "trtllm")].L
    assert np.quantile(trt32, ph.QUANTILE) < 1.0
    w = ph.fit_wait(gap.collection.iloc[0], "llama-3.1-8b")
    assert w.count == 0 and w.rows >= ph.MIN_ROWS
    # leave-one-model-out is what makes it 0: the 8B's own rows would give one
    assert int(np.floor(np.quantile(own, ph.QUANTILE))) == 1


def test_only_the_published_rows_as_run_take_the_wait():
    """The term is a published collection's, never the atlas's own: only published_runs (a row as run)
    takes it; the fit caches read its switch."""
    from pathlib import Path

    import pareto_atlas

    root = Path(pareto_atlas.__file__).parent
    users = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if "published_harness import" in p.read_text() and p.name != "published_harness.py"
    )
    assert users == ["calibrate/published_cache.py", "calibrate/published_multigpu.py", "calibrate/published_runs.py"]
    runs = (root / "calibrate/published_runs.py").read_text()
    assert "harness_wait(row)" in runs.split("def row_run")[1].split("\ndef ")[0]
