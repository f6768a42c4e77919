"""A study resolved against this host: the checks spec cannot make without reading the machine or the
engines, run as one step when a study is read (spec.study.HostChecks).

- a vLLM arm's weights are read from (or checked against) its checkpoint's quantization_config, where
  the checkpoint is on this host (measure.hf_checkpoint);
- every engine option (study- and arm-level) is one the engine takes, so a misspelt option fails before
  any engine starts;
- an attached endpoint reads nothing local, so a model the package does not ship needs its card;
- the parallelism an arm states (a user's own TP4 server calibrates TP4) fits its model's card and,
  on a GPU card, one node (spec.layout), so a layout no engine could serve is never measured under it.

`load_study`, `parse_study` and `study_from_dict` are spec.study's with these checks: what the stages
read a study with.
"""

from __future__ import annotations

from pathlib import Path

from pareto_atlas.measure.engines import option_keys
from pareto_atlas.measure.hf_checkpoint import fill_arm_weights
from pareto_atlas.measure.weights import SOURCES
from pareto_atlas.spec import study as S
from pareto_atlas.spec.card_resolve import named_card
from pareto_atlas.spec.cards import shipped_hardware
from pareto_atlas.spec.layout import check_layout, check_model_layout
from pareto_atlas.spec.study import HostChecks, Study


def check_engine_options(study: Study) -> None:
    allowed = option_keys(study.engine.name)
    for where, opts in [("engine.options", study.engine.options)] + [
        (f"arms.{a.name}.engine_options", a.engine_options) for a in study.arms
    ]:
        bad = sorted(set(opts) - set(allowed))
        if bad:
            raise ValueError(
                f"{where}: {bad[0]!r} is not an option of engine {study.engine.name!r}; "
                f"allowed: {', '.join(allowed) or 'none'}"
            )


def check_served_model(study: Study) -> None:
    # an endpoint serves the model: nothing local is read, so a model the package does not ship
    # needs its card from the study (the simulator's shapes)
    m = study.model
    if study.engine.name == "openai" and m.card is None and m.name not in SOURCES and not m.name.endswith(".gguf"):
        raise ValueError(
            f"model.card: engine 'openai' reads nothing local, and {m.name!r} is not a model the "
            f"package ships; give a card (a shipped card name, a config.json path, or inline fields)"
        )


def check_arm_layouts(study: Study) -> None:
    # a card read from the GGUF this host serves is checked where it is read (the simulator's layouts)
    hardware = shipped_hardware()
    for arm in study.arms:
        knobs, spec = arm.knobs(), study.model_for(arm)
        if knobs.is_default_parallelism() or spec.card is None:
            continue
        card, hw = named_card(spec), hardware.get(study.hardware_of(arm))
        why = check_layout(card, hw, knobs) if hw is not None and hw.kind == "gpu" else check_model_layout(card, knobs)
        if why:
            raise ValueError(f"arms.{arm.name}.{why.removeprefix('knobs.')}")


def check_on_host(study: Study) -> None:
    check_engine_options(study)
    check_served_model(study)
    check_arm_layouts(study)


HOST = HostChecks(prepare=fill_arm_weights, check=check_on_host)


def study_from_dict(raw: dict, origin: str = "<study>", base: Path | None = None) -> Study:
    return S.study_from_dict(raw, origin, base, HOST)


def parse_study(text: str, origin: str = "<study>", base: Path | None = None) -> Study:
    return S.parse_study(text, origin, base, HOST)


def load_study(path_or_name: str | Path | None = None) -> Study:
    """A study from a TOML path or a built-in name, resolved against this host."""
    return S.load_study(path_or_name, HOST)
