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

from pareto_atlas.calibrate.published_readers import ReadResult, SourceFile, markdown_cells, number, table_row
from pareto_atlas.calibrate.published_readers.trtllm_perf import _V1_GPU, _VERSION, GPUS, _num_requests

# The document's MoE model names -> the catalog's MoE cards (spec/models.toml).
MODELS = {"Mixtral 8x7B": "mixtral-8x7b", "Qwen3-30B-A3B": "qwen3-30b-a3b", "Qwen3-235B-A22B": "qwen3-235b-a22b"}
# v1.0's FP4 models are NVIDIA's ModelOpt checkpoints ("nvidia/Qwen3-30B-A3B-FP4" in the document's
# list): NVFP4 weights and activations (spec.fp4 "NVFP4"), run on B200's FP4 tensor cores.
PRECISIONS = {"FP8": "FP8", "FP4": "NVFP4"}
_FP8_KV = "If you specify FP8 quantization, the KV cache will automatically be set to FP8"


def _row(
    out: ReadResult,
    src: SourceFile,
    source_id: str,
    version: str,
    nreq: dict,
    model_pub: str,
    gpu_pub: str,
    tp: int,
    prec: str,
    isl: int,
    osl: int,
    value: str,
    figure: str,
    fp8_kv: bool,
) -> None:
    model, gpu, weights = MODELS.get(model_pub), GPUS.get(gpu_pub), PRECISIONS.get(prec)
    if not model:
        out.skip(f"model {model_pub}: no catalog MoE card")
    elif not gpu:
        out.skip(f"GPU {gpu_pub}: no hardware card")
    elif not weights:
        out.skip(f"precision {prec}: no weight format")
    elif (isl, osl) not in nreq:
        out.skip("lengths without a $num_requests")
    else:
        n = nreq[(isl, osl)]
        kv = "fp8" if fp8_kv and weights == "FP8" else "unstated"
        out.rows.append(
            table_row(
                source_id=source_id,
                source=src.url,
                date="undated",
                engine="trtllm",
                engine_version=version,
                gpu=gpu,
                gpu_published=gpu_pub,
                model=model,
                model_published=model_pub,
                weights=weights,
                weights_published=prec,
                kv=kv,
                prompt_tokens=isl,
                output_tokens=osl,
                load="offline",
                load_value=n,
                n_requests=n,
                stat="-",
                out_tok_s=value,
                tp=tp,
                n_gpus=tp,
                notes=(
                    f"{figure} of trtllm-bench throughput, TP{tp}, all requests queued at once (max load): the "
                    f"engine's output tokens/s over the run, not converted; $num_requests from the document's "
                    f"table; expert layout ep 1, attention-DP 1 (see the reader)"
                    + ("; KV cache FP8 with FP8 quantization, as the document says" if kv == "fp8" else "")
                ),
            )
            | {"ep": "1", "attn_dp": "1"}
        )


def _wide_table(out: ReadResult, src: SourceFile, lines: list[str], source_id: str, nreq: dict) -> None:
    """v0.17: GPUs in the header, precisions on the row below it, a model's rows below its name."""
    start = next((i for i, ln in enumerate(lines) if ln.strip().startswith("| Throughput (tokens / sec)")), None)
    if start is None:
        return
    version = next((m.group(1) for ln in lines[max(0, start - 4) : start] if (m := _VERSION.search(ln))), "unstated")
    fp8_kv = _FP8_KV in src.text
    gpus, precs = markdown_cells(lines[start])[3:], markdown_cells(lines[start + 2])[3:]
    model, tp = "", 0
    for line in lines[start + 4 :]:
        if not line.strip().startswith("|"):
            break
        c = markdown_cells(line)
        model, tp = c[0] or model, int(c[1]) if c[1] else tp
        isl, osl = (int(x) for x in c[2].split(","))
        for gpu, prec, cell in zip(gpus, precs, c[3:]):
            if value := number(cell):
                args = (model, gpu, tp, prec, isl, osl, value, "Throughput (tokens / sec)", fp8_kv)
                _row(out, src, source_id, version, nreq, *args)


def _per_model_tables(
    out: ReadResult, src: SourceFile, lines: list[str], source_id: str, version: str, nreq: dict
) -> None:
    """v1.0: "#### <model>" then a table whose columns are "GPU<br/>TPn (PRECISION)"."""
    model = ""
    for i, line in enumerate(lines):
        if line.startswith("#### "):
            model = line[5:].strip()
        cells = markdown_cells(line)
        if not cells or cells[0] != "Sequence Length (ISL/OSL)":
            continue
        heads = [_V1_GPU.match(h) for h in cells[1:]]
        for row in lines[i + 2 :]:
            if not row.strip().startswith("|"):
                break
            c = markdown_cells(row)
            isl, osl = (int(x) for x in c[0].split("/"))
            for h, cell in zip(heads, c[1:]):
                if not (value := number(cell)):
                    continue
                if h is None:
                    out.skip("column without GPU<br/>TPn (PRECISION) (TP x PP layouts of RTX 6000)")
                elif model in MODELS and int(h["tp"]) > 1:
                    out.skip("MoE column above TP1: its expert layout (--ep $ep_size) is not stated")
                else:
                    args = (model, h["gpu"], int(h["tp"]), h["prec"], isl, osl, value)
                    _row(out, src, source_id, version, nreq, *args, "Total Output Throughput (tokens/sec)", False)


def read(src: SourceFile, source_id: str, version: str = "unstated") -> ReadResult:
    """The MoE rows of one perf-overview.md; `version` names the release of a v1.0-layout document."""
    lines = src.text.splitlines()
    out, nreq = ReadResult(), _num_requests(lines)
    _wide_table(out, src, lines, source_id, nreq)
    _per_model_tables(out, src, lines, source_id, version, nreq)
    return out
