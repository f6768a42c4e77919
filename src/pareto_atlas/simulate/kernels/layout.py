"""The coefficient vector's layout (what cost_model.coeffs fills and the kernels read) and the policies.

Seconds per unit unless said otherwise. A new coefficient goes at the end, before N_COEFFS.
"""

from __future__ import annotations

from pareto_atlas.spec.knobs import BATCHING

# W_T      s per step to stream the weights (the linear layers' memory side)
# KVR/KVW  s per KV token read / written by attention
# FL       s per token of body compute on the GEMM path; FL_V the same on the small-batch GEMV path;
#          FL_H the lm_head per logit row; TILE the GEMM column tile (0: every batch runs as GEMM)
# AT       s per attended (query, key) pair; CTX_SCALE the share of the context a decode reads
#          (eviction, sparse attention)
# O_STEP   s per step of engine overhead; O_SEQ the same per sequence in the step
# P        the p-norm's exponent that rounds the roofline's ridge (see step._smooth_max)
# Q        rows a decoding sequence runs per step (1 + k drafts under speculation); K the draft
#          length; ACC the acceptance per drafted token; DRAFT_P the share of steps that draft
# D_W, D_FL, D_KVR, D_O   the draft model's weights, compute per token, KV read per token, overhead
# XFER     s per prompt token of KV sent from the prefill pool to the decode pool (disaggregated)
# CV       the coefficient of variation of a step's time (jitter)
# KV_PAD   cells each decoding sequence attends beyond its context, in expectation (the engine pads
#          the attended cache; see CalibParams.kv_pad)
# O_REQ    s between a client's send and the engine seeing the request (HTTP, tokenization, the API
#          server's hop to the engine): in every TTFT and E2E, and in a closed loop's gap between a
#          completion and the client's next request, but never in an engine step
# COMM_STEP, COMM_TOK   a tensor/pipeline-parallel worker's collectives and stage sends over the
#          node's link, per step and per token of the step, serial with the kernels
#          (simulate.parallel); 0 on one device
# PP_STAGES  a pipeline-parallel worker's stages (0 or 1: none). A step is one pipeline round; its
#          sequences fill min(stages, sequences) micro-batches, and compute, KV traffic and the link's
#          bytes divide over those (one prompt alone crosses the stages one after the other: no gain)
W_T, KVR, KVW, FL, AT, CTX_SCALE, O_STEP, O_SEQ, P = range(9)
Q, K, ACC, D_W, D_FL, D_KVR, D_O, XFER, CV = range(9, 18)
FL_V, FL_H, TILE, DRAFT_P = range(18, 22)
KV_PAD = 22
O_REQ = 23
COMM_STEP, COMM_TOK = 24, 25
PP_STAGES = 26
# MOE_W    s per step to stream ALL the routed experts one device holds (a mixture of experts; 0:
#          dense): a step streams the share its tokens touch, 1 - (1 - MOE_K / MOE_E)^(tokens^MOE_SKEW)
#          (simulate.moe), beside W_T's always-read weights
# MOE_E, MOE_K, MOE_SKEW   experts per MoE layer, experts per token, the routing skew exponent
# ATTN_DP  attention data-parallel groups (0 or 1: none): a step's sequences spread over
#          min(groups, sequences) of them, and the body's compute, attention and per-sequence costs
#          (O_SEQ: each group's rank steps only its own sequences) divide over those
MOE_W, MOE_E, MOE_K, MOE_SKEW = 27, 28, 29, 30
ATTN_DP = 31
# O_STEP and O_SEQ are the engine's host (CPU) work of a step: scheduling, input preparation, launch
# and bookkeeping. O_DEV and SEQ_DEV are fixed device time, per step and per sequence, beside them
# (an MoE layer's router and grouped-GEMM launches; sliding-window layers' attention), serial with the
# kernels in every step.
# HOST_OVERLAP 1: the engine prepares step i+1 on the host while the device runs step i (vLLM's async
#          scheduling, on by default from a release: simulate.schedulers.host_overlap), so a step takes
#          max(device, host) instead of device + host; 0: serial (every step pays both).
O_DEV, SEQ_DEV, HOST_OVERLAP = 32, 33, 34
# ADP_DENSE  attention-DP with each prompt whole on one rank (TensorRT-LLM: its request queue gives a
#          request to one rank, and a step lasts as long as its busiest rank): the share of the body's
#          compute each rank runs for its own tokens (attention projections, dense layers, shared
#          experts; the routed experts' share, spread over EP, is not). 0: off, a step's tokens spread
#          evenly over the groups (ATTN_DP alone)
ADP_DENSE = 35
N_COEFFS = 36

# Closed-loop clients never land in the same instant: an idle engine starts a step for the first
# request and the others wait for the next one (llama.cpp's slot loop, vLLM's scheduler alike);
# a request sent when another completes misses the step the engine starts at that moment.
BURST_GAP_S = 1e-6

# whole: the chunked token budget, but a prompt is only ever prefilled whole in one step (TensorRT-LLM
# with enable_chunked_prefill off): one that does not fit what the decodes leave of the budget waits,
# and the prompts behind it too (first come, first served), unless nothing else runs.
# unmixed: prefill first, in chunks of the whole budget, and a step that prefills runs no decodes
# (SGLang with enable_mixed_chunk off): the decodes wait for it.
# +overlap: the same, under an overlap scheduler (TensorRT-LLM's PyTorch executor and SGLang by
# default): the batch a step runs was formed when the step before it started, so a request that
# arrives while a step runs joins the step after the next one (one step later than without).
# the batching knob's values (spec.knobs.BATCHING), whose order is the kernels' policy index
# mixed: SGLang with enable_mixed_chunk on (simulate.schedulers): the decodes ride with the prefill, and
# a step's prefill is the first waiting prompt (chunked at what the decodes leave of the budget) and
# then whole prompts only, each while it is under what is left; the first that is not stops the
# step's prefill (PrefillAdder.add_one_req: `input_tokens >= rem_input_tokens` with a request already
# in the batch). The budget stands for both max_prefill_tokens and chunked_prefill_size.
POLICIES = BATCHING
STATIC, CONTINUOUS, CHUNKED, SLO, DISAGG, WHOLE, UNMIXED = range(7)
N_PLAIN = 7  # policies N_PLAIN .. N_PLAIN + 2 are OVERLAID[policy - N_PLAIN] under an overlap scheduler
OVERLAID = (WHOLE, UNMIXED, CHUNKED)
MIXED, MIXED_OVERLAP = 10, 11  # mixed, and mixed under an overlap scheduler
# SGLang's admission (unmixed and mixed, with or without overlap) also reserves KV for the outputs to
# come (PrefillAdder: rem_total_tokens): a new request its whole min(max_new_tokens, CLIP) and every
# running one the tokens it has left, clipped, times new_token_ratio. The ratio starts at
# default_init_new_token_ratio 0.7 (x schedule_conservativeness 1.0), falls by (init - min) / 600
# each decode batch (default_new_token_ratio_decay_steps) to min = init x 0.14
# (default_min_new_token_ratio_factor), and after a retraction is reset to (tokens decoded +
# retract_decode_steps 20 per request) / their max_new_tokens, at most 1 (ScheduleBatch.retract_decode),
# and back to init whenever the engine is idle (Scheduler.self_check_during_idle).
# sgl-project/sglang python/sglang/global_config.py, srt/managers/scheduler.py, schedule_policy.py
# (CLIP_MAX_NEW_TOKENS_ESTIMATION 4096, SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION), schedule_batch.py.
SGL_INIT_RATIO = 0.7
SGL_MIN_RATIO = 0.7 * 0.14
SGL_DECAY = (SGL_INIT_RATIO - SGL_MIN_RATIO) / 600.0
SGL_CLIP = 4096
SGL_RETRACT_STEPS = 20
DEFAULT_CHUNK = 512  # prefill token budget when chunked/slo policies leave it unset
