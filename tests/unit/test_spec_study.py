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
    for name in ("default", "tiny"):
        s = load_study(name)
        assert s.arms and s.baseline.name in {a.name for a in s.arms}


def test_minimal_study_gets_defaults():
    s = parse_study(MINIMAL)
    assert s.workload.prompt_tokens == 128 and s.quality.floor == 0.95
    assert s.arms[0].knobs() == Knobs(weights="Q4_1")


@pytest.mark.parametrize("patch, field", [
    ('weights = "Q4_1"', "arms.0"),
])
def test_bad_knob_names_field_and_allowed(patch, field):
    with pytest.raises(StudyError) as e:
        parse_study(MINIMAL.replace(patch, 'weights = "Q9"'), "s.toml")
    msg = str(e.value)
    assert msg.startswith("s.toml: arms.0") and "Q9" in msg and "Q4_K_M" in msg and "\n" not in msg


def test_unknown_field_is_rejected():
    with pytest.raises(StudyError, match=r"s.toml: arms.0.slotz: Extra inputs"):
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
    with pytest.raises(StudyError, match="does not exist; built-in studies: default, tiny"):
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
