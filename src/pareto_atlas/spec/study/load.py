"""Reading a study: from TOML text, a file or a built-in name, with any error as one StudyError line;
and how a command line names a study again (`study_ref`)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Callable

from pydantic import ValidationError

from pareto_atlas.spec.study.errors import StudyError, describe
from pareto_atlas.spec.study.model import Study


@dataclass(frozen=True)
class HostChecks:
    """Checks of a study that read the host, given by a layer above spec (measure.resolve): `prepare`
    fills or checks the raw tables (e.g. a checkpoint's format), `check` the validated study. Each raises
    a one-line ValueError naming the field."""

    prepare: Callable[[dict], dict]
    check: Callable[[Study], None]


def parse_study(text: str, origin: str = "<study>", base: Path | None = None, host: HostChecks | None = None) -> Study:
    """A study from TOML text; `base`: the folder its relative paths (a trace) are read from."""
    try:
        raw = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as e:  # ValueError: an integer of over 4300 digits
        raise StudyError(f"{origin}: not valid TOML: {' '.join(str(e).split())[:200]}") from None
    return study_from_dict(raw, origin, base, host)


def study_from_dict(
    raw: dict, origin: str = "<study>", base: Path | None = None, host: HostChecks | None = None
) -> Study:
    """A study from its parsed TOML tables; any error is one StudyError line. `host`: the checks that
    read this host (measure.resolve.HOST), run before and after the study's own."""
    try:
        if host is not None and isinstance(raw, dict):
            raw = host.prepare(raw)
        study = Study.model_validate(raw, context={"base": base})
        if host is not None:
            host.check(study)
        return study
    except ValidationError as e:
        raise StudyError(f"{origin}: {describe(e, Study)}") from None
    except ValueError as e:  # a host check's own one-line error
        raise StudyError(f"{origin}: {' '.join(str(e).split())}") from None


BUILTIN = {
    "default": "default_study.toml",
    "full": "full_study.toml",
    "tiny": "tiny_study.toml",
    "ladder": "ladder_study.toml",
    "vllm-cpu": "vllm_cpu_study.toml",
    "sizes": "sizes_study.toml",
    "paper": "paper_study.toml",
    "workloads": "workloads_study.toml",
    "llama70b": "llama70b_study.toml",
    "prefix": "prefix_study.toml",
    "prefix-vllm": "prefix_vllm_study.toml",
    "moe": "moe_study.toml",
}


def load_study(path_or_name: str | Path | None = None, host: HostChecks | None = None) -> Study:
    """A study from a TOML path, or a built-in by name (`default`, `full`, `tiny`, `ladder`, `vllm-cpu`, `sizes`,
    `workloads`, `paper`, `llama70b`, `prefix`, `prefix-vllm`, `moe`)."""
    if path_or_name is None or str(path_or_name) in BUILTIN:
        fname = BUILTIN[str(path_or_name or "default")]
        return parse_study(
            resources.files("pareto_atlas.spec").joinpath(fname).read_text(), f"built-in:{fname}", host=host
        )
    path = Path(path_or_name)
    if not path.exists():
        raise StudyError(f"study file {path} does not exist; built-in studies: {', '.join(BUILTIN)}")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise StudyError(f"{path}: cannot read: {e}") from None
    return parse_study(text, str(path), path.resolve().parent, host)


def study_ref(study: Study) -> str:
    """How a command line names this study: its built-in name (`default`), else `<name>.toml`."""
    # the default and the full study share a name (and so a store): the arms tell them apart
    arms = [a.name for a in study.arms]
    named = []
    for key, fname in BUILTIN.items():
        try:
            raw = tomllib.loads(resources.files("pareto_atlas.spec").joinpath(fname).read_text())
        except (OSError, tomllib.TOMLDecodeError):
            continue
        if raw.get("name") == study.name:
            if [a.get("name") for a in raw.get("arms", [])] == arms:
                return key
            named.append(key)
    return named[0] if named else f"{study.name}.toml"
