"""How a published source ran its closed-loop rows, so a row is simulated as it was measured: the
deployment its benchmark wrote (batch shape, token budget a step, sequence limit) and what its figures
are (which statistic, over which requests).

aiconfigurator's silicon rows (ai-dynamo/aiconfigurator, silicon_sample.csv) are its benchmark's:
- Deployment: its benchmark rules (src/aiconfigurator/generator/rule_plugin/benchmark/{trtllm,vllm,
  sglang}.rule, ai-dynamo/aiconfigurator@095f58a5) set an aggregated worker's sequence limit to its
  batch size, the row's client count, and its token budget a step to batch + prompt + 1500
  (TensorRT-LLM `max_num_tokens`, vLLM `max_num_tokens`, i.e. max-num-batched-tokens) or prompt + 1500
  (SGLang `max_prefill_tokens`, with `enable_mixed_chunk` on: the decodes ride in the prefill step, which
  takes the first waiting prompt, chunked if need be, then later prompts only whole and only under what
  is left: SGLang's PrefillAdder, the `mixed` policy of simulate.kernels).
  TensorRT-LLM keeps `enable_chunked_prefill` off (backend_templates/trtllm/extra_engine_args
  .1.0.0rc3.yaml.j2): a prompt runs whole. The rules leave TensorRT-LLM's overlap scheduler on (`agg
  disable_overlap_scheduler = false`) and do not touch SGLang's (on by default) nor vLLM's async
  scheduling (off in 0.12.0): `+overlap` for the first two, as simulate.schedulers has them. At 8 clients and 1,024-token prompts vLLM's budget is
  2,532 tokens, so a wave of eight prompts is prefilled over four steps, not in one as under the
  engine's own default of 8,192 (simulate.schedulers), and its requests leave the wave staggered.
- Reading: its benchmark drives aiperf at a fixed concurrency, a warm-up, then ROUNDS x clients
  requests (backend_templates/benchmark/bench_run.sh.j2, generator/sflow.py MULTI_ROUND); aiperf
  waits for the warm-up to return before the measured phase sends (ai-dynamo/aiperf
  aiperf/timing/credit_issuing_strategy.py@32decb73, _execute_phases): the measured phase is a fresh
  closed loop from an idle engine, every client sending at once. Its figures are read as the mean
  over every request (the rows do not say mean or median; the benchmark's own report leads with the
  average, and branch gpusched's one-GPU comparison found the median reading off by far more).
  The whole measured phase is simulated, ROUNDS x clients requests (a few seconds for a card's rows:
  the decode steps between arrivals are fast-forwarded), so the first wave's queue is in the mean with
  its weight of 1 / ROUNDS.

- Weights: the generator passes the engine no weight quantization, only the KV dtype (SGLang's
  backend_templates/sglang/cli_args.0.5.6.post2.j2 writes no --quantization; the rule writes
  --kv-cache-dtype fp8_e4m3; config/backend_config_mapping.yaml maps no quantization key, @095f58a5),
  and SGLang without --quantization serves a checkpoint in its own dtype (ServerArgs.quantization
  None). So SGLang's rows on the BF16 base checkpoint (meta-llama/Llama-3.1-8B-Instruct, read FP8
  from gemm_quant_mode fp8_block, aiconfigurator's modelling choice) ran BF16 weights with an FP8 KV
  cache: sglang_weights. Not carried to the other engines: their rows that name a BF16 base
  checkpoint with an FP8 GEMM (Llama-3.1-70B from another source file, 2026-04-06.csv) include TP1 on
  one H200, where BF16 weights (141 GB) leave no room for a KV cache, so they were quantized by means
  the generator does not show; vLLM's Llama-3.1-8B rows name the FP8 checkpoint itself.

A row whose prompt is longer than a whole-prompt engine's token budget (TensorRT-LLM's default
max_num_tokens of 8,192 against trtllm-bench's 20,000-token prompts in its perf-overview) cannot have
run whole: max_num_tokens bounds the tokens of one forward pass, so such a prompt was prefilled in
chunks (TensorRT-LLM's chunked context). It runs `chunked` at the same budget, under the same overlap scheduler (apply_runs): under
`whole` the simulator admits it only into an empty engine, one at a time, and the perf-overview's
20,000/2,000 offline rows came out 82-89 % slow on H100-SXM.

Other rows run as before: the engine's default scheduler (calibrate.published._policy) and the
medians of the simulated requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from pareto_atlas.calibrate.fit import TARGETS, _anchors, predict
from pareto_atlas.simulate import des
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.memory import plan_memory
from pareto_atlas.simulate.parallel import replica_load
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.spec.cards import HardwareCard, ModelCard

AICONFIGURATOR = "aiconfigurator-silicon-sample"
ROUNDS = 20  # requests per client of aiconfigurator's measured phase (MULTI_ROUND's default)
EXTRA_TOKENS = 1500  # the rules' headroom over the prompt in a step's token budget
TRTLLM_BLOCK = 32  # TensorRT-LLM rounds max_num_tokens up to its tokens-per-block


@dataclass(frozen=True)
class Run:
    """One closed-loop row's deployment and reading, as its source ran it."""

    batching: str  # the kernel's policy (simulate.kernels.layout.POLICIES)
    chunk_tokens: int  # token budget a step
    max_seqs: int  # sequences the engine runs together
    rounds: int  # requests per client of the measured phase
    reading: str  # "mean": over every request of the measured phase
    weights: str = ""  # the weight format the deployment served ("": as the row reads it)


# TensorRT-LLM's attention-DP ranks each schedule their own requests: max_batch_size and max_num_tokens
# bound one rank (NVIDIA/TensorRT-LLM tensorrt_llm/_torch/pyexecutor/executor_request_queue.py: a worker
# admits tp_size x max_num_active_requests and hands each request to one rank), and aiconfigurator's rows
# state that rank's batch (silicon_sample.csv: batch_size 32 at 256 clients over attention_dp_size 8), so
# the rules' budget is the rank's batch + prompt + 1500, once per rank. A choice tried, off in the product
# (with it: the worker's budget is attn_dp such budgets; without: one budget from all its clients); see
# docs/results/2026-12-03-adp-ttft.md.
ADP_RANK_BUDGET = False


def aiconfigurator_run(engine: str, clients: int, prompt: int, attn_dp: int = 1) -> Run:
    """The deployment aiconfigurator's benchmark rules write for an aggregated worker of `engine`
    serving `clients` at `prompt` tokens (see the module's docstring for where each is set); attn_dp:
    its attention-DP ranks (ADP_RANK_BUDGET)."""
    if clients < 1 or prompt < 1 or attn_dp < 1:
        raise ValueError(f"clients, prompt, attn_dp: {clients}, {prompt}, {attn_dp} must be >= 1")
    if engine == "trtllm":
        ranks = attn_dp if ADP_RANK_BUDGET else 1
        batch = -(-clients // ranks)
        budget = -(-(batch + prompt + EXTRA_TOKENS) // TRTLLM_BLOCK) * TRTLLM_BLOCK * ranks
        return Run("whole+overlap", budget, clients, ROUNDS, "mean")
    if engine == "vllm":
        return Run("chunked", clients + prompt + EXTRA_TOKENS, clients, ROUNDS, "mean")
    if engine == "sglang":
        return Run("mixed+overlap", prompt + EXTRA_TOKENS, clients, ROUNDS, "mean")
    raise ValueError(f"engine: {engine!r} has no aiconfigurator benchmark rule; known: trtllm, vllm, sglang")


# Checkpoints aiconfigurator's rows name that are their model's unquantized BF16 release (the dense
# models its reader maps, published_readers.aiconfigurator.MODELS, less the FP8 one). A name is not
# enough to tell: deepseek-ai/DeepSeek-V3 and -R1 are released in FP8 under plain names.
BF16_CHECKPOINTS = frozenset({"meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B", "Qwen/Qwen3-32B"})


def sglang_weights(row: pd.Series) -> str:
    """The weight format SGLang served an aiconfigurator row in: BF16 where the row reads a quantized
    GEMM on a BF16 checkpoint (BF16_CHECKPOINTS; the generator passes no --quantization: see the
    module's docstring); "" where it is the row's own."""
    ckpt = str(row.get("model_published", ""))
    if row["engine"] != "sglang" or row["weights"] in ("BF16", "F16") or ckpt not in BF16_CHECKPOINTS:
        return ""
    return "BF16"


def row_run(row: pd.Series) -> Run | None:
    """How a published row was run, where its source says (an aggregated closed loop of
    aiconfigurator's); None: the engine's default scheduler and the median reading."""
    if row["source_id"] != AICONFIGURATOR or row["load"] != "concurrency" or int(row["prefill_workers"]):
        return None
    adp = int(row["attn_dp"]) if "attn_dp" in row and row["attn_dp"] == row["attn_dp"] else 1
    run = aiconfigurator_run(str(row["engine"]), int(float(row["load_value"])), int(row["prompt_tokens"]), adp)
    weights = sglang_weights(row)
    return replace(run, weights=weights) if weights else run


def apply_runs(frame: pd.DataFrame, rows: pd.DataFrame, too_long: bool = True) -> tuple[pd.DataFrame, list[Run | None]]:
    """The fit's anchor frame (calibrate.published.card_frame of `rows`) with each row's own deployment
    where its source states one, and the runs (None where it does not). too_long: a prompt longer than
    a whole-prompt budget runs chunked (False: such rows as before)."""
    runs = [row_run(r) for _, r in rows.iterrows()]
    out = frame.copy()
    for i, run in enumerate(runs):
        if run is not None:
            out.loc[i, ["batching", "chunk_tokens"]] = [run.batching, run.chunk_tokens]
            out.loc[i, "slots"] = min(int(out.loc[i, "slots"]), run.max_seqs)
            if run.weights:
                out.loc[i, "weights"] = run.weights
    if not too_long:
        return out, runs
    whole = out.batching.isin(["whole", "whole+overlap"])
    too_long = whole & (out.prompt_tokens.astype(int) > out.chunk_tokens.astype(int))
    out.loc[too_long, "batching"] = out.loc[too_long, "batching"].str.replace("whole", "chunked", regex=False)
    return out, runs


def read_as_run(frame: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """The anchor frame with each row whose source states its run simulated and read as it ran
    (apply_runs' deployment; its measured phase, run.rounds rounds of its clients from an idle engine,
    as n_requests; its TTFT and TPOT read as the mean over every request, the frame's `reading`, which
    calibrate.anchors.predict honours), so any fit or prediction of the frame runs it so; every other
    row as card_frame left it (its engine's default scheduler, the medians; a too-long whole prompt
    too). calibrate.published.card_frame(as_run=True) is this."""
    out, runs = apply_runs(frame, rows, too_long=False)
    reading = out["reading"].tolist() if "reading" in out else ["p50"] * len(out)
    for i, run in enumerate(runs):
        if run is not None:
            reps = out.loc[i, "replicas"] if "replicas" in out else 1
            conc, _, _ = replica_load(int(out.loc[i, "concurrency"]), 0.0, int(reps) if reps == reps else 1)
            out.loc[i, "n_requests"] = run.rounds * conc
            reading[i] = run.reading
    out["reading"] = reading
    return out


def predict_run(
    frame: pd.DataFrame, model: ModelCard, hw: HardwareCard, params: CalibParams, run: Run, seed: int = 0
) -> np.ndarray:
    """TARGETS of one closed-loop anchor row (a one-row frame) under its source's run: its measured
    phase (run.rounds rounds of its clients from an idle engine), the medians' slots holding the run's
    reading (the mean over every request) and the p99 and throughput the simulation's own."""
    (a,) = _anchors(frame)
    c = coeffs(model, hw, a.knobs, params, host_overlap=a.host_overlap)
    plan = plan_memory(model, hw, a.knobs, a.prompt, a.output, params)
    conc, _, busy = replica_load(a.concurrency, 0.0, a.knobs.replicas)
    n = run.rounds * conc
    cap = plan.kv_cap_tokens if plan.kv_cap_tokens > 0 else np.inf
    res = des.run(
        c,
        des.closed_loop(conc, n, a.prompt, a.output),
        a.knobs.batching,
        a.knobs.slots,
        a.knobs.chunk_tokens,
        cap,
        None,
        seed=seed,
    )
    s = res.summary
    tpot = (res.finish_t - res.first_t) / np.maximum(res.output - 1, 1)
    mean = {"ttft_p50_ms": 1e3 * float(np.mean(res.ttft)), "tpot_p50_ms": 1e3 * float(np.mean(tpot))}
    return np.array([mean.get(t, s[t] * (busy if t == "throughput_tok_s" else 1.0)) for t in TARGETS])


def predict_rows(
    frame: pd.DataFrame, models: Sequence[ModelCard], hw: HardwareCard, params: CalibParams, runs: Sequence[Run | None]
) -> np.ndarray:
    """TARGETS per anchor row: a row with a run as its source ran and read it (predict_run), the rest
    as calibrate.fit.predict simulates them."""
    out = np.full((len(frame), len(TARGETS)), np.nan)
    plain = np.array([r is None for r in runs], bool)
    if plain.any():
        out[plain] = predict(_anchors(frame[plain]), [m for m, p in zip(models, plain) if p], hw, params)
    for i in np.flatnonzero(~plain):
        out[i] = predict_run(frame.iloc[[i]], models[i], hw, params, runs[i], seed=int(i))
    return out
