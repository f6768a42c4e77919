"""Issue 34, items 4 and 5: published quality with a between-source term, and published quality
that matches the method it is evidence for (the KV cache's scales and implementation)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from rich.console import Console

from pareto_atlas.quality.kv_method import kv_method
from pareto_atlas.quality.published import (
    guard_choice,
    load_published_quality,
    published_for,
)
from pareto_atlas.quality.published_pool import guard_interval
from pareto_atlas.quality.published_table import (
    COLUMNS,
    PublishedQualityError,
    read_quality_table,
)

DATA = Path(__file__).resolve().parents[1] / "data"
ROW = dict(
    source_date="2025-01",
    publisher="P",
    model="llama-3.1-8b",
    checkpoint="c",
    baseline_checkpoint="b",
    method="W4A16 GPTQ",
    weights="W4A16",
    kv="f16",
    eviction="none",
    benchmark="gsm8k",
    metric="m",
    n_items="1319",
    baseline_score="80.0",
    scale="percent",
)


def _table(tmp_path: Path, rows: list[dict]) -> Path:
    p = tmp_path / "pq.csv"
    with p.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(COLUMNS))
        w.writeheader()
        for r in rows:
            w.writerow({**ROW, **r})
    return p


def _two_sources(tmp_path: Path) -> Path:
    # one method, two documents: 8-shot CoT at no loss, 5-shot strict about 7 % below baseline
    return _table(
        tmp_path,
        [
            dict(source="https://example.org/a", score="80.0", shots="8"),
            dict(source="https://example.org/b", score="74.4", shots="5", metric="strict"),
        ],
    )


def test_two_sources_of_one_method_give_the_envelope_of_their_intervals(tmp_path):
    tab = load_published_quality([_two_sources(tmp_path)])
    hits = published_for("llama-3.1-8b", "W4A16", table=tab)
    one = guard_choice(hits)
    pooled = guard_interval(hits)
    gsm = [h for h in hits if h.benchmark == "gsm8k"]  # the shipped Red Hat card and the two here
    b = next(h for h in gsm if h.source.endswith("/b"))
    assert pooled.rel_lo == pytest.approx(min(h.rel_lo for h in gsm))
    assert pooled.rel_hi == pytest.approx(max(h.rel_hi for h in gsm))
    assert one.source.endswith("/b") and pooled.rel_hi > one.rel_hi  # wider than the pessimistic one alone
    assert pooled.rel == pytest.approx(b.rel)  # centre: the most pessimistic source
    assert "envelope of 3 documents" in pooled.method and "example.org/a" in pooled.provenance


def test_one_source_keeps_its_own_interval(tmp_path):
    tab = load_published_quality([_table(tmp_path, [dict(source="https://example.org/a", score="79.0")])])
    hits = [h for h in published_for("llama-3.1-8b", "W4A16", table=tab) if "example.org" in h.source]
    assert guard_interval(hits) == guard_choice(hits)


def test_the_ladder_uses_the_envelope(tmp_path):
    from pareto_atlas.simulate.targets import Target
    from pareto_atlas.spec.cards import shipped_models
    from pareto_atlas.spec.knobs import Knobs
    from pareto_atlas.store.ladder import published_quality

    tab = load_published_quality([_two_sources(tmp_path)])
    tab = tab[tab.source.str.startswith("https://example.org")]
    t = Target("x", shipped_models()["llama-3.1-8b"], (), (), False)
    q = published_quality(t, Knobs(weights="W4A16"), "gsm8k", tab)
    assert q.provenance.startswith("published:envelope of 2 sources gsm8k")
    assert q.rel_lo < 0.93 * 0.98 and q.rel_hi > 1.0


def test_the_command_prints_the_sources_and_the_combined_interval(tmp_path):
    from pareto_atlas.stages.run import published_quality

    con = Console(record=True, width=400)
    published_quality(con, [_two_sources(tmp_path)], "llama-3.1-8b", "gsm8k")
    text = con.export_text()
    line = next(ln for ln in text.splitlines() if "weights W4A16" in ln)
    assert "between-source envelope of 3 documents" in line  # the shipped W4A16 card and the two here
    assert "source https://example.org/a: rel 1.000" in text and "source https://example.org/b: rel 0.930" in text


def test_a_kv_method_outside_the_vocabulary_is_refused(tmp_path):
    p = _table(tmp_path, [dict(source="https://example.org/a", score="79.0", kv="fp8", kv_scales="guessed")])
    with pytest.raises(PublishedQualityError, match=r"pq.csv:2: field 'kv_scales': 'guessed' is not allowed"):
        read_quality_table(p)


def test_shipped_quantized_kv_rows_name_their_method_and_vllm_fp8_is_default_scales():
    rows = [r for r in read_quality_table() if r["kv"] not in ("f16", "bf16")]
    assert rows and all(r["kv_scales"] and r["kv_engine"] for r in rows)
    inc = [r for r in rows if "PT_FP8Quant" in r["source"]]
    assert inc and {r["kv_scales"] for r in inc} == {"calibrated"}
    m = kv_method("vllm", "fp8")
    assert m.kv_scales == "default" and m.kv_granularity == "per-tensor" and "@" in m.source


def test_a_calibrated_score_is_no_evidence_for_default_scales():
    tab = load_published_quality()
    calibrated = published_for("llama-3.1-8b", "FP8", "fp8", table=tab, kv_scales="calibrated")
    assert calibrated and all("calibrated" in h.kv_method for h in calibrated)
    assert published_for("llama-3.1-8b", "FP8", "fp8", table=tab, kv_scales="default") == []


def test_a_llama_study_on_vllm_with_no_arms_admits_no_fp8_kv_on_calibrated_evidence():
    """The bar of item 5: vLLM's kv = "fp8" (default scales) never inherits the calibrated INC score."""
    from pareto_atlas.calibrate.stage import model_card
    from pareto_atlas.simulate.space import Workload
    from pareto_atlas.simulate.targets import study_targets
    from pareto_atlas.spec.cards import shipped_hardware
    from pareto_atlas.spec.knobs import Knobs
    from pareto_atlas.spec.study import load_study
    from pareto_atlas.store.ladder import target_quality

    s = load_study(DATA / "studies" / "llama31_8b_vllm_no_arms.toml")
    assert not s.measures
    hw = [shipped_hardware()[h] for h in ("H100-SXM", "L4")]
    t = study_targets(s, model_card(s), hw, [Workload("chat-512-128", 512, 128)])[0]
    for weights in ("FP8", "BF16"):
        q = target_quality(Knobs(weights=weights, kv="fp8"), t, "gpu", s, {}, "gsm8k")
        assert "neural-compressor" not in q.provenance and q.evidence not in ("published", "measured", "carried")
    # the same knobs with an f16 cache still rest on their own published score
    assert target_quality(Knobs(weights="FP8"), t, "gpu", s, {}, "gsm8k").evidence == "published"


def test_the_command_says_the_calibrated_score_is_not_vllm_s_method():
    from pareto_atlas.stages.run import published_quality

    con = Console(record=True, width=400)
    published_quality(con, [], "llama-3.1-8b", "gsm8k")
    text = con.export_text()
    assert "KV method: calibrated scales" in text
    assert "vLLM kv=fp8 runs vLLM fp8 KV, default per-tensor scales" in text
    assert "0 of these score(s) are that method: the atlas's vLLM configurations with this KV cache do not rest" in text
