"""Two engines on one machine: a study that names another in `compare_with` shares its store, and
its measured points include that study's anchors, each row saying which engine served it.

Quality: a study whose own baseline has a quality run uses its own (vllm-cpu scores its float32
baseline once; the other vLLM arms inherit it). Without one, it reads the compared study's when
both serve the same model: vLLM's float32 copy of the GGUF holds the same weights, so the score is
the source's (a prior: same weights, not the same arithmetic; llama.cpp multiplies 4-bit blocks with
8-bit activations, vLLM in float32, so greedy tokens can differ).
"""

from __future__ import annotations

from functools import lru_cache

from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.measure.resolve import load_study
from pareto_atlas.spec.study import Study
from pareto_atlas.store.db import Store

DEFAULT_ENGINE = "llamacpp"  # labels and point ids of its rows stay as they were before engines mixed


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


def quality_study(study: Study, store: Store) -> Study:
    """Where this study's quality comes from: its own runs when its baseline was scored, else the
    compared study's when that serves the same model."""
    from pareto_atlas.store.quality import quality_table

    other = companion(study)
    if other is None or other.model.name != study.model.name:
        return study
    own = quality_table(study, store)
    return study if study.baseline.knobs().quality_key() in own else other


def engine_label(knobs: Knobs, engine: str | None) -> str:
    """`Knobs.label()`, prefixed with the engine when it is not llama.cpp (`vllm:F32+chunked+x1`),
    so one atlas can hold the same knobs served by two engines."""
    label = knobs.label()
    return label if not engine or engine == DEFAULT_ENGINE else f"{engine}:{label}"


def engine_key(engine: str | None) -> list:
    """What a point id adds for its engine: nothing for llama.cpp (ids measured before stay)."""
    return [] if not engine or engine == DEFAULT_ENGINE else [engine]
