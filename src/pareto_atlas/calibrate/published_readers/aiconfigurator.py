"""Reader of aiconfigurator's measured serving points (ai-dynamo/aiconfigurator,
aic-core/src/aiconfigurator_core/systems/silicon_sample.csv, Apache-2.0): one row per point with its
backend and version, model, system, precision, ISL/OSL, per-point TP/PP/attention-DP or the
disaggregated xPyD topology, and the measured `silicon_ttft_ms` and `silicon_tpot_ms`.

What the file does not say, and how the rows carry it:
- the statistic of its TTFT and TPOT (mean or median): stat "unstated";
- the closed loop's client count is in the free-text `silicon_data_source` ("silicon_concurrency=N")
  or the point's id ("_c<N>_"); `batch_size` is not it (it differs from both on some rows);
- the KV cache dtype. A row with an FP8 GEMM (gemm_quant_mode fp8 or fp8_block) reads kv "fp8", as
  aiconfigurator itself resolves and deploys such a configuration (KV_SOURCE, in the row's notes);
  any other row keeps kv "unstated" (read as f16);
- the weights where `precision` is empty: the checkpoint's own (BF16 for these models), said so in
  weights_published.
A setup that repeats (every field of the row but the figures alike) is kept once when its figures
are equal too, with the count in its notes, and kept every time, numbered, when they differ.
"""

from __future__ import annotations

import csv
import io
import re
from collections import defaultdict

from pareto_atlas.calibrate.published_readers import ReadResult, SourceFile, table_row

SOURCE_ID = "aiconfigurator-silicon-sample"
# Dense checkpoints the model catalog (spec/models.toml) has a card for; the file's MoE models are
# left out (the simulator has no expert routing).
MODELS = {
    "meta-llama/Llama-3.1-70B": "llama-3.1-70b",
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "nvidia/Llama-3.1-8B-Instruct-FP8": "llama-3.1-8b",
    "Qwen/Qwen3-32B": "qwen3-32b",
}
SYSTEMS = {"h100_sxm": "H100-SXM", "h200_sxm": "H200", "b200_sxm": "B200"}
# gemm_quant_mode -> weight format; fp8_block (block-scaled FP8) reads as FP8, FP4 has no format here
WEIGHTS = {"fp8": "FP8", "fp8_block": "FP8", "": "BF16"}
ENGINES = {"trtllm": "trtllm", "vllm": "vllm", "sglang": "sglang"}
# An FP8 GEMM goes with an FP8 KV cache wherever aiconfigurator chooses the KV dtype, and its
# deployment generator passes that dtype to the engine, so a row measured on the deployment it
# writes ran an FP8 KV cache (the file itself states no KV dtype):
# - its Hopper/Blackwell default (TaskConfigFactory._get_quant_mode, src/aiconfigurator/sdk/task.py
#   from 93076c603 (2025-10-07) to ae7ece35a (2026-02-11), e.g. @71bb3d00e) returns kvcache "fp8" on
#   SM >= 89 beside the GEMM modes these rows carry: "fp8" under vLLM, "fp8_block" under the other
#   backends (the only way a BF16 checkpoint such as SGLang's Llama-3.1-8B-Instruct rows gets
#   fp8_block); its fp8_default profile pairs fp8 GEMM and KV, float16_default neither;
# - since ae7ece35a, from the checkpoint: a quant_algo FP8 checkpoint (nvidia/*-FP8, ModelOpt) resolves
#   kvcache fp8 (aic-core/src/aiconfigurator_core/sdk/models/helpers.py
#   _infer_quant_modes_from_raw_config @095f58a5);
# - the generator writes the resolved dtype as the engine's KV dtype (src/aiconfigurator/generator/
#   module_bridge.py kv_cache_dtype, config/backend_config_mapping.yaml: vLLM and SGLang
#   --kv-cache-dtype, TensorRT-LLM kv_cache_config.dtype; rule_plugin/benchmark/*.rule @095f58a5).
# vLLM 0.12.0 would not take it from the checkpoint on its own (`auto` reads a ModelOpt
# kv_cache_quant_algo only since vLLM PR #30785, 2025-12): the flag is what sets it.
FP8_GEMM = ("fp8", "fp8_block")
KV_SOURCE = (
    "kv fp8: not stated by the row; an FP8 GEMM is deployed with an FP8 KV cache by aiconfigurator "
    "(ai-dynamo/aiconfigurator src/aiconfigurator/sdk/task.py _get_quant_mode @71bb3d00e; "
    "aic-core/src/aiconfigurator_core/sdk/models/helpers.py @095f58a5; generator module_bridge.py "
    "kv_cache_dtype @095f58a5)"
)
_CONC = re.compile(r"silicon_concurrency=(\d+)")
_CONC_ID = re.compile(r"_c(\d+)_")
_DATE = re.compile(r"measured=(\d{4}-\d{2}-\d{2})")


def _int(v: str) -> int:
    """A parallelism cell: "" or "nan" is absent (0), "2.0" is 2."""
    v = (v or "").strip()
    return 0 if v in ("", "nan") else int(float(v))


def _topology(r: dict[str, str]) -> dict[str, int] | str:
    """The row's parallelism columns, or why it cannot be stated in them."""
    if r["mode"] == "agg":
        tp, pp, adp = _int(r["tp_size"]), _int(r["pp_size"]) or 1, _int(r["attention_dp_size"])
        if tp < 1:
            return "no tp_size"
        if adp > 1:
            return "attention-DP > 1 on a dense model (GPUs per engine not stated)"
        return {"tp": tp, "pp": pp, "replicas": 1, "n_gpus": tp * pp}
    if r["mode"] == "disagg":
        pw, ptp, dw, dtp = (
            _int(r[k]) for k in ("prefill_num_workers", "prefill_tp_size", "decode_num_workers", "decode_tp_size")
        )
        ppp, dpp = _int(r["prefill_pp_size"]) or 1, _int(r["decode_pp_size"]) or 1
        if min(pw, ptp, dw, dtp) < 1:
            return "disaggregated row without workers or their TP"
        if ppp != 1 or max(_int(r["prefill_attention_dp_size"]), _int(r["decode_attention_dp_size"])) > 1:
            return "disaggregated row with prefill PP or attention-DP > 1"
        return {
            "tp": dtp,
            "pp": dpp,
            "replicas": 1,
            "prefill_workers": pw,
            "prefill_tp": ptp,
            "decode_workers": dw,
            "n_gpus": pw * ptp + dw * dtp * dpp,
        }
    return f"mode {r['mode']!r}"


def _concurrency(r: dict[str, str]) -> int:
    m = _CONC.search(r["silicon_data_source"]) or _CONC_ID.search(r["id"])
    return int(m.group(1)) if m else 0


def common_fields(r: dict[str, str], src: SourceFile, conc: int, weights: str | None = None) -> dict[str, str | int]:
    """The columns every row of the file fills alike, for this reader and the MoE one
    (published_readers.aiconfigurator_moe): source, date, engine, GPU, the published model name,
    weights, KV, lengths, load, statistic and the two figures. The catalog model, the weights as
    published, the notes and the topology are each reader's own; `weights` is a reader's own reading
    of the weight format where the file's label does not map to one by itself (the MoE reader's FP4)."""
    date = _DATE.search(r["silicon_data_source"])
    return {
        "source_id": SOURCE_ID,
        "source": src.url,
        "date": date.group(1) if date else "undated",
        "engine": ENGINES[r["backend"]],
        "engine_version": r.get("backend_version") or "unstated",
        "gpu": SYSTEMS[r["system"]],
        "gpu_published": r["system"],
        "model_published": r["model_path"],
        "weights": weights or WEIGHTS[r["gemm_quant_mode"]],
        "kv": "fp8" if r["gemm_quant_mode"] in FP8_GEMM else "unstated",
        "prompt_tokens": int(r["isl"]),
        "output_tokens": int(r["osl"]),
        "load": "concurrency",
        "load_value": conc,
        "stat": "unstated",
        "ttft_ms": r["silicon_ttft_ms"],
        "tpot_ms": r["silicon_tpot_ms"],
    }


def read(src: SourceFile) -> ReadResult:
    out = ReadResult()
    rows = list(csv.DictReader(io.StringIO(src.text)))
    need = {
        "id",
        "silicon_data_source",
        "backend",
        "model_path",
        "system",
        "mode",
        "isl",
        "osl",
        "gemm_quant_mode",
        "silicon_ttft_ms",
        "silicon_tpot_ms",
    }
    if rows and (missing := need - set(rows[0])):
        raise ValueError(f"{src.url}: not aiconfigurator's silicon_sample format (no {', '.join(sorted(missing))})")
    kept: dict[tuple, list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        r = {k: (v or "").strip() for k, v in r.items()}
        if r["model_path"] not in MODELS:
            out.skip("model not a dense model of the catalog")
            continue
        if r["system"] not in SYSTEMS:
            out.skip(f"system {r['system']}: no hardware card")
            continue
        if r["gemm_quant_mode"] not in WEIGHTS:
            out.skip(f"weights {r['gemm_quant_mode']}: no weight format")
            continue
        if r["backend"] not in ENGINES:
            out.skip(f"backend {r['backend']}")
            continue
        topo = _topology(r)
        if isinstance(topo, str):
            out.skip(topo)
            continue
        conc = _concurrency(r)
        if conc < 1:
            out.skip("no concurrency stated")
            continue
        quant = r["gemm_quant_mode"]
        row = table_row(
            **common_fields(r, src, conc),
            model=MODELS[r["model_path"]],
            weights_published=(
                f"precision {r.get('precision') or '-'}, gemm_quant_mode {quant}"
                if quant
                else "not stated (precision empty): the checkpoint's BF16"
            ),
            notes=(
                f"silicon_ttft_ms and silicon_tpot_ms as published (mean or median not stated); {r['mode']}; "
                f"id {r['id']}; silicon_data_source: {r['silicon_data_source']}"
                + (f"; {KV_SOURCE}" if quant in FP8_GEMM else "")
            ),
            **{k: str(v) for k, v in topo.items()},
        )
        key = tuple(row[c] for c in row if c not in ("ttft_ms", "tpot_ms", "notes", "date"))
        kept[key].append(row)
    out.rows += deduplicated(kept)
    return out


def deduplicated(kept: dict[tuple, list[dict[str, str]]]) -> list[dict[str, str]]:
    """The rows of each setup (key -> its rows in source order): once where its figures repeat
    exactly (the count in its notes), every time, numbered, where they differ."""
    rows: list[dict[str, str]] = []
    for group in kept.values():
        figures = {(g["ttft_ms"], g["tpot_ms"]) for g in group}
        if len(group) == 1:
            rows.append(group[0])
        elif len(figures) == 1:
            rows.append(
                group[0]
                | {"notes": group[0]["notes"] + f"; the same setup and figures {len(group)} times in the source"}
            )
        else:
            rows += [
                g | {"notes": g["notes"] + f"; repeat {i} of {len(group)} of this setup (figures differ)"}
                for i, g in enumerate(group, 1)
            ]
    return rows
