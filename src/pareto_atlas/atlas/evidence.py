"""What each point's verdict rests on: the evidence for its quality and for its speed.

No verdict without evidence (docs/evidence.md): by default a regime winner needs quality that was
measured, inherited from a measured arm with the same token-changing knobs, a measured effect
(eviction, top-k) on such a core, or a measured KL divergence; and speed that was measured or
simulated, not read from a prior. Points that rest on priors are "projected — measure to confirm",
each with the command that would measure what is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from pareto_atlas.simulate.targets import SPEED_PROJECTED
from pareto_atlas.spec.knobs import Knobs

# published: a source's score for that model and knobs beside its own baseline; carried: a measured
# effect of a smaller model of the family, its interval widened; reference: the model itself at its
# own precision (exactly 1 relative to itself).
WINNING_QUALITY = ("measured", "inherited", "measured-effect", "published", "carried", "reference")


@dataclass(frozen=True)
class StudyRef:
    """How a confirm command names the study, and its arms by quality key (an arm that already
    serves a configuration's tokens is measured by name instead of being added)."""

    name: str = "default"
    arms: Mapping[str, str] = field(default_factory=dict)
    model: str = ""  # the model the study's arms measure ("" where unknown: every point is its)


CPU_ENGINE_WEIGHTS = ("F16", "Q8_0", "Q5_0", "Q4_K_M", "Q4_0", "Q3_K", "Q2_K")


def _str(points: pd.DataFrame, col: str) -> np.ndarray:
    if col not in points.columns:
        return np.full(len(points), "", dtype=object)
    return points[col].fillna("").astype(str).to_numpy()


def quality_evidence(points: pd.DataFrame) -> np.ndarray:
    """Per point: measured | inherited | measured-effect | published | carried | reference |
    kl-measured (the task score is a prior or
    unmeasured, the KL divergence against the baseline was measured) | prior | unmeasured (from the
    `quality_evidence` column, or read from `quality_provenance` in tables that predate it)."""
    ev = _str(points, "quality_evidence")
    prov = _str(points, "quality_provenance")
    derived = np.select(
        [
            np.char.find(prov.astype(str), "prior:") >= 0,
            np.char.startswith(prov.astype(str), "measured-effect"),
            np.char.startswith(prov.astype(str), "inherited"),
            np.char.startswith(prov.astype(str), "measured"),
        ],
        ["prior", "measured-effect", "inherited", "measured"],
        default="unmeasured",
    )
    ev = np.where(ev != "", ev, derived)
    # a measured KL divergence of the configuration's own tokens is quality evidence of its own
    return np.where(has_kld(points) & ~np.isin(ev, WINNING_QUALITY), "kl-measured", ev)


def has_kld(points: pd.DataFrame) -> np.ndarray:
    if "kld" not in points.columns:
        return np.zeros(len(points), bool)
    return np.isfinite(points["kld"].to_numpy(dtype=float, na_value=np.nan))


def speed_evidence(points: pd.DataFrame) -> np.ndarray:
    """Per point: measured | calibrated (simulated with a calibration on measured or published
    anchors) | uncalibrated (simulated with default efficiencies) | prior (rests on a cited effect,
    e.g. an EAGLE head's acceptance)."""
    prov = _str(points, "provenance")
    calib = _str(points, "calib_provenance")
    # "calibrated on 1 published anchor; error bar: ... kept at the uncalibrated default's" is calibrated
    uncal = np.char.startswith(calib.astype(str), "uncalibrated")
    # carried to a model from a fit on one size: no measured transfer error, a projection (simulate.targets)
    projected = np.char.find(calib.astype(str), SPEED_PROJECTED) >= 0
    return np.select(
        [prov == "measured", (prov == "prior") | projected, uncal],
        ["measured", "prior", "uncalibrated"],
        default="calibrated",
    )


def evidence_ok(points: pd.DataFrame) -> np.ndarray:
    """Per point: whether its quality and its speed both rest on evidence (see module doc)."""
    q = np.isin(quality_evidence(points), (*WINNING_QUALITY, "kl-measured"))
    return q & (speed_evidence(points) != "prior")


def evidence_label(points: pd.DataFrame) -> np.ndarray:
    """One short phrase per point, e.g. "quality measured (KL); speed simulated, calibrated"."""
    q = quality_evidence(points)
    q = np.where(q == "kl-measured", "KL-measured (task score a prior)", q)
    s = speed_evidence(points)
    s = np.select([s == "measured", s == "prior"], ["measured", "prior"], default="simulated, " + s)
    derived = (_str(points, "weights_cost") == "derived") & (np.char.startswith(s.astype(str), "simulated"))
    s = np.where(
        derived,
        np.char.add(
            s.astype(str),
            " (the weight format's kernels derived from the roofline: no anchor or published measurement of it "
            "on that card or its generation)",
        ),
        s,
    )
    return np.char.add(np.char.add("quality ", q.astype(str)), np.char.add("; speed ", s.astype(str)))


def confirm_command(row: pd.Series, ref: str | StudyRef) -> str:
    """The command that would measure what a projected point is missing."""
    ref = ref if isinstance(ref, StudyRef) else StudyRef(str(ref))
    study_ref = ref.name
    k = Knobs.from_row(row)
    model = str(row.get("model", "") or "")
    if ref.model and model and model != ref.model:
        return other_model_command(row, k, model)
    core = Knobs(weights=k.weights, kv=k.kv)
    cmds = []
    prov = str(row.get("quality_provenance", ""))
    if "prior:" in prov:
        if k.eviction != "none" and "measured-effect:" + k.eviction not in prov:
            cmds.append(
                f"pareto-atlas quality {study_ref} --kind evict --policies {k.eviction} --keeps {k.kv_keep:g} --task retrieval"
            )
        if k.sparse_budget < 1.0 and "measured-effect:topk" not in prov:
            cmds.append(
                f"pareto-atlas quality {study_ref} --kind evict --policies topk --keeps {k.sparse_budget:g} --task retrieval"
            )
        if ("re-encoding" in prov or " weights of " in prov) and core.quality_key() in ref.arms:
            name = ref.arms[core.quality_key()]
            cmds.append(
                f"pareto-atlas quality {study_ref} --kind kld --arm {name} (and pareto-atlas quality {study_ref} "
                f"--arm {name} for its task score)"
            )
        elif "re-encoding" in prov or " weights of " in prov:
            arm = f"weights = \"{k.weights}\"" + (f", kv = \"{k.kv}\"" if k.kv != "f16" else "")
            where = "" if k.weights in CPU_ENGINE_WEIGHTS else " on a GPU host with [engine] name = \"vllm\""
            cmds.append(
                f"add [[arms]] name = \"confirm\", {arm}, quality = true to {study_ref}{where}, then "
                f"pareto-atlas quality {study_ref} --arm confirm && pareto-atlas quality {study_ref} --kind kld"
            )
    if str(row.get("provenance", "")) == "prior":
        cmds.append(
            f"measure an arm spec = \"{k.spec}\" on {row.get('hardware', '')} "
            f"(pareto-atlas measure {study_ref} --arm NAME): its speed rests on "
            f"{row.get('prior_source', '') or 'a prior'}"
        )
    calib = str(row.get("calib_provenance", "") or "")
    if SPEED_PROJECTED in calib:  # the card's fit saw no size of this model: what would measure one
        parts = calib[calib.index(SPEED_PROJECTED) :].split("; ")
        cmds.append(parts[1] if len(parts) > 1 else parts[0])
    return " ; ".join(cmds)


def other_model_command(row: pd.Series, k: Knobs, model: str) -> str:
    """What would confirm a point of a model the study answers for but does not measure (a
    `[[targets]]` model): the study's own arms and evict stage measure its [model], so no command on
    this study can. A study whose [model] is that model, or an endpoint serving it, can."""
    wants = []
    prov = str(row.get("quality_provenance", ""))
    if "prior:" in prov or "carried" in prov:
        if k.eviction != "none":
            wants.append(
                f"its {k.eviction} effect at keep {k.kv_keep:g} (pareto-atlas quality --kind evict on that study)"
            )
        if k.sparse_budget < 1.0:
            wants.append(f"its top-k effect at {k.sparse_budget:g} (pareto-atlas quality --kind evict on that study)")
        if k.eviction == "none" and k.sparse_budget >= 1.0:
            wants.append(
                f"its quality with weights = \"{k.weights}\""
                + (f", kv = \"{k.kv}\"" if k.kv != "f16" else "")
                + " (pareto-atlas quality, and --kind kld, on that study), or a published score of it"
            )
    if str(row.get("provenance", "")) == "prior":
        wants.append(f"its speed with spec = \"{k.spec}\" on {row.get('hardware', '')}")
    calib = str(row.get("calib_provenance", "") or "")
    if SPEED_PROJECTED in calib:  # the card's fit saw one size: the command that would measure a second
        parts = calib[calib.index(SPEED_PROJECTED) :].split("; ")
        return (parts[1] if len(parts) > 1 else parts[0]) + ("; then " + "; ".join(wants) if wants else "")
    if not wants:
        return ""
    return (
        f"measure {model} itself ([model] name = \"{model}\" in a study of its own, or an endpoint serving it: "
        f"[engine] name = \"openai\"): " + "; ".join(wants)
    )
