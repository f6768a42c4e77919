"""The study file: built-ins load, bad input gives one line naming the field."""

from __future__ import annotations

import pytest

from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.study import StudyError, load_study, parse_study

MINIMAL = """
name = "s"
[model]
name = "smollm2-135m-instruct"
[[arms]]
name = "a"
weights = "Q4_1"
"""


def test_builtin_studies_load():
    for name in ("default", "tiny", "ladder", "sizes", "workloads"):
        s = load_study(name)
        assert s.arms and s.baseline.name in {a.name for a in s.arms}


def test_minimal_study_gets_defaults():
    s = parse_study(MINIMAL)
    assert s.workload.prompt_tokens == 128 and s.quality.floor == 0.95
    assert s.arms[0].knobs() == Knobs(weights="Q4_1")


@pytest.mark.parametrize(
    "patch, field",
    [
        ('weights = "Q4_1"', "arms.0"),
    ],
)
def test_bad_knob_names_field_and_allowed(patch, field):
    with pytest.raises(StudyError) as e:
        parse_study(MINIMAL.replace(patch, 'weights = "Q9"'), "s.toml")
    msg = str(e.value)
    assert msg.startswith("s.toml: arms.0") and "Q9" in msg and "Q4_K_M" in msg and "\n" not in msg


def test_per_arm_requests_override_the_load_and_keep_old_anchor_ids():
    from pareto_atlas.measure.campaign import anchor_id

    s = parse_study(MINIMAL)
    t = parse_study(MINIMAL + "requests = 24\n")
    assert s.arms[0].n_requests(s.load) == s.load.requests == 8 and t.arms[0].n_requests(t.load) == 24
    # a different request count is a different measurement; an unset one hashes as before it existed
    assert anchor_id(s, s.arms[0], 0) != anchor_id(t, t.arms[0], 0)
    assert anchor_id(s, s.arms[0], 0) == "0ee5a00b5f46ebb0bc23"  # computed by the code before per-arm requests
    with pytest.raises(StudyError, match=r"s.toml: arms.0.requests: 1 is not allowed: 2\.\."):
        parse_study(MINIMAL + "requests = 1\n", "s.toml")


def test_think_time_applies_to_closed_loops_of_several_clients_only():
    from pareto_atlas.measure.campaign import anchor_id

    s = parse_study(MINIMAL)
    many = parse_study(MINIMAL + "concurrency = 2\nslots = 2\n")
    fixed = parse_study(MINIMAL.replace('[[arms]]', '[load]\nthink_ms = 250\n[[arms]]') + "concurrency = 2\n")
    assert s.load.think_ms == "auto" and s.load.think_for(s.arms[0]) == 0.0
    assert many.load.think_for(many.arms[0]) == "auto" and fixed.load.think_for(fixed.arms[0]) == 0.25
    # one client never pauses, so its anchors keep the ids they had before think times existed
    assert anchor_id(s, s.arms[0], 0) == "0ee5a00b5f46ebb0bc23"
    assert anchor_id(many, many.arms[0], 0) != anchor_id(
        parse_study(MINIMAL.replace('[[arms]]', '[load]\nthink_ms = 0\n[[arms]]') + "concurrency = 2\nslots = 2\n"),
        many.arms[0],
        0,
    )
    for bad in ("-1", '"soon"'):
        with pytest.raises(StudyError, match=r"s.toml: load.think_ms"):
            parse_study(MINIMAL.replace('[[arms]]', f'[load]\nthink_ms = {bad}\n[[arms]]'), "s.toml")


def test_unknown_field_is_rejected():
    with pytest.raises(StudyError, match=r"s.toml: arms.0.slotz: unknown field; allowed: name, weights"):
        parse_study(MINIMAL + "slotz = 2\n", "s.toml")


def test_corrupt_toml_is_one_line():
    with pytest.raises(StudyError) as e:
        parse_study(MINIMAL + "[[arms]\nname=", "s.toml")
    assert "not valid TOML" in str(e.value) and "\n" not in str(e.value)


def test_duplicate_arm_and_missing_baseline():
    with pytest.raises(StudyError, match="used twice"):
        parse_study(MINIMAL + '[[arms]]\nname = "a"\n')
    with pytest.raises(StudyError, match="baseline_arm 'zz' is not an arm"):
        parse_study(MINIMAL + '[quality]\nbaseline_arm = "zz"\n')


def test_missing_file_names_builtins(tmp_path):
    with pytest.raises(StudyError, match="does not exist; built-in studies: default, full, tiny"):
        load_study(tmp_path / "nope.toml")


def test_knobs_optimizations_and_quality_key():
    base = Knobs(weights="F16")
    assert base.optimizations() == ()
    stack = Knobs(weights="Q4_0", kv="q8_0", spec="ngram", slots=4)
    assert stack.optimizations() == ("weight-quant", "kv-quant", "speculation", "batching")
    # speed-only knobs do not change the quality key; token-changing knobs do
    assert Knobs(weights="Q4_0", slots=4, spec="ngram").quality_key() == Knobs(weights="Q4_0").quality_key()
    assert Knobs(weights="Q4_0", kv="q4_0").quality_key() != Knobs(weights="Q4_0").quality_key()
    with pytest.raises(ValueError, match="knobs.kv_keep"):
        Knobs(kv_keep=0.0)


def test_eviction_sweep_defaults_aliases_and_overrides():
    s = parse_study(MINIMAL)
    assert s.eviction.policies == ["streaming", "h2o", "snapkv"] and s.eviction.keeps == [0.5, 0.25]
    s = parse_study(MINIMAL + '[eviction]\npolicies = ["StreamingLLM", "h2o"]\nkeeps = [0.25, 0.5]\ntask = "gsm8k"\n')
    # the alias maps to the atlas's knob name; keeps run from the mildest eviction down
    assert s.eviction.policies == ["streaming", "h2o"] and s.eviction.keeps == [0.5, 0.25]
    o = s.eviction.with_overrides(policies=["snapkv"], keeps=["0.3"], n=None)
    assert o.policies == ["snapkv"] and o.keeps == [0.3] and o.task == "gsm8k"


@pytest.mark.parametrize(
    "table, field, allowed",
    [
        ('policies = ["h2o", "lru"]', "eviction.policies", "streaming, h2o, snapkv"),
        ("keeps = [0.5, 1.0]", "eviction.keeps", "(0, 1)"),
        ("keeps = []", "eviction.keeps", "at least one"),
        ('task = "mmlu"', "eviction.task", "'gsm8k', 'retrieval' or 'ruler'"),
        ("n = 0", "eviction.n", "1..1319"),
        ("chunks = 64", "eviction.chunks", "unknown field; allowed: policies, keeps, task, n, chunk"),
    ],
)
def test_bad_eviction_table_is_one_line_naming_the_field(table, field, allowed):
    with pytest.raises(StudyError) as e:
        parse_study(MINIMAL + f"[eviction]\n{table}\n", "s.toml")
    msg = str(e.value)
    assert msg.startswith(f"s.toml: {field}") and allowed in msg and "\n" not in msg


def test_bad_eviction_option_is_one_line():
    with pytest.raises(StudyError) as e:
        parse_study(MINIMAL).eviction.with_overrides(keeps=["half"])
    assert str(e.value).startswith("evict options: keeps.0:") and "\n" not in str(e.value)


SIZES = (
    MINIMAL
    + """
[[arms]]
name = "big"
weights = "Q4_K_M"
model = { name = "qwen2.5-coder-1.5b-instruct", card = "qwen2.5-1.5b", draft = "qwen2.5-coder-0.5b-instruct" }
"""
)


def test_an_arm_can_serve_its_own_model_keyed_into_its_anchor_id():
    from pareto_atlas.measure.campaign import anchor_id, anchor_row, launch_for, plan

    s = parse_study(SIZES, "s.toml")
    big = s.arm("big")
    assert s.model_for(s.arms[0]) is s.model and s.model_for(big).name == "qwen2.5-coder-1.5b-instruct"
    assert anchor_row(s, plan(s, ["big"])[0])["model"] == "qwen2.5-coder-1.5b-instruct"
    # the same knobs under the study's own model are another anchor; the arms without one keep their ids
    same = parse_study(
        SIZES.replace(
            'model = { name = "qwen2.5-coder-1.5b-instruct", card = "qwen2.5-1.5b", '
            'draft = "qwen2.5-coder-0.5b-instruct" }\n',
            "",
        )
    )
    assert anchor_id(s, big, 0) != anchor_id(same, same.arm("big"), 0)
    assert anchor_id(s, s.arms[0], 0) == anchor_id(parse_study(MINIMAL), parse_study(MINIMAL).arms[0], 0)
    assert launch_for(s, s.arms[0], "m.gguf")["draft_model_path"] is None
    sizes = load_study("sizes")
    assert sizes.model_for(sizes.arm("q05-q4km")).card == "qwen2.5-0.5b" and sizes.model.draft


def test_an_arm_of_another_model_measures_speed_only():
    bad = SIZES.replace('weights = "Q4_K_M"\nmodel', 'weights = "Q4_K_M"\nquality = true\nmodel')
    with pytest.raises(
        StudyError, match=r"^s.toml: arms.1: arms.big.quality: an arm with its own model measures speed"
    ):
        parse_study(bad, "s.toml")


def test_a_draft_arm_needs_its_models_draft_and_the_baseline_the_study_model():
    draft = SIZES + 'spec = "draft"\nspec_k = 4\n'
    assert parse_study(draft).arm("big").spec == "draft"
    with pytest.raises(StudyError, match=r"arms.big.model.draft: arm 'big' has spec = 'draft' and needs a draft"):
        parse_study(draft.replace(', draft = "qwen2.5-coder-0.5b-instruct"', ""), "s.toml")
    with pytest.raises(StudyError, match=r"model.draft: arm 'a' has spec = 'draft'"):
        parse_study(MINIMAL + 'spec = "draft"\nspec_k = 4\n', "s.toml")
    with pytest.raises(StudyError, match=r"quality.baseline_arm: 'big' serves its own model"):
        parse_study(SIZES + '[quality]\nbaseline_arm = "big"\n', "s.toml")


def test_the_full_study_extends_the_default_and_each_is_named_for_itself():
    # the default's arms are the full study's, identical: the full build resumes every anchor of the
    # default's store (same study name, same anchor ids) and measures only what it adds
    from pareto_atlas.measure.campaign import plan
    from pareto_atlas.spec.study import study_ref

    default, full = load_study("default"), load_study("full")
    assert default.name == full.name and len(full.arms) > len(default.arms)
    ids = {(p.arm.name, p.repeat): p.anchor_id for p in plan(full)}
    assert all(ids[(p.arm.name, p.repeat)] == p.anchor_id for p in plan(default))
    # each suggests its own name to the commands it prints, not the other's
    assert study_ref(default) == "default" and study_ref(full) == "full"
