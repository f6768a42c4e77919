"""Published quality evidence: the shipped table's rows and pairing, the interval maths on cases
worked by hand, one-line errors for bad rows, user tables extending the shipped one, and the rule
the quality guard uses to pick one score."""

from __future__ import annotations

import csv
import io
import math
import re

import pytest

from pareto_atlas.quality.published import (
    COLUMNS,
    PublishedQuality,
    PublishedQualityError,
    guard_choice,
    load_published_quality,
    published_for,
    ratio_interval,
    summary_lines,
    wilson,
)
from pareto_atlas.quality.published_table import KV, REQUIRED, SCALES, SOURCE, WEIGHTS, row_error
from pareto_atlas.spec.cards import shipped_models
from pareto_atlas.spec.knobs import EVICTION

Z = 1.959963984540054
GOOD = {
    "source": "https://example.org/eval",
    "source_date": "2025-03-01",
    "publisher": "Example Lab",
    "model": "qwen2.5-7b",
    "checkpoint": "example/Qwen2.5-7B-Instruct-FP8",
    "baseline_checkpoint": "Qwen/Qwen2.5-7B-Instruct",
    "method": "FP8 dynamic",
    "weights": "FP8",
    "kv": "f16",
    "eviction": "none",
    "kv_budget": "",
    "benchmark": "gsm8k",
    "shots": "5",
    "metric": "exact_match,strict-match",
    "n_items": "1000",
    "score": "80.0",
    "baseline_score": "82.0",
    "score_stderr": "",
    "baseline_stderr": "",
    "scale": "percent",
    "harness": "lm-eval 0.4.5",
    "proxy_for": "",
    "notes": "",
}


def _write(path, rows: list[dict], columns=COLUMNS) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, columns, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    path.write_text(buf.getvalue())
    return str(path)


@pytest.fixture(scope="module")
def shipped():
    return load_published_quality()


# --- the shipped table ------------------------------------------------------------------------------------------


def test_shipped_table_size_and_independent_sources(shipped):
    assert len(shipped) >= 40
    assert shipped["source"].nunique() >= 5
    assert shipped["publisher"].nunique() >= 5
    assert list(shipped.columns[: len(COLUMNS)]) == list(COLUMNS)


def test_every_shipped_row_is_valid_field_by_field(shipped):
    models = sorted(shipped_models())
    for _, r in shipped.iterrows():
        row = {c: r[c] for c in COLUMNS}
        assert row_error(row, models) == "", r["origin"]
        assert all(row[f] for f in REQUIRED), r["origin"]
        assert SOURCE.match(row["source"]) and re.match(r"^\d{4}-\d{2}(-\d{2})?$", row["source_date"])
        assert row["model"] in models and row["kv"] in KV and row["eviction"] in EVICTION and row["scale"] in SCALES
        assert row["weights"] == "" or row["weights"] in WEIGHTS
        top = {"percent": 100.0, "proportion": 1.0}.get(row["scale"], math.inf)
        assert 0 <= float(row["score"]) <= top and 0 < float(row["baseline_score"]) <= top, r["origin"]
        assert (row["kv_budget"] != "") == (row["eviction"] != "none"), r["origin"]


def test_each_score_is_paired_with_its_own_documents_baseline(shipped):
    """One document prints one baseline per benchmark setting, so the baseline of every row of a
    source is the one its sibling rows of that source carry, never another document's."""
    keys = ["source", "model", "baseline_checkpoint", "benchmark", "metric", "shots"]
    per_key = shipped.groupby(keys)["baseline_score"].nunique()
    assert (per_key == 1).all(), per_key[per_key > 1]
    # The Red Hat Llama-3.1 cards printed different baselines after the chat-template change: each
    # card keeps its own (82.0 beside FP8-dynamic, 82.8 beside w4a16), never a shared one.
    gsm = shipped[(shipped.model == "llama-3.1-8b") & (shipped.benchmark == "gsm8k")]
    by_card = dict(zip(gsm["weights"], gsm["baseline_score"]))
    assert by_card == {"FP8": "82.0", "W4A16": "82.8"}


def test_shipped_coverage_of_the_deployed_knobs(shipped):
    for model in ("qwen2.5-7b", "llama-3.1-8b"):
        gsm = shipped[(shipped.model == model) & (shipped.benchmark == "gsm8k") & (shipped.proxy_for == "")]
        assert not gsm.empty, model
    weights = set(shipped.weights)
    assert {"FP8", "W8A8", "W4A16"} <= weights
    assert (shipped.kv != "f16").sum() >= 5  # KV-cache quantization rows
    assert {"snapkv", "pyramidkv"} <= set(shipped.eviction)  # KV eviction rows


def test_item_counts_agree_with_unrounded_published_fractions(shipped):
    """Where a source prints the raw fraction (16 digits), score x n_items must be a whole number of
    items: a wrong item count would not give one."""
    raw = shipped[shipped.score.str.len() >= 14]
    assert len(raw) >= 8
    for _, r in raw.iterrows():
        for col in ("score", "baseline_score"):
            k = float(r[col]) * int(r["n_items"])
            assert abs(k - round(k)) < 1e-6, (r["origin"], col, k)


# --- interval maths ---------------------------------------------------------------------------------------------


def test_wilson_on_a_textbook_case():
    # 50 of 100: centre (0.5 + z^2/200)/(1 + z^2/100) = 0.5; half-width z sqrt(0.25/100 + z^2/40000)/(1 + z^2/100)
    half = Z * math.sqrt(0.25 / 100 + Z * Z / 40000) / (1 + Z * Z / 100)
    lo, hi = wilson(0.5, 100)
    assert lo == pytest.approx(0.5 - half) and hi == pytest.approx(0.5 + half)
    assert (round(lo, 4), round(hi, 4)) == (0.4038, 0.5962)


def test_katz_log_ratio_worked_by_hand():
    # 0.80 against 0.82 on 1000 items each: var(log ratio) = 0.2/(1000*0.8) + 0.18/(1000*0.82)
    var = 0.2 / 800 + 0.18 / 820
    rel = 0.80 / 0.82
    lo, hi = ratio_interval(0.80, 0.82, 1000)
    assert lo == pytest.approx(rel * math.exp(-Z * math.sqrt(var)))
    assert hi == pytest.approx(rel * math.exp(Z * math.sqrt(var)))
    assert (round(lo, 4), round(hi, 4)) == (0.935, 1.0179)


def test_ratio_from_published_stderrs_uses_the_delta_method():
    var = (0.0115 / 0.7748) ** 2 + (0.0116 / 0.7763) ** 2
    lo, hi = ratio_interval(0.7748, 0.7763, 1319, se=0.0115, se_b=0.0116)
    rel = 0.7748 / 0.7763
    assert (lo, hi) == (
        pytest.approx(rel * math.exp(-Z * math.sqrt(var))),
        pytest.approx(rel * math.exp(Z * math.sqrt(var))),
    )


def test_a_zero_score_keeps_an_honest_interval():
    lo, hi = ratio_interval(0.0, 0.5, 100)  # Haldane: 0.5/101 against 50.5/101
    assert lo > 0 and hi < 1 and lo < hi


def test_user_row_end_to_end_matches_the_hand_computation(tmp_path):
    path = _write(tmp_path / "mine.csv", [GOOD])
    table = load_published_quality([path])
    (r,) = published_for("qwen2.5-7b", "FP8", table=table)
    var = 0.2 / 800 + 0.18 / 820
    assert r.rel == pytest.approx(80 / 82)
    assert r.rel_lo == pytest.approx((80 / 82) * math.exp(-Z * math.sqrt(var)))
    assert r.q == pytest.approx(0.80) and (r.q_lo, r.q_hi) == pytest.approx(wilson(0.80, 1000))
    assert "Katz" in r.method and not r.informational
    assert r.provenance == "published:Example Lab gsm8k (https://example.org/eval)"


def test_a_printed_stderr_is_used_for_q(tmp_path):
    row = dict(
        GOOD,
        scale="proportion",
        score="0.7748",
        baseline_score="0.7763",
        score_stderr="0.0115",
        baseline_stderr="0.0116",
    )
    (r,) = published_for("qwen2.5-7b", "FP8", table=load_published_quality([_write(tmp_path / "s.csv", [row])]))
    assert (r.q_lo, r.q_hi) == (pytest.approx(0.7748 - Z * 0.0115), pytest.approx(0.7748 + Z * 0.0115))
    assert "stderr" in r.method


# --- errors -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, field",
    [
        ({"model": "gpt-9"}, "model"),
        ({"scale": "ratio"}, "scale"),
        ({"kv": "fp4"}, "kv"),
        ({"weights": "Q4_K_M"}, "weights"),
        ({"source": "a blog post"}, "source"),
        ({"source_date": "2024/01/02"}, "source_date"),
        ({"score": "abc"}, "score"),
        ({"score": "120"}, "score"),
        ({"n_items": "-3"}, "n_items"),
        ({"shots": "1.5"}, "shots"),
        ({"eviction": "snapkv"}, "kv_budget"),
        ({"kv_budget": "128"}, "kv_budget"),
        ({"benchmark": "GSM 8K"}, "benchmark"),
        ({"baseline_score": ""}, "baseline_score"),
        ({"eviction": "lru", "kv_budget": "128"}, "eviction"),
    ],
)
def test_bad_row_gives_one_line_naming_file_line_and_field(tmp_path, change, field):
    path = _write(tmp_path / "bad.csv", [GOOD, dict(GOOD, **change)])
    with pytest.raises(PublishedQualityError) as e:
        load_published_quality([path])
    msg = str(e.value)
    assert "\n" not in msg and f"{path}:3:" in msg and f"'{field}'" in msg, msg
    assert isinstance(e.value, ValueError)


def test_missing_and_unknown_columns_are_named(tmp_path):
    with pytest.raises(PublishedQualityError, match=r"bad\.csv:1: missing columns score"):
        load_published_quality([_write(tmp_path / "bad.csv", [GOOD], [c for c in COLUMNS if c != "score"])])
    with pytest.raises(PublishedQualityError, match=r"odd\.csv:1: unknown columns scroe"):
        load_published_quality([_write(tmp_path / "odd.csv", [GOOD], (*COLUMNS, "scroe"))])


def test_two_baselines_in_one_document_are_refused(tmp_path):
    path = _write(tmp_path / "two.csv", [GOOD, dict(GOOD, weights="W8A8", baseline_score="81.0")])
    with pytest.raises(PublishedQualityError, match=r"two\.csv:3: field 'baseline_score': 81\.0 differs from 82\.0"):
        load_published_quality([path])


def test_missing_user_table_is_an_error():
    with pytest.raises(PublishedQualityError, match="no such file"):
        load_published_quality(["/nonexistent/quality.csv"])


# --- lookup, baseline, guard choice -----------------------------------------------------------------------------


def test_user_table_extends_the_shipped_one(shipped, tmp_path):
    table = load_published_quality([_write(tmp_path / "mine.csv", [GOOD])])
    assert len(table) == len(shipped) + 1
    assert table["origin"].iloc[0].startswith("spec/published_quality.csv:2")
    assert table["origin"].iloc[-1] == f"{tmp_path / 'mine.csv'}:2"
    assert not published_for("qwen2.5-7b", "FP8", benchmark="gsm8k", table=shipped)
    assert published_for("qwen2.5-7b", "FP8", benchmark="gsm8k", table=table)


def test_own_precision_is_the_baseline_itself(shipped):
    base = published_for("qwen2.5-7b", "BF16", table=shipped)
    assert base and all(r.rel == r.rel_lo == r.rel_hi == 1.0 for r in base)
    for r in base:
        if r.scale in ("percent", "proportion"):
            assert r.q == pytest.approx(r.baseline_score / (100 if r.scale == "percent" else 1))
    # one per document and benchmark setting, not one per quantized row
    assert len(base) == len({(r.source, r.benchmark, r.metric, r.shots) for r in base})
    assert {r.weights for r in base} == {"BF16"}


def test_quantized_lookup_and_the_guards_pick(shipped):
    rows = published_for("qwen2.5-7b", "W8A8", table=shipped)
    assert {r.benchmark for r in rows} == {
        "mmlu",
        "arc_challenge",
        "gsm8k",
        "hellaswag",
        "winogrande",
        "truthfulqa_mc2",
    }
    for r in rows:
        assert r.rel_lo < r.rel < r.rel_hi and r.q_lo < r.q < r.q_hi
    pick = guard_choice(rows)
    assert pick.benchmark == "gsm8k" and pick.provenance.startswith("published:Red Hat (Neural Magic) gsm8k (https://")


def test_informational_rows_are_never_picked(shipped):
    kivi = published_for("mistral-7b", "F16", kv="int2", table=shipped)
    assert kivi and all(r.informational and math.isnan(r.q) and math.isnan(r.rel_lo) for r in kivi)
    assert guard_choice(kivi) is None
    proxies = published_for("qwen2.5-7b", "AWQ4", table=shipped)
    assert proxies and all(r.informational and "proxy" in r.provenance for r in proxies)
    assert guard_choice(proxies) is None


def test_eviction_budgets(shipped, tmp_path):
    assert published_for("llama-3.1-8b", "F16", eviction="snapkv", kv_keep=1.0, table=shipped) == []
    snap = published_for("llama-3.1-8b", "F16", eviction="snapkv", kv_keep=0.2, table=shipped)
    assert {r.kv_budget for r in snap} == {"128", "512", "2048"}  # token budgets: reported as published
    ratio = dict(GOOD, eviction="snapkv", kv_budget="0.2", weights="BF16")
    table = load_published_quality([_write(tmp_path / "r.csv", [ratio])])
    assert published_for("qwen2.5-7b", "F16", eviction="snapkv", kv_keep=0.2, table=table)
    assert not published_for("qwen2.5-7b", "F16", eviction="snapkv", kv_keep=0.5, table=table)


def _pq(benchmark: str, n: int, rel_lo: float, source: str = "s", informational: bool = False) -> PublishedQuality:
    return PublishedQuality(
        "m",
        "FP8",
        "f16",
        "none",
        "",
        benchmark,
        "acc",
        n,
        80.0,
        82.0,
        0.98,
        rel_lo,
        1.02,
        0.8,
        0.78,
        0.82,
        "test",
        source,
        "p",
        f"published:p {benchmark} ({source})",
        informational,
    )


def test_guard_choice_rule():
    assert guard_choice([]) is None
    many = [_pq("mmlu", 14042, 0.97), _pq("gsm8k", 1319, 0.93), _pq("hellaswag", 10042, 0.99)]
    assert guard_choice(many).benchmark == "gsm8k"  # the study's task first
    assert guard_choice(many, task="ifeval").benchmark == "mmlu"  # else the most items
    two = [_pq("gsm8k", 1319, 0.96, "a"), _pq("gsm8k", 1319, 0.94, "b")]
    assert guard_choice(two).source == "b"  # ties: the more pessimistic
    assert guard_choice([_pq("gsm8k", 1319, 0.9, informational=True), _pq("mmlu", 14042, 0.97)]).benchmark == "mmlu"


def test_summary_lines(shipped):
    lines = summary_lines(shipped)
    assert lines[0].startswith(f"published quality: {len(shipped)} scores from {shipped['source'].nunique()} documents")
    assert len(lines) == 3 + shipped["source"].nunique()
    assert any("KIVI-2" in ln for ln in lines) and "qwen2.5-7b" in lines[1]
