"""Each GPU engine's own scheduler as it runs by default: its batching policy, prefill token budget and
sequence limit, so a simulated GPU point runs what a user who starts the engine without flags gets.

vLLM (V1), SGLang and TensorRT-LLM all batch prefills under a per-step token budget; none prefills
one request per step. The defaults and where each is set:

engine     policy (kernel)   budget, tokens a step            max sequences   set in
vllm (V1)  chunked, mixed    8192 on >= 70 GiB but not A100,  1024, else 256  vllm-project/vllm vllm/engine/arg_utils.py:
                             else 2048                                        EngineArgs.get_batch_defaults, API server
sglang     unmixed+overlap   2048 under 35 GiB, 8192 under    the KV pool     sgl-project/sglang
                             160 GiB, else 16384                              python/sglang/srt/server_args.py:
                                                                              chunked_prefill_size, enable_mixed_chunk,
                                                                              disable_overlap_schedule (False)
trtllm     whole+overlap     max_num_tokens 8192              2048            NVIDIA/TensorRT-LLM
                                                                              tensorrt_llm/llmapi/llm_args.py: BaseLlmArgs
                                                                              (enable_chunked_prefill False);
                                                                              docs/source/torch/features/overlap_scheduler.md

- vLLM V1 mixes prefill chunks with the running decodes under one budget (`chunked`).
- SGLang runs a prefill batch without the decodes by default (enable_mixed_chunk False) and first
  whenever one can be formed (Scheduler.get_next_batch_to_run): `unmixed`, the decodes wait for it.
- TensorRT-LLM admits a prompt only whole (enable_chunked_prefill False): a prompt that does not fit
  what the decodes leave of max_num_tokens waits for a later step (`whole`).
- Overlap (`+overlap`): TensorRT-LLM's PyTorch executor ("Enabled by default. To disable, set
  disable_overlap_scheduler=True": NVIDIA/TensorRT-LLM docs/source/torch/features/overlap_scheduler.md
  @8237b7d6) and SGLang (ServerArgs.disable_overlap_schedule False) form step n+1's batch while step
  n runs, so a request that arrives during a step joins the step after the next one. aiconfigurator's
  benchmark deployments keep it on too (ai-dynamo/aiconfigurator@095f58a5
  src/aiconfigurator/generator/rule_plugin/benchmark/trtllm.rule: `agg disable_overlap_scheduler =
  false`). vLLM V1's counterpart is async scheduling, off by default before VLLM_ASYNC_FROM (see
  host_overlap), so the atlas's vLLM stays `chunked`; a published row of a later release runs it
  (calibrate.published). Not modelled: TensorRT-LLM before its early exit (PR #8587,
  2025-10) runs a finishing request one more step, which holds its slot a step longer.
- Host overlap (cost_model.coeffs host_overlap, kernels.layout HOST_OVERLAP): under vLLM's async
  scheduling the engine schedules and prepares the inputs of step i+1 on the CPU while the GPU runs
  step i, so a step costs max(device, host), not device + host, and its batch is formed while the step
  before runs (the `+overlap` admission). Only vLLM's releases are switched by version here: the
  overlap schedulers of TensorRT-LLM and SGLang keep their serial step cost, as their one-GPU fits
  were made (their fixed cost a step is fitted on rows that all ran with it on).
- SGLang's admission reserves KV for the outputs to come (schedule_policy.PrefillAdder,
  rem_total_tokens): a new request is admitted only if its prompt and its whole min(max_new_tokens,
  4096) fit beside what the pool holds and every running request's clipped outputs to come times
  new_token_ratio, a ratio that starts at 0.7, falls over 600 decode batches to 0.098 and is reset by
  a retraction, back to 0.7 when the engine is idle (global_config, scheduler.py
  self_check_during_idle, schedule_batch.retract_decode; kernels.layout SGL_*).
  The kernel applies it under `unmixed` and `mixed` (SGLang's policies, with or without overlap).
- SGLang with enable_mixed_chunk on (aiconfigurator's benchmark rule sets it, with max_prefill_tokens
  = prompt + 1500: calibrate.published_runs): `mixed`. The decodes ride with the prefill batch and
  count against its budget (PrefillAdder: rem_input_tokens and rem_chunk_tokens less the running
  batch); the batch takes the first waiting prompt (chunked at the budget), then whole prompts only,
  each while it is under what is left (add_one_req: `input_tokens >= rem_input_tokens` with a
  request in the batch stops it). Read at sgl-project/sglang's PrefillAdder of the 0.5 series
  (rem_total_token_offset, mixed_with_decode_tokens), the rows' 0.5.6.post2 not pinned.
Not modelled: TensorRT-LLM's GUARANTEED_NO_EVICT reserving each one's whole output (it only binds when
the KV pool is nearly full, where the kernel preempts instead).
"""

from __future__ import annotations

from dataclasses import dataclass

from pareto_atlas.spec.cards import HardwareCard
from pareto_atlas.spec.knobs import BUDGETED

# SGLang's running requests are bounded by its KV pool, not by a count: the sweep's KV cap does that.
UNBOUNDED_SEQS = 1 << 20


@dataclass(frozen=True)
class Scheduler:
    """One engine's default scheduling on one card."""

    engine: str
    batching: str  # the kernel's policy (layout.POLICIES)
    chunk_tokens: int  # prefill token budget per step, decodes included
    max_seqs: int  # sequences running together
    source: str  # where the defaults are set
    overlap: bool = False  # an overlap scheduler: a step's batch is formed while the step before runs

    @property
    def policy(self) -> str:
        """The kernel's policy name it runs (layout.POLICIES), e.g. "whole+overlap"."""
        return f"{self.batching}+overlap" if self.overlap else self.batching

    @property
    def label(self) -> str:
        """What a point's `scheduler` column says, e.g. "vllm-v1 chunked 8192"."""
        return f"{ENGINE_NAMES[self.engine]} {self.policy} {self.chunk_tokens}"


ENGINE_NAMES = {"vllm": "vllm-v1", "sglang": "sglang", "trtllm": "trtllm"}


def _vllm(hw: HardwareCard) -> Scheduler:
    big = hw.mem_gib >= 70 and "a100" not in hw.name.lower()
    return Scheduler(
        "vllm",
        "chunked",
        8192 if big else 2048,
        1024 if big else 256,
        "vllm-project/vllm vllm/engine/arg_utils.py get_batch_defaults",
    )


def _sglang(hw: HardwareCard) -> Scheduler:
    budget = 2048 if hw.mem_gib < 35 else 8192 if hw.mem_gib < 160 else 16384
    return Scheduler(
        "sglang",
        "unmixed",
        budget,
        UNBOUNDED_SEQS,
        "sgl-project/sglang python/sglang/srt/server_args.py chunked_prefill_size, enable_mixed_chunk, "
        "disable_overlap_schedule",
        overlap=True,
    )


def _trtllm(hw: HardwareCard) -> Scheduler:
    return Scheduler(
        "trtllm",
        "whole",
        8192,
        2048,
        "NVIDIA/TensorRT-LLM tensorrt_llm/llmapi/llm_args.py BaseLlmArgs; "
        "docs/source/torch/features/overlap_scheduler.md@8237b7d6",
        overlap=True,
    )


SCHEDULERS = {"vllm": _vllm, "sglang": _sglang, "trtllm": _trtllm}

# vLLM's first release that runs async scheduling by default. Where it is set: SchedulerConfig.
# async_scheduling defaults to False (vllm/config/scheduler.py at vllm-project/vllm@01230b40, a tree
# before 0.12: it still deprecates a name "removed in v0.12"), then to None, which VllmConfig.
# __post_init__ resolves to True "unless there is an incompatible option" (vllm/config/scheduler.py at
# vllm-project/vllm@1f8758d5; vllm/config/vllm.py: pipeline parallelism, speculation other than
# EAGLE/MTP, an executor other than mp/uni/external_launcher, later pooling models disable it). The
# change is vLLM PR #27614 "[Core] Enable async scheduling by default" (opened 2025-10-27); the release
# it first shipped in, 0.14.0, is read from two downstream projects, not from a tagged vLLM tree:
# torch-spyre/sendnn-inference PR #636 (2026-01-20, "Add v0.14.0 support": "Disables async scheduling
# which is now enabled by default" citing #27614, its v0.13.0 kept as the compatibility baseline) and
# deepjavalibrary/djl issue #3833 ("Async scheduling is now enabled by default in v0.14").
# aiconfigurator's vLLM rows are of 0.11.2 and 0.12.0 (and rows stating none, measured 2025-10 to
# 2025-12) on one side, 0.15.1 to 0.19.0 on the other: none is of 0.13 or 0.14.
VLLM_ASYNC_FROM = (0, 14)


def release(version: str) -> tuple[int, ...] | None:
    """(0, 11, 2) of "0.11.2" or "0.23.0 (V1 engine)"; None where a row states no release ("unstated",
    "not stated (...)", a nightly build, a branch name)."""
    head = str(version).strip().split(" ")[0].split("-")[0]
    parts = head.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        return None
    return tuple(int(p) for p in parts[:3] if p.isdigit())


def host_overlap(engine: str, version: str, pp: int = 1) -> bool:
    """Whether `engine` at release `version` overlaps a step's host work (scheduling, input preparation)
    with the device's previous step by default: vLLM from VLLM_ASYNC_FROM on, without pipeline
    parallelism (async scheduling disabled itself under PP > 1 when it became the default:
    vllm/config/vllm.py "not yet supported with pipeline_parallel_size > 1"). A release not stated is
    taken as without: aiconfigurator's rows that state none were measured in 2025, before the default;
    the one-GPU table's vrscience-thesis rows (runs of 2026-06, no release stated) stay serial for want
    of one."""
    v = release(version)
    return engine == "vllm" and v is not None and v >= VLLM_ASYNC_FROM and pp <= 1


def scheduler(engine: str, hw: HardwareCard) -> Scheduler:
    """The engine's default scheduler on a GPU card."""
    if hw.kind == "cpu":
        raise ValueError(f"scheduler: {hw.name} is a CPU card; its points keep their own batching knob")
    if engine not in SCHEDULERS:
        raise ValueError(f"engine: {engine!r} has no default scheduler; known: {', '.join(SCHEDULERS)}")
    return SCHEDULERS[engine](hw)


def default_policy(engine: str, hw: HardwareCard) -> tuple[str, int, int]:
    """(batching policy, chunk_tokens, max_seqs) the engine runs by default on this GPU card; the
    policy with "+overlap" where the engine runs an overlap scheduler."""
    s = scheduler(engine, hw)
    return s.policy, s.chunk_tokens, s.max_seqs


def gpu_engine(space_engine: str) -> str:
    """The engine that serves a space's GPU cards: the space's own where it is a GPU engine, else
    vLLM (llama.cpp studies simulate their GPU cards as vLLM serves them, see space.GPU_WEIGHTS)."""
    return space_engine if space_engine in SCHEDULERS else "vllm"


def resolve(batching: str, chunk_tokens: int, hw: HardwareCard, engine: str = "vllm") -> tuple[str, int, str]:
    """(batching, chunk_tokens, scheduler label) a point runs: on a GPU card, `continuous` is the
    engine's own default scheduler (engine: the space's, see gpu_engine); every other policy, and
    every CPU point, runs as its knobs say."""
    if hw.kind != "cpu" and batching == "continuous":
        s = scheduler(gpu_engine(engine), hw)
        return s.policy, s.chunk_tokens, s.label
    label = f"{batching} {chunk_tokens}" if batching in BUDGETED and chunk_tokens > 0 else batching
    return batching, chunk_tokens, label
