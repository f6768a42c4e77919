"""The simulator's free parameters (efficiencies and overheads), per hardware and engine.

Calibration fits them to anchors; a card without anchors gets the defaults below, labelled
"uncalibrated default" so no one mistakes them for a measurement.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from pareto_atlas.spec.cards import HardwareCard


@dataclass(frozen=True)
class CalibParams:
    """Efficiencies are fractions of the card's peak (0, 1]; overheads are seconds."""

    hardware: str = ""
    engine: str = ""
    eff_bw: float = 0.75                 # achieved / peak bandwidth when streaming weights
    eff_bw_by_dtype: dict = field(default_factory=dict)      # weight dtype -> eff_bw (dequant kernels differ)
    eff_flops: float = 0.5               # achieved / peak FLOP/s of the linear layers
    eff_flops_by_dtype: dict = field(default_factory=dict)
    eff_attn: float = 0.6                # achieved / peak bandwidth when reading the KV cache
    overhead_step_s: float = 2e-3        # scheduler, sampling, kernel launches: paid once per step
    overhead_seq_s: float = 5e-5         # per sequence in the step (bookkeeping, sampling)
    ngram_lookup_s: float = 1e-4         # n-gram draft: a table lookup per draft step, no forward
    draft_forward_s: float = 3e-4        # launch cost of one draft-model (or EAGLE head) forward
    step_cv: float = 0.03                # step-to-step jitter (coefficient of variation)
    roofline_p: float = 4.0              # sharpness of the smooth max(memory, compute)
    mem_util: float = 0.9                # fraction of device memory the engine may use
    provenance: str = "uncalibrated default"
    lat_rel_err: float = 0.25            # error bar carried by every point simulated with these
    thr_rel_err: float = 0.25

    def __post_init__(self) -> None:
        for name in ("eff_bw", "eff_flops", "eff_attn", "mem_util"):
            v = getattr(self, name)
            if not 0.0 < v <= 1.0:
                raise ValueError(f"calib.{name}: {v} must be in (0, 1]")
        for name, d in (("eff_bw_by_dtype", self.eff_bw_by_dtype), ("eff_flops_by_dtype", self.eff_flops_by_dtype)):
            for k, v in d.items():
                if not 0.0 < v <= 1.0:
                    raise ValueError(f"calib.{name}[{k!r}]: {v} must be in (0, 1]")
        for name in ("overhead_step_s", "overhead_seq_s", "ngram_lookup_s", "draft_forward_s", "step_cv"):
            if getattr(self, name) < 0:
                raise ValueError(f"calib.{name}: {getattr(self, name)} must be >= 0")
        if self.roofline_p < 1:
            raise ValueError(f"calib.roofline_p: {self.roofline_p} must be >= 1")

    def bw_eff(self, weights: str) -> float:
        return self.eff_bw_by_dtype.get(weights, self.eff_bw)

    def flops_eff(self, weights: str) -> float:
        return self.eff_flops_by_dtype.get(weights, self.eff_flops)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict) -> "CalibParams":
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"calib: unknown field {unknown[0]!r}; allowed: {', '.join(sorted(names))}")
        return cls(**d)


def default_params(hw: HardwareCard, engine: str = "") -> CalibParams:
    """Uncalibrated defaults by hardware kind.

    GPU: typical achieved fractions for mature decode kernels and a Python-scheduled engine
    (about 2 ms per step). CPU: a measured card already reports achieved copy bandwidth and
    SGEMM rate, so efficiencies start near 1 and llama.cpp's per-step overhead is small.
    """
    if hw.kind == "cpu":
        return CalibParams(hardware=hw.name, engine=engine or "llamacpp", eff_bw=0.7, eff_flops=0.6, eff_attn=0.5,
                           overhead_step_s=1e-3, overhead_seq_s=2e-4, draft_forward_s=5e-4, step_cv=0.03,
                           mem_util=0.8)
    return CalibParams(hardware=hw.name, engine=engine or "vllm")


def with_error_bars(p: CalibParams, lat_rel_err: float, thr_rel_err: float, provenance: str) -> CalibParams:
    return replace(p, lat_rel_err=float(lat_rel_err), thr_rel_err=float(thr_rel_err), provenance=provenance)
