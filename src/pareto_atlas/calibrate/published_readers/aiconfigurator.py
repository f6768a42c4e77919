"""Reader of aiconfigurator's measured serving points (ai-dynamo/aiconfigurator,
aic-core/src/aiconfigurator_core/systems/silicon_sample.csv, Apache-2.0): one row per point with its
backend and version, model, system, precision, ISL/OSL, per-point TP/PP/attention-DP or the
disaggregated xPyD topology, and the measured `silicon_ttft_ms` and `silicon_tpot_ms`.

What the file does not say, and how the rows carry it:
- the statistic of its TTFT and TPOT (mean or median): stat "unstated";
- the closed loop's client count is in the free-text `silicon_data_source` ("silicon_concurrency=N")
  or the point's id ("_c<N>_"); `batch_size` is not it (it differs from both on some rows);
- the KV cache dtype: kv "unstated"; the weights where `precision` is empty: the checkpoint's
  own (BF16 for these models), said so in weights_published.
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


def common_fields(r: dict[str, str], src: SourceFile, conc: int) -> dict[str, str | int]:
    """The columns every row of the file fills alike, for this reader and the MoE one
    (published_readers.aiconfigurator_moe): source, date, engine, GPU, the published model name,
    weights, KV, lengths, load, statistic and the two figures. The catalog model, the weights as
    published, the notes and the topology are each reader's own."""
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
        "weights": WEIGHTS[r["gemm_quant_mode"]],
        "kv": "unstated",
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
