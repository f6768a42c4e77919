"""Reader of the mixture-of-experts rows of TensorRT-LLM's performance overview (NVIDIA/TensorRT-LLM,
docs/source/performance/perf-overview.md), the file and the two layouts the dense reader
(published_readers.trtllm_perf) reads, for the MoE table (spec/published_moe.csv).

Each figure is the document's offline throughput: `trtllm-bench throughput` with every request queued
at once, "Throughput (tokens / sec)" in v0.17 and "Total Output Throughput (tokens/sec)" in v1.0,
output tokens per second of the whole engine (all its GPUs), a total over the run (statistic "-").
It is kept as it is, as the row's out_tok_s with the request count of the document's
$num_requests table; nothing is converted: an offline run publishes no TTFT or TPOT, and its
batch is the engine's, not stated, so no per-user rate or step time follows from the total.

The expert layout is what the document states for the table:
- v0.17 builds an engine with `--tp_size --pp_size` only: no expert parallelism and no attention
  data parallelism flag exists in that command, so the experts split by tensor parallelism
  (ep 1, MoE-TP = TP, TensorRT-LLM's mapping when no moe_ep_size is given), attn_dp 1;
- v1.0 runs MoE models with `--ep $ep_size` whose value no table states: a column at TP1 runs on one
  GPU (ep 1, attention-DP 1 whatever the options say); a column above TP1 is left out (counted),
  as its expert layout is not stated.
Left out too, counted: models without a catalog MoE card (Mixtral 8x22B, Llama 4 Scout/Maverick),
GPUs without a card (GH200, GB200, L40S, A100), lengths without a $num_requests.
"""

from __future__ import annotations

from pareto_atlas.calibrate.published_readers import ReadResult, SourceFile
from pareto_atlas.calibrate.published_readers.trtllm_perf import (
    Figure,
    _num_requests,
    offline_row,
    per_model_figures,
    wide_figures,
)

# The document's MoE model names -> the catalog's MoE cards (spec/models.toml).
MODELS = {"Mixtral 8x7B": "mixtral-8x7b", "Qwen3-30B-A3B": "qwen3-30b-a3b", "Qwen3-235B-A22B": "qwen3-235b-a22b"}
# v1.0's FP4 models are NVIDIA's ModelOpt checkpoints ("nvidia/Qwen3-30B-A3B-FP4" in the document's
# list): NVFP4 weights and activations (spec.fp4 "NVFP4"), run on B200's FP4 tensor cores.
PRECISIONS = {"FP8": "FP8", "FP4": "NVFP4"}
_FP8_KV = "If you specify FP8 quantization, the KV cache will automatically be set to FP8"
_EP1 = {"ep": "1", "attn_dp": "1"}  # the expert layout the module's doc derives


def _row(out: ReadResult, src: SourceFile, source_id: str, version: str, nreq: dict, f: Figure, **kw) -> None:
    """The row of one MoE figure (trtllm_perf.offline_row), its expert layout ep 1, attention-DP 1."""
    kw.update(models=MODELS, precisions=PRECISIONS, card="catalog MoE card", extra=_EP1)
    offline_row(out, src, source_id, version, nreq, f, **kw)


def _notes(figure: str) -> str:
    return (
        f"{figure} of trtllm-bench throughput, TP{{tp}}, all requests queued at once (max load): the "
        f"engine's output tokens/s over the run, not converted; $num_requests from the document's "
        f"table; expert layout ep 1, attention-DP 1 (see the reader)"
    )


def _wide_table(out: ReadResult, src: SourceFile, lines: list[str], source_id: str, nreq: dict) -> None:
    """v0.17 (trtllm_perf.wide_figures): its KV cache FP8 with FP8 weights where the document says so."""
    fp8_kv = _FP8_KV in src.text
    for version, f in wide_figures(lines):
        _row(out, src, source_id, version, nreq, f, fp8_kv=fp8_kv, notes=_notes("Throughput (tokens / sec)"))


def _per_model_tables(
    out: ReadResult, src: SourceFile, lines: list[str], source_id: str, version: str, nreq: dict
) -> None:
    """v1.0 (trtllm_perf.per_model_figures): a MoE column above TP1 is left out (its --ep is not stated)."""
    for f in per_model_figures(lines):
        if f is None:
            out.skip("column without GPU<br/>TPn (PRECISION) (TP x PP layouts of RTX 6000)")
        elif f.model in MODELS and f.tp > 1:
            out.skip("MoE column above TP1: its expert layout (--ep $ep_size) is not stated")
        else:
            notes = _notes("Total Output Throughput (tokens/sec)")
            _row(out, src, source_id, version, nreq, f, fp8_kv=False, notes=notes)


def read(src: SourceFile, source_id: str, version: str = "unstated") -> ReadResult:
    """The MoE rows of one perf-overview.md; `version` names the release of a v1.0-layout document."""
    lines = src.text.splitlines()
    out, nreq = ReadResult(), _num_requests(lines)
    _wide_table(out, src, lines, source_id, nreq)
    _per_model_tables(out, src, lines, source_id, version, nreq)
    return out
