"""Reader of the mixture-of-experts points of aiconfigurator's silicon_sample.csv (the file the
dense reader, published_readers.aiconfigurator, reads): per point its expert-parallel layout as the
file states it (tp_size, attention_dp_size, moe_tp_size, moe_ep_size), kept as the MoE table's
columns tp, attn_dp and ep (MoE-TP = tp x attn_dp / ep, so it is not stored).

What is left out, and why (each counted in the reader's `skipped`):
- FP4 weights (nvfp4) of a checkpoint released in 16 bits (DeepSeek-R1/V3 on B200): which FP4
  checkpoint and format ran is not stated. The file also says precision fp4 / nvfp4 for
  openai/gpt-oss-120b, on Hopper too, where no W4A4 kernel runs: that checkpoint is released only in
  its own 4-bit format (its config.json: quant_method mxfp4, attention, router, embedding and lm_head
  left BF16; the card's native_format), so those rows read as what was served, MXFP4 (FP4_LABEL).
  So do its five H100-SXM TensorRT-LLM 1.3.0rc1 points labelled precision fp8 (gemm_quant_mode and
  moe_quant_mode fp8): no FP8 checkpoint of it is named, the deployment generator passes TensorRT-LLM
  no weight quantization (generator/config/backend_templates/trtllm/extra_engine_args.1.3.0rc1.yaml.j2
  sets no quantization key; config/backend_config_mapping.yaml maps none), TensorRT-LLM takes the
  format from the checkpoint's quantization_config, and aiconfigurator's own collector allows gpt-oss
  on TensorRT-LLM only w4a16_mxfp4 and w4a8_mxfp4_mxfp8 experts
  (collector/cases/models/GptOssForCausalLM_cases.yaml framework_quantization, all @095f58a5;
  NATIVE_ONLY). Their KV stays FP8: the generator writes the KV dtype the FP8 label chose (KV_SOURCE);
- more GPUs per engine than a node holds (16 or 64: tp x attention-DP across nodes), whose
  inter-node link no hardware card describes;
- layouts where tp x attention-DP differs from MoE-TP x EP (the file's own identity broken, e.g.
  tp 1 with MoE-TP 2): the GPUs the engine held are not stated;
- disaggregated points: the simulator's prefill pool runs without expert parallelism
  (cost_model.prefill_coeffs), so their topology cannot be stated in its knobs;
- closed-loop points that cannot have run as a closed loop at their stated lengths (inconsistent):
  by Little's law a point's clients x decode time / (TTFT + decode time) decode at once (decode time:
  output tokens x TPOT); where that batch is under half its clients (most of them queued) and its TPOT
  is yet below, by more than TPOT_SPREAD, the TPOT of a point of the same setup (card, engine, model,
  weights, layout, lengths) run at fewer clients than that batch, a larger decode batch stepped faster
  than a smaller one. Six of H100-SXM's nine gpt-oss-120b vLLM points at 512 clients (0.11.2 or
  unstated, measured 2025-11/12) are such: ~100 decoding at once (of 512) at the step time of 4-16
  clients, where the same setups at 32-64 clients (0.18.0) step 2-3x slower. Which deployment or reading
  produced them is not stated (the rows' batch_size says 512).
The rest is as the dense reader does: TTFT/TPOT with statistic "unstated", the closed loop's
clients from silicon_data_source or the id, repeats kept once where equal and numbered where not.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict

from pareto_atlas.calibrate.published_readers import ReadResult, SourceFile, table_row
from pareto_atlas.spec.fp4 import FP4
from pareto_atlas.calibrate.published_readers.aiconfigurator import (
    ENGINES,
    FP8_GEMM,
    KV_SOURCE,
    SOURCE_ID as SOURCE_ID,  # its rows cite the same source; callers read it here
    SYSTEMS,
    WEIGHTS,
    _concurrency,
    _int,
    common_fields,
    deduplicated,
)

# The file's MoE checkpoints -> the catalog's MoE cards (spec/models.toml). DeepSeek-R1 is trained from
# DeepSeek-V3-Base and ships the same architecture (DeepseekV3ForCausalLM, the same config.json
# dimensions), so both read the deepseek-v3 card; model_published keeps which checkpoint it was, and
# leaving the card out leaves both out.
MODELS = {
    "openai/gpt-oss-120b": "gpt-oss-120b",
    "Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b",
    "deepseek-ai/DeepSeek-R1": "deepseek-v3",
    "deepseek-ai/DeepSeek-V3": "deepseek-v3",
}
NODE_GPUS = 8  # GPUs of one node of the file's systems (HGX H100/H200/B200)
# the file's FP4 label (gemm_quant_mode) on a checkpoint that ships only in its own 4-bit format: the
# engine served that checkpoint, so the row's weights are the card's native_format (gpt-oss: MXFP4)
FP4_LABEL = "nvfp4"
# checkpoints the file names that ship only in their own quantized format (the card's native_format):
# whatever the file's label (fp4 / nvfp4, fp8), the engine served that format (see the module's docstring)
NATIVE_ONLY = ("openai/gpt-oss-120b",)


def _weights(r: dict[str, str]) -> str | None:
    """The catalog weight format the row ran, or None where it is not stated."""
    from pareto_atlas.spec.cards import shipped_models

    quant = r["gemm_quant_mode"]
    native = shipped_models()[MODELS[r["model_path"]]].native_format
    if r["model_path"] in NATIVE_ONLY and native:
        return native
    if quant == FP4_LABEL:
        return native if native in FP4 else None
    return WEIGHTS.get(quant)


def _layout(r: dict[str, str]) -> dict[str, int] | str:
    """The row's tp, attn_dp, ep and GPUs, or why they cannot be stated."""
    if r["mode"] != "agg":
        return "disaggregated MoE point (the simulated prefill pool has no expert parallelism)"
    tp, adp = _int(r["tp_size"]), _int(r["attention_dp_size"]) or 1
    mtp, ep, pp = _int(r["moe_tp_size"]) or 1, _int(r["moe_ep_size"]) or 1, _int(r["pp_size"]) or 1
    if tp < 1:
        return "no tp_size"
    if tp * adp != mtp * ep:
        return "tp x attention-DP differs from MoE-TP x EP (GPUs held not stated)"
    if tp * adp * pp > NODE_GPUS:
        return f"more than {NODE_GPUS} GPUs per engine (multi-node: no card for the link between nodes)"
    return {"tp": tp, "pp": pp, "attn_dp": adp, "ep": ep, "n_gpus": tp * adp * pp}


def read(src: SourceFile) -> ReadResult:
    """The file's aggregated MoE points on the catalog's GPU cards and weight formats."""
    out = ReadResult()
    kept: dict[tuple, list[dict[str, str]]] = defaultdict(list)
    for r in csv.DictReader(io.StringIO(src.text)):
        r = {k: (v or "").strip() for k, v in r.items()}
        if r["model_path"] not in MODELS:
            out.skip("not an MoE model with a catalog card")
            continue
        quant = r["gemm_quant_mode"]
        why = (
            f"system {r['system']}: no hardware card"
            if r["system"] not in SYSTEMS
            else f"weights {quant}: not mapped to a catalog weight format (FP4 of a 16-bit checkpoint: format not stated)"
            if _weights(r) is None
            else f"backend {r['backend']}"
            if r["backend"] not in ENGINES
            else ""
        )
        layout = _layout(r) if not why else why
        if isinstance(layout, str):
            out.skip(layout)
            continue
        conc = _concurrency(r)
        if conc < 1:
            out.skip("no concurrency stated")
            continue
        row = table_row(
            # common_fields maps the dense formats only: the weights are this reader's (_weights);
            # the KV follows the file's own GEMM label there (an FP8 GEMM deploys an FP8 KV cache)
            **common_fields(r, src, conc, weights=_weights(r)),
            model=MODELS[r["model_path"]],
            weights_published=(
                f"precision {r.get('precision') or '-'}, gemm_quant_mode {quant}, moe_quant_mode "
                f"{r.get('moe_quant_mode') or '-'}"
                if quant
                else "not stated (precision empty): the checkpoint's BF16"
            ),
            notes=(
                f"silicon_ttft_ms and silicon_tpot_ms as published (mean or median not stated); agg; "
                f"tp_size {r['tp_size']}, attention_dp_size {r['attention_dp_size'] or '-'}, moe_tp_size "
                f"{r['moe_tp_size']}, moe_ep_size {r['moe_ep_size']}; id {r['id']}; "
                f"silicon_data_source: {r['silicon_data_source']}" + (f"; {KV_SOURCE}" if quant in FP8_GEMM else "")
            ),
            tp=layout["tp"],
            pp=layout["pp"],
            n_gpus=layout["n_gpus"],
        ) | {"ep": str(layout["ep"]), "attn_dp": str(layout["attn_dp"])}
        key = tuple(row[c] for c in row if c not in ("ttft_ms", "tpot_ms", "notes", "date"))
        kept[key].append(row)
    rows = deduplicated(kept)
    bad = inconsistent(rows)
    for _ in bad:
        out.skip(INCONSISTENT)
    out.rows += [r for i, r in enumerate(rows) if i not in bad]
    return out


# Repeats of one setup measured in different sessions differ by up to ~10 % in TPOT at equal clients
# (the file's own numbered repeats): a point is called inconsistent only beyond that.
TPOT_SPREAD = 0.1
QUEUED = 0.5  # the implied decode batch under this share of the clients: most clients queued
INCONSISTENT = (
    "inconsistent closed loop: most clients queued (Little's law), yet TPOT below that of the same setup "
    "at fewer clients than its implied decode batch"
)
SETUP = ("gpu", "engine", "model", "weights", "tp", "ep", "attn_dp", "prompt_tokens", "output_tokens")


def inconsistent(rows: list[dict[str, str]]) -> set[int]:
    """Indices of closed-loop rows that cannot have run as one at their stated lengths (see the module's
    docstring): the decode batch their own TTFT and TPOT imply is under QUEUED of their clients, and a
    row of the same SETUP at fewer clients than that batch has a TPOT over (1 + TPOT_SPREAD) x theirs."""
    out = set()
    for i, r in enumerate(rows):
        if r["load"] != "concurrency" or not r["ttft_ms"] or not r["tpot_ms"]:
            continue
        clients, ttft, tpot = float(r["load_value"]), float(r["ttft_ms"]), float(r["tpot_ms"])
        decode = float(r["output_tokens"]) * tpot
        batch = clients * decode / (ttft + decode)
        if batch >= QUEUED * clients:
            continue
        if any(
            q["load"] == "concurrency"
            and q["tpot_ms"]
            and all(q[c] == r[c] for c in SETUP)
            and float(q["load_value"]) < batch
            and float(q["tpot_ms"]) > (1 + TPOT_SPREAD) * tpot
            for q in rows
        ):
            out.add(i)
    return out
