"""Reader of TensorRT-LLM's performance overview (NVIDIA/TensorRT-LLM,
docs/source/performance/perf-overview.md) in the two layouts its releases used:

- v0.17 and near: one wide throughput table (model, "Tensor Model Parallel Size", "ISL, OSL", one
  column per GPU under a precision row) of `trtllm-bench throughput` output tokens/s with every
  request queued at once, and an online-serving table (model, GPU, TP, lengths, QPS, mean TTFT,
  mean ITL, output tokens/s) from the Triton TensorRT-LLM backend, 500 requests at BF16;
- v1.0 and near: one table per model ("#### Llama 3.3 70B"), a column per "GPU<br/>TPn (PRECISION)".

Offline rows take the request count from the document's `$num_requests` table for their lengths.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

from pareto_atlas.calibrate.published_readers import ReadResult, SourceFile, markdown_cells, number, table_row

GPUS = {
    "H200 141GB HBM3": "H200",
    "H200 131GB HBM3": "H200",
    "H100 80GB HBM3": "H100-SXM",
    "H200": "H200",
    "H100": "H100-SXM",
    "B200": "B200",
}
# The document's model names -> catalog cards (spec/models.toml).
MODELS = {
    "LLaMA v3.1 8B": "llama-3.1-8b",
    "LLaMA 3.1 8B": "llama-3.1-8b",
    "Llama 3.1 8B": "llama-3.1-8b",
    "LLaMA v3.1 70B": "llama-3.1-70b",
    "LLaMA 3.1 70B": "llama-3.1-70b",
    "Llama 3.3 70B": "llama-3.3-70b",
    "Mistral 7B": "mistral-7b",
}
PRECISIONS = {"FP8": "FP8", "FP16": "F16", "BF16": "BF16"}
_V1_GPU = re.compile(r"^(?P<gpu>[A-Za-z0-9 ]+?)<br/>TP(?P<tp>\d+) \((?P<prec>\w+)\)$")
_VERSION = re.compile(r"generated using version ([\d.]+)")


def _num_requests(lines: list[str]) -> dict[tuple[int, int], int]:
    """(ISL, OSL) -> $num_requests, from the document's table of them."""
    out = {}
    for i, line in enumerate(lines):
        cells = markdown_cells(line)
        if cells[:2] == ["Input Length", "Output Length"] and "$num_requests" in cells:
            j = cells.index("$num_requests")
            for row in lines[i + 2 :]:
                c = markdown_cells(row)
                if not row.strip().startswith("|") or len(c) <= j or not number(c[0]):
                    break
                out[(int(c[0]), int(c[1]))] = int(c[j])
    return out


class Figure(NamedTuple):
    """One offline throughput figure of the document as it names it: model, GPU, tensor-parallel size,
    precision, lengths, the cell's text."""

    model: str
    gpu: str
    tp: int
    prec: str
    isl: int
    osl: int
    value: str


def wide_figures(lines: list[str]) -> Iterator[tuple[str, Figure]]:
    """The v0.17 throughput table's figures, each with the version the document prints above the table:
    GPUs in the header, precisions on the row below it, a model's rows below its name."""
    start = next((i for i, ln in enumerate(lines) if ln.strip().startswith("| Throughput (tokens / sec)")), None)
    if start is None:
        return
    version = next((m.group(1) for ln in lines[max(0, start - 4) : start] if (m := _VERSION.search(ln))), "unstated")
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
                yield version, Figure(model, gpu, tp, prec, isl, osl, value)


def per_model_figures(lines: list[str]) -> Iterator[Figure | None]:
    """The v1.0 layout's figures: "#### <model>" then a table whose columns are "GPU<br/>TPn (PRECISION)";
    None for a figure under a column not named so."""
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
                if value := number(cell):
                    yield None if h is None else Figure(model, h["gpu"], int(h["tp"]), h["prec"], isl, osl, value)


def offline_row(
    out: ReadResult,
    src: SourceFile,
    source_id: str,
    version: str,
    nreq: dict,
    f: Figure,
    *,
    models: dict[str, str],
    precisions: dict[str, str],
    fp8_kv: bool,
    notes: str,
    card: str = "catalog card",
    extra: dict[str, str] | None = None,
) -> None:
    """The row of one offline figure (trtllm-bench, every request queued at once: its request count the
    document's $num_requests for its lengths), or the reason it is left out. `models`, `precisions`: the
    reader's names -> cards and weight formats; `fp8_kv`: the document says FP8 quantization sets the KV
    cache to FP8; `notes`: what the figure is ("{tp}" stands for its TP); `extra`: columns of the reader's
    own table (the MoE layout)."""
    model, gpu, weights = models.get(f.model), GPUS.get(f.gpu), precisions.get(f.prec)
    if not model:
        out.skip(f"model {f.model}: no {card}")
    elif not gpu:
        out.skip(f"GPU {f.gpu}: no hardware card")
    elif not weights:
        out.skip(f"precision {f.prec}: no weight format")
    elif (f.isl, f.osl) not in nreq:
        out.skip("lengths without a $num_requests")
    else:
        n = nreq[(f.isl, f.osl)]
        kv = "fp8" if fp8_kv and weights == "FP8" else "unstated"
        row = table_row(
            source_id=source_id,
            source=src.url,
            date="undated",
            engine="trtllm",
            engine_version=version,
            gpu=gpu,
            gpu_published=f.gpu,
            model=model,
            model_published=f.model,
            weights=weights,
            weights_published=f.prec,
            kv=kv,
            prompt_tokens=f.isl,
            output_tokens=f.osl,
            load="offline",
            load_value=n,
            n_requests=n,
            stat="-",
            out_tok_s=f.value,
            tp=f.tp,
            n_gpus=f.tp,
            notes=notes.replace("{tp}", str(f.tp))
            + ("; KV cache FP8 with FP8 quantization, as the document says" if kv == "fp8" else ""),
        )
        out.rows.append(row | (extra or {}))


_NOTES = (
    "Throughput (tokens/sec) of trtllm-bench, TP{tp}, all requests queued at once (max load); "
    "$num_requests from the document's table"
)


def _wide_table(out: ReadResult, src: SourceFile, lines: list[str], source_id: str, nreq: dict) -> None:
    """The v0.17 throughput table: "If you specify FP8 quantization, the KV cache will automatically be
    set to FP8", the document says of it."""
    for version, f in wide_figures(lines):
        kw = {"models": MODELS, "precisions": PRECISIONS, "fp8_kv": True, "notes": _NOTES}
        offline_row(out, src, source_id, version, nreq, f, **kw)


def _online_table(out: ReadResult, src: SourceFile, lines: list[str], source_id: str) -> None:
    """The online-serving table: 500 requests at BF16 at each QPS ("INF": all at once)."""
    start = next((i for i, ln in enumerate(lines) if "**Mean TTFT(ms)**" in ln), None)
    if start is None:
        return
    head = [h.strip("* ") for h in markdown_cells(lines[start])]
    note = next((ln for ln in lines[max(0, start - 6) : start] if _VERSION.search(ln)), "")
    version = _VERSION.search(note).group(1) if note else "unstated"
    n = int(m.group(1)) if (m := re.search(r"with (\d+) requests", note)) else 0
    prec = m.group(1) if (m := re.search(r"and (\w+) precision", note)) else ""
    if not n or prec not in PRECISIONS:
        out.skip("online table without its request count or precision")
        return
    col = {h: i for i, h in enumerate(head)}
    carry: dict[str, str] = {}
    for line in lines[start + 1 :]:
        if not line.strip().startswith("|"):
            break
        c = markdown_cells(line)
        for h in ("Model", "GPU", "TP", "Input Length", "Output Length"):
            carry[h] = c[col[h]] or carry.get(h, "")
        model, gpu = MODELS.get(carry["Model"]), GPUS.get(carry["GPU"])
        if not model or not gpu:
            out.skip(f"online: {carry['Model']} on {carry['GPU']}: no card")
            continue
        qps, tp = c[col["QPS"]], int(carry["TP"])
        load, value = ("offline", n) if qps.upper() == "INF" else ("rate", qps)
        out.rows.append(
            table_row(
                source_id=source_id,
                source=src.url,
                date="undated",
                engine="trtllm",
                engine_version=f"{version} (Triton TensorRT-LLM backend)",
                gpu=gpu,
                gpu_published=carry["GPU"],
                model=model,
                model_published=carry["Model"],
                weights=PRECISIONS[prec],
                weights_published=prec,
                kv="unstated",
                prompt_tokens=int(carry["Input Length"]),
                output_tokens=int(carry["Output Length"]),
                load=load,
                load_value=value,
                n_requests=n,
                stat="mean",
                ttft_ms=number(c[col["Mean TTFT(ms)"]]),
                itl_ms=number(c[col["Mean ITL(ms)"]]),
                out_tok_s=number(c[col["Output Tput (tok/s)"]]),
                tp=tp,
                n_gpus=tp,
                notes=(
                    f"online serving, QPS {qps}, {n} requests; Mean TTFT(ms), Mean ITL(ms), Output Tput (tok/s); "
                    f"Tput(req/s) {c[col['Tput(req/s)']]}, Total Token Tput (tok/s) {c[col['Total Token Tput (tok/s)']]}"
                ),
            )
        )


def _per_model_tables(
    out: ReadResult, src: SourceFile, lines: list[str], source_id: str, version: str, nreq: dict
) -> None:
    """The v1.0 layout's tables (per_model_figures)."""
    for f in per_model_figures(lines):
        if f is None:
            out.skip("column without GPU<br/>TPn (PRECISION)")
        else:
            kw = {"models": MODELS, "precisions": PRECISIONS, "fp8_kv": False, "notes": _NOTES}
            offline_row(out, src, source_id, version, nreq, f, **kw)


def read(src: SourceFile, source_id: str, version: str = "unstated") -> ReadResult:
    """Every table of one perf-overview.md; `version` names the release of a v1.0-layout document
    (that layout does not print it)."""
    lines = src.text.splitlines()
    out, nreq = ReadResult(), _num_requests(lines)
    _wide_table(out, src, lines, source_id, nreq)
    _online_table(out, src, lines, source_id)
    _per_model_tables(out, src, lines, source_id, version, nreq)
    return out
