"""Checks that read the host are a step of their own (measure.resolve), not spec's: spec reads a study
without them, and the loader the stages use runs them with the same one-line errors."""

from __future__ import annotations

from importlib import resources

import pytest

from pareto_atlas.measure import resolve
from pareto_atlas.spec.study import StudyError, parse_study

OPTION = (
    'name = "x"\n[model]\nname = "m"\n[engine]\nname = "vllm"\n[[arms]]\nname = "a"\nweights = "F32"\n'
    'engine_options = { prefix_cache = true }\n'
)
ENDPOINT = 'name = "x"\n[model]\nname = "m"\n[engine]\nname = "openai"\nbase_url = "http://x"\n[[arms]]\nname = "a"\n'


def test_spec_reads_a_study_without_the_host_checks():
    assert parse_study(OPTION).arms[0].engine_options == {"prefix_cache": True}
    assert parse_study(ENDPOINT).engine.name == "openai"


def test_the_resolving_loader_runs_them():
    with pytest.raises(StudyError, match=r"^<study>: arms.a.engine_options: 'prefix_cache' is not an option of engine"):
        resolve.parse_study(OPTION)
    with pytest.raises(StudyError, match=r"^<study>: model.card: engine 'openai' reads nothing local"):
        resolve.parse_study(ENDPOINT)
    shipped = resources.files("pareto_atlas.spec").joinpath("vllm_cpu_study.toml").read_text()
    assert resolve.load_study("vllm-cpu") == parse_study(shipped)  # a study the host passes is the same study
