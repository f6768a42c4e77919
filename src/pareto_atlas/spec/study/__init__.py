"""The study file: what to measure, what to simulate, and how to judge it.

Loaded from TOML into frozen pydantic models; any error is one line naming the file, the field
and what is allowed. One concept a module:

- `serving`: the model, the engine, the workload, the load;
- `arms`: the configurations measured (their knob fields derived from `Knobs`);
- `quality`: the tasks scored and the KV-eviction sweep;
- `space`: the knob grid (derived from `Knobs`), the simulated cards and loads, targets, regimes;
- `model`: the study and its checks across tables;
- `load`: reading a study from text, a file or a built-in name; `errors`: its one-line errors.

Checks that read the host (a vLLM checkpoint's format, the engine's options, the models the package
ships) are measure.resolve's: `measure.resolve.load_study` is what the stages read a study with.
"""

from __future__ import annotations

from pareto_atlas.spec.study.arms import ARM_KNOBS, ArmSpec
from pareto_atlas.spec.study.base import Frozen, check_hardware, known_hardware
from pareto_atlas.spec.study.errors import StudyError, describe
from pareto_atlas.spec.study.load import BUILTIN, HostChecks, load_study, parse_study, study_from_dict, study_ref
from pareto_atlas.spec.study.model import Study
from pareto_atlas.spec.study.quality import EvictionSpec, QualitySpec
from pareto_atlas.spec.study.serving import EngineSpec, LoadSpec, ModelSpec, WorkloadSpec
from pareto_atlas.spec.study.space import GRID_KNOBS, GridSpec, RegimeSpec, ShapeSpec, SimulateSpec, TargetSpec
from pareto_atlas.spec.study.tasks import QualityTask

__all__ = [
    "ARM_KNOBS",
    "BUILTIN",
    "GRID_KNOBS",
    "ArmSpec",
    "EngineSpec",
    "EvictionSpec",
    "Frozen",
    "GridSpec",
    "HostChecks",
    "LoadSpec",
    "ModelSpec",
    "QualitySpec",
    "QualityTask",
    "RegimeSpec",
    "ShapeSpec",
    "SimulateSpec",
    "Study",
    "StudyError",
    "TargetSpec",
    "WorkloadSpec",
    "check_hardware",
    "describe",
    "known_hardware",
    "load_study",
    "parse_study",
    "study_from_dict",
    "study_ref",
]
