"""Two engines on one machine: a study that names another in `compare_with` shares its store, and
its measured points include that study's anchors, each row saying which engine served it.

The quality of the comparing study's arms is looked up in the compared study when both serve the
same model: vLLM's float32 copy of the GGUF holds the same weights, so its GSM8K score is the
source's (a prior: same weights, not the same arithmetic; llama.cpp multiplies 4-bit blocks with
8-bit activations, vLLM in float32, so greedy tokens can differ).
"""

from __future__ import annotations

from functools import lru_cache

from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.study import Study, load_study

DEFAULT_ENGINE = "llamacpp"     # labels and point ids of its rows stay as they were before engines mixed


@lru_cache(maxsize=8)
def _load(name: str) -> Study:
    return load_study(name)


def companion(study: Study) -> Study | None:
    """The study this one compares with (None when it names none)."""
    if not study.compare_with:
        return None
    other = _load(study.compare_with)
    if other.name == study.name:
        raise ValueError(f"compare_with: study {study.name!r} names itself")
    return other


def quality_study(study: Study) -> Study:
    """Where this study's quality comes from: the compared study when it serves the same model."""
    other = companion(study)
    return other if other is not None and other.model.name == study.model.name else study


def engine_label(knobs: Knobs, engine: str | None) -> str:
    """`Knobs.label()`, prefixed with the engine when it is not llama.cpp (`vllm:F32+chunked+x1`),
    so one atlas can hold the same knobs served by two engines."""
    label = knobs.label()
    return label if not engine or engine == DEFAULT_ENGINE else f"{engine}:{label}"


def engine_key(engine: str | None) -> list:
    """What a point id adds for its engine: nothing for llama.cpp (ids measured before stay)."""
    return [] if not engine or engine == DEFAULT_ENGINE else [engine]
