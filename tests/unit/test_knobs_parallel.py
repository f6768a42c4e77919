"""Parallelism fields of Knobs: keys of one-GPU configurations unchanged, GPUs counted, one-line errors."""

from __future__ import annotations

import pytest

from pareto_atlas.spec.knobs import Knobs

# key() and label() of these configurations computed on main before the parallelism fields existed:
# the compatibility contract that keeps every stored anchor id, simulated point and cache valid.
MAIN_KEYS = [
    (Knobs(), "48605c55b0306cae", "F16+x1"),
    (Knobs(batching="disagg"), "62cb386efe2dbacb", "F16+disagg+x1"),
    (
        Knobs(weights="FP8", kv="fp8", slots=32, batching="chunked", chunk_tokens=256),
        "45139e683790eff5",
        "FP8+kvfp8+chunked+x32",
    ),
    (
        Knobs(weights="Q4_0", kv="q8_0", spec="ngram", spec_k=4, spec_accept=0.1, slots=4),
        "2fa49f2d7a78b115",
        "Q4_0+kvq8_0+ngram4+x4",
    ),
    (
        Knobs(weights="AWQ4", eviction="snapkv", kv_keep=0.25, sparse_budget=0.25, slots=128, batching="disagg"),
        "8db62adde31ff8d1",
        "AWQ4+snapkv@0.25+sparse@0.25+disagg+x128",
    ),
]


@pytest.mark.parametrize("knobs,key,label", MAIN_KEYS)
def test_default_parallelism_keeps_main_keys_and_labels(knobs, key, label):
    assert knobs.key() == key
    assert knobs.label() == label
    assert "tp" not in knobs.to_dict() and "replicas" not in knobs.to_dict()
    assert "parallelism" not in knobs.optimizations()


def test_parallelism_is_speed_only_and_keyed_where_set():
    base = Knobs(weights="FP8")
    par = Knobs(weights="FP8", tp=4, replicas=2)
    assert par.quality_key() == base.quality_key()
    assert par.key() != base.key()
    assert par.label() == "FP8+x1+tp4+x2rep"
    assert "parallelism" in par.optimizations()
    assert Knobs.from_dict(par.to_dict()) == par
    assert Knobs.from_row(par.as_row() | {"tp": 4.0}) == par  # a float column reads back as an int


@pytest.mark.parametrize(
    "knobs,gpus",
    [
        (Knobs(), 1),
        (Knobs(tp=4), 4),
        (Knobs(tp=2, pp=2, replicas=3), 12),
        (Knobs(batching="disagg"), 2),
        (Knobs(batching="disagg", tp=4, prefill_tp=2, decode_workers=3), 1 * 2 + 3 * 4),
        (Knobs(batching="disagg", tp=2, pp=2, prefill_workers=2, replicas=2), 2 * (2 * 2 + 1 * 4)),
    ],
)
def test_gpus_counts_every_device(knobs, gpus):
    assert knobs.gpus() == gpus


def test_disagg_label_names_the_pools():
    k = Knobs(batching="disagg", tp=4, prefill_tp=2, decode_workers=3)
    assert k.label() == "F16+disagg+x1+1P(tp2)3D(tp4)"


@pytest.mark.parametrize(
    "bad,field",
    [
        (dict(tp=3), "knobs.tp"),
        (dict(tp=0), "knobs.tp"),
        (dict(pp=0), "knobs.pp"),
        (dict(replicas=0), "knobs.replicas"),
        (dict(prefill_workers=2), "knobs.prefill_workers"),
        (dict(prefill_tp=2), "knobs.prefill_tp"),
        (dict(batching="disagg", prefill_tp=3), "knobs.prefill_tp"),
        (dict(tp=2.0), "knobs.tp"),
    ],
)
def test_bad_parallelism_is_a_one_line_error_naming_the_field(bad, field):
    with pytest.raises(ValueError) as e:
        Knobs(**bad)
    msg = str(e.value)
    assert msg.startswith(field + ":") and "\n" not in msg


def test_layout_words_name_the_gpus_and_the_parallelism():
    assert Knobs(weights="FP8", tp=4, replicas=2).layout_words("H100") == "TP4 \u00d7 2 replicas, 8 \u00d7 H100"
    assert Knobs().layout_words("H100") == "one GPU, 1 \u00d7 H100"
    k = Knobs(batching="disagg", tp=4, prefill_tp=2, decode_workers=3)
    assert k.layout_words("H200") == "1P(TP2) + 3D(TP4), 14 \u00d7 H200"


@pytest.mark.parametrize(
    "line,error",
    [
        ("tp = 3", r"arms\.0: arms\.a\.tp: 3 must be a power of two >= 1$"),
        ("ep = 2", r"arms\.0: arms\.a\.ep: 2 does not divide tp x attn_dp = 1"),
        ("replicas = 0", r"arms\.0\.replicas: 0 is not allowed: 1\.\.1000000"),
        ("attn_dp = -2", r"arms\.0\.attn_dp: -2 is not allowed: 1\.\.1000000"),
    ],
)
def test_an_arms_bad_parallelism_names_the_arm_and_what_is_allowed(line, error):
    """An arm's parallel knob said 'knobs.tp: 3 ...' (not which arm) and 'replicas: 0..1000000 allowed'
    though 0 is not: the error names the arm's field and its real lower bound."""
    from pareto_atlas.spec.study import StudyError, parse_study

    head = 'name = "s"\n[model]\nname = "qwen2.5-0.5b"\n[[arms]]\n'

    with pytest.raises(StudyError, match=error):
        parse_study(f'{head}name = "a"\n{line}\n', "s.toml")
    assert parse_study(f'{head}name = "a"\nprefill_tp = 0\n', "s.toml").arms[0].prefill_tp == 0
