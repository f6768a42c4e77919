"""An anchor's plan: its id (a hash of what it measures), the study's anchors in order, and what the engine
launches and serves for an arm."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from pareto_atlas.measure.launch_options import launch_extra
from pareto_atlas.measure.weights import ModelError, matmul_bits_per_weight, variant_file
from pareto_atlas.spec.knobs import BITS_PER_WEIGHT
from pareto_atlas.spec.study import ARM_KNOBS, ArmSpec, Study, WorkloadSpec
from pareto_atlas.spec.trace import identity as trace_identity
from pareto_atlas.store.db import dumps


@dataclass(frozen=True)
class AnchorPlan:
    anchor_id: str
    arm: ArmSpec
    repeat: int


FIRST_ARM_KNOBS = ("weights", "kv", "spec", "spec_k", "slots")  # the knobs anchors were first keyed by


def anchor_id(study: Study, arm: ArmSpec, repeat: int) -> str:
    # what is measured, not how often or whether quality is also scored: changing those keeps the ids
    # (an unset per-arm request count is left out, so anchors measured before it existed keep their ids)
    # (likewise think_ms where it plays no part: one client, or an open loop)
    # (and so are fields added later while they hold their defaults: batching, chunk_tokens, engine options)
    unset = {"requests"} if arm.requests is None else set()
    unset |= {
        k
        for k, default in (
            ("engine_options", {}),
            ("prompt_tokens", None),
            ("output_tokens", None),
            ("trace", None),
            ("hardware", None),
            ("model", None),
            ("share", None),
        )
        if getattr(arm, k) == default
    }
    # knobs an arm gained after the first five (batching, chunk_tokens, and whatever Knobs adds: the arm's
    # knob fields are derived from it) likewise, while at their defaults
    unset |= {k for k in ARM_KNOBS if k not in FIRST_ARM_KNOBS and getattr(arm, k) == ArmSpec.model_fields[k].default}
    no_think = {"think_ms"} if study.load.think_for(arm) == 0.0 else set()
    no_options = set() if study.engine.options else {"options"}
    arm_ident = arm.model_dump(exclude={"repeats", "quality"} | unset) | (
        trace_identity(arm.trace) if arm.trace else {}
    )
    # the hardware enters once, as where the arm runs (the engine's default for it is not a second key);
    # an arm's own model (spec.study.ArmSpec.model) is in arm_ident and names the served model here
    ident = {
        "study": study.name,
        "arm": arm_ident,
        "model": study.model_for(arm).name,
        "engine": study.engine.model_dump(exclude={"api_key_env", "hardware"} | no_options),
        "workload": workload_ident(study.workload),
        "load": study.load.model_dump(exclude={"repeats"} | no_think),
        "hardware": study.hardware_of(arm),
        "repeat": repeat,
    } | ({"served": study.model.served} if study.model.served else {})
    return hashlib.sha256(dumps(ident).encode()).hexdigest()[:20]


def workload_ident(wl: WorkloadSpec) -> dict:
    """A workload as it keys and describes an anchor: a trace by its name and sha256, never its path
    (a workload without one as before traces existed, so earlier ids stay; likewise one that shares nothing)."""
    out = wl.model_dump(exclude={"trace"} | ({"share"} if wl.share is None else set()))
    return out | trace_identity(wl.trace) if wl.trace else out


def plan(study: Study, arms: list[str] | None = None) -> list[AnchorPlan]:
    chosen = [study.arm(a) for a in arms] if arms else list(study.arms)
    most = max(a.repeats or study.load.repeats for a in chosen)
    return [
        AnchorPlan(anchor_id(study, a, r), a, r)
        for r in range(most)
        for a in chosen
        if r < (a.repeats or study.load.repeats)
    ]


def launch_for(study: Study, arm: ArmSpec, model_path: str, slots: int | None = None) -> dict:
    knobs = arm.knobs()
    if slots is not None:
        from dataclasses import replace

        knobs = replace(knobs, slots=slots)
    draft, model = None, study.model_for(arm)
    if knobs.spec == "draft":
        if not model.draft:
            raise ModelError(f"arm {arm.name}: spec = 'draft' needs model.draft in the study")
        draft = str(variant_file(model.draft, "Q4_K_M")[0])
    return {
        "model_path": model_path,
        "knobs": knobs,
        "n_ctx": study.engine.n_ctx,
        "threads": study.engine.threads,
        "draft_model_path": draft,
        "extra": launch_extra(study, arm),
    }


def served_model(study: Study, arm: ArmSpec) -> tuple[Path | str, str, int, float]:
    """What the engine serves for this arm: (path, sha256 of the source, bytes of its weights as
    stored, bits per weight). vLLM reads a Hugging Face directory (the GGUF converted once, or a
    checkpoint in a directory or the host's cache); an attached endpoint serves its own model
    (nothing local is read: its bytes come from the card); llama.cpp a GGUF re-encoded to the arm's
    weight type. The model is the arm's (`Study.model_for`)."""
    model = study.model_for(arm)
    if study.engine.name == "openai":
        from pareto_atlas.measure.model_card import spec_card

        bits = BITS_PER_WEIGHT[arm.weights]
        served = model.served or model.name
        return served, f"endpoint:{served}", int(spec_card(model).matmul_params * bits / 8), bits
    if study.engine.name == "vllm":
        from pareto_atlas.measure.engines.vllm import find_python
        from pareto_atlas.measure.hf_model import conversion_record, dir_bytes, hf_model

        python = find_python(str(study.engine.options.get("python") or "") or None)
        hf_dir = model.hf_dir
        if hf_dir:  # on the host that measures: a directory, or an id in its Hugging Face cache
            from pareto_atlas.measure.hf_checkpoint import arm_weights, read_config, resolve_checkpoint

            found = resolve_checkpoint(hf_dir)
            arm_weights(read_config(found), arm.weights, f"arms.{arm.name}.weights")
            hf_dir = str(found)
        path, sha = hf_model(model.name, hf_dir, python)
        bits = BITS_PER_WEIGHT[arm.weights]
        # vLLM casts the stored float32 to the arm's dtype at load: the bytes it serves are at that dtype
        stored = {"float32": 32.0, "bfloat16": 16.0, "float16": 16.0}.get(conversion_record(path).get("dtype"), bits)
        return path, sha, int(dir_bytes(path) * bits / stored), bits
    path, sha = variant_file(model.name, arm.weights)
    return path, sha, path.stat().st_size, matmul_bits_per_weight(path)
