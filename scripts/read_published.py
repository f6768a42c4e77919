"""Write spec/published_multigpu.csv: the published multi-GPU measurements, read by the readers in
calibrate/published_readers from the files their publishers ship, each row citing repository, path
and commit.

    python scripts/read_published.py --aiconfigurator-git DIR [--trtllm-git DIR | --raw DIR] [--out CSV]
    python scripts/read_published.py --moe --aiconfigurator-git DIR [--trtllm-git DIR | --raw DIR |
        --trtllm-moe-from-table] [--out CSV]

    python scripts/read_published.py --mlperf [--raw DIR] [--out CSV]
    python scripts/read_published.py --moe-ops --aiconfigurator-git DIR [--out CSV]
    python scripts/read_published.py --gemm-ops --aiconfigurator-git DIR [--out CSV]
    python scripts/read_published.py --allreduce-ops --aiconfigurator-git DIR [--out CSV]

--moe-ops writes spec/published_moe_ops.csv (published_readers.aiconfigurator_moe_ops): aiconfigurator's
measured MoE layer times (moe_perf.parquet at AIC_OPS_COMMIT) for the (card, engine, release, formats) of
MOE_OPS and the shapes of the shipped MoE cards; simulate.moe_law fits each (card, engine, format)'s layer
law on them. Never read at run time from the repository: the shipped table is what the product reads.

--gemm-ops writes spec/published_gemm_ops.csv (published_readers.aiconfigurator_gemm_ops): aiconfigurator's
measured linear-layer times at a decode step's sizes (gemm_perf.parquet at AIC_OPS_COMMIT) for the (card,
engine, release, formats) of GEMM_OPS; simulate.gemm_floor fits each (card, engine, format)'s fixed cost a
call on them. Never read at run time from the repository.

--allreduce-ops writes spec/published_allreduce_ops.csv (published_readers.aiconfigurator_allreduce_ops):
aiconfigurator's measured all-reduce times of each engine's own kernel at decode-sized messages
(custom_allreduce_perf.parquet at AIC_OPS_COMMIT) for the (card, engine, release) of ALLREDUCE_OPS;
calibrate.published_link prices the collective of an engine its link fit has no row of by them.

--mlperf writes spec/published_mlperf.csv (published_readers.mlperf): MLPerf Inference v4.1 runs,
from the summary and system files saved under RAW (default tests/data/mlperf), each row citing the
summary and system files, with the setup the submission's code states (SETUPS) and the dataset's
lengths (DATASETS). The fits never read it: held-out evidence (benchmarks/bench_mlperf_heldout.py).

--moe writes spec/published_moe.csv instead: the mixture-of-experts points of aiconfigurator's file
(published_readers.aiconfigurator_moe) and of TensorRT-LLM's perf-overview at the same two commits
(published_readers.trtllm_perf_moe: offline throughput of Mixtral 8x7B and Qwen3-30B-A3B), each with
its expert layout (ep, attn_dp).

Sources (each file is read at the commit named here; a snapshot of the repository must hold it):
- ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/systems/silicon_sample.csv: read from a
  git directory of the repository (`git show <commit>:<path>`), at the last commit that changed it.
- NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md at two releases' commits (v0.17 and
  v1.0 layouts): from a git directory of the repository when given, else from
  RAW/NVIDIA+TensorRT-LLM/<commit>/<path> (the file's text, or the verbatim part of it that holds
  the tables: the throughput table, the $num_requests table and the online-serving table).
Rows already in spec/published_anchors.csv (the same document, GPU, model, weights, lengths and
load) are left out: one source of truth per fact.
"""

from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from pareto_atlas.calibrate.published_moe_table import HEADER as MOE_HEADER
from pareto_atlas.calibrate.published_moe_table import SHIPPED_MOE, moe_row_error
from pareto_atlas.calibrate.published_readers import (
    ReadResult,
    SourceFile,
    aiconfigurator,
    aiconfigurator_allreduce_ops,
    aiconfigurator_gemm_ops,
    aiconfigurator_moe,
    aiconfigurator_moe_ops,
    mlperf,
    trtllm_perf,
    trtllm_perf_moe,
)
from pareto_atlas.calibrate.published_table import COLUMNS, PARALLEL, SHIPPED_MULTIGPU, read_table, row_error

AIC = ("ai-dynamo/aiconfigurator", "aic-core/src/aiconfigurator_core/systems/silicon_sample.csv")
TRT_PATH = "docs/source/performance/perf-overview.md"
# (commit, source_id, release printed nowhere in the v1.0 layout)
TRT = (
    ("258c7540c03517def55d9a5aadfa9288af474e1b", "trtllm-perf-overview-v0.17", "unstated"),
    ("00f37686aa854010d68bcbd0f4ab000221541ca6", "trtllm-perf-overview-v1.0", "1.0 (PyTorch backend, trtllm-bench)"),
)
KEY = ("source", "gpu", "model", "weights", "prompt_tokens", "output_tokens", "load", "load_value")
SPEC = Path(__file__).resolve().parents[1] / "src" / "pareto_atlas" / "spec"
MLPERF_RAW = Path(__file__).resolve().parents[1] / "tests" / "data" / "mlperf"
# MLPerf Inference v4.1 (mlcommons/inference_results_v4.1 at MLPERF_COMMIT): the runs read, as
# (submitter, system, benchmark, scenario). Published August 2024 (the round's results pages,
# closed/NVIDIA/results/B200-SXM-180GBx1_TRT/README.md: "MLPerf Inference v4.1 ... August 2024").
MLPERF_REPO, MLPERF_COMMIT, MLPERF_ID, MLPERF_DATE = (
    "mlcommons/inference_results_v4.1",
    "a2f5d66d17e8f75c02fd74dfe810ecca6a046696",
    "mlperf-inference-v4.1",
    "2024-08",
)
MLPERF_RUNS = (
    ("NVIDIA", "B200-SXM-180GBx1_TRT", "llama2-70b-99", "Offline"),
    ("NVIDIA", "B200-SXM-180GBx1_TRT", "llama2-70b-99.9", "Server"),
    ("NVIDIA", "H200-SXM-141GBx8_TRT", "llama2-70b-99", "Offline"),
    ("NVIDIA", "H200-SXM-141GBx8_TRT", "llama2-70b-99", "Server"),
    ("NVIDIA", "DGX-H100_H100-SXM-80GBx8_TRT", "llama2-70b-99.9", "Offline"),
    ("NVIDIA", "DGX-H100_H100-SXM-80GBx8_TRT", "llama2-70b-99.9", "Server"),
    ("AMD", "1xMI300X_2xEPYC-9374F", "llama2-70b-99.9", "Offline"),
    ("AMD", "1xMI300X_2xEPYC-9374F", "llama2-70b-99.9", "Server"),
    # a mixture of experts, held out on the MoE fit (benchmarks/bench_mlperf_heldout.py applies it)
    ("NVIDIA", "H200-SXM-141GBx8_TRT", "mixtral-8x7b", "Offline"),
    ("NVIDIA", "H200-SXM-141GBx8_TRT", "mixtral-8x7b", "Server"),
    ("NVIDIA", "DGX-H100_H100-SXM-80GBx8_TRT", "mixtral-8x7b", "Offline"),
    ("NVIDIA", "DGX-H100_H100-SXM-80GBx8_TRT", "mixtral-8x7b", "Server"),
)
_NV_CFG = f"{MLPERF_REPO} closed/NVIDIA/configs/llama2-70b/{{Offline,Server}}/__init__.py @{MLPERF_COMMIT[:8]}"
# What the summaries and system files do not state, as the submission's code states it. The B200 run
# is a preview on private code (its system file's sw_notes): its precision and parallelism are in no
# file read, so it has no setup and its rows are left out. Keyed by (submitter, system, benchmark family):
# one system runs each benchmark in its own layout.
_NV_MIX = f"{MLPERF_REPO} closed/NVIDIA/configs/mixtral-8x7b/{{Offline,Server}}/__init__.py @{MLPERF_COMMIT[:8]}"


def _nvidia_trt_fp8(tp: int, cited: str) -> mlperf.Setup:
    """NVIDIA's closed submissions: TensorRT-LLM, FP8 weights (precision fp16 with use_fp8), KV dtype unstated,
    no pipeline parallelism; `tp` and what states it differ per system and benchmark."""
    return mlperf.Setup(
        engine="trtllm",
        weights="FP8",
        weights_published="precision fp16, use_fp8 True",
        kv="unstated",
        tp=tp,
        pp=1,
        cited=cited,
    )


MLPERF_SETUPS = {
    ("NVIDIA", "DGX-H100_H100-SXM-80GBx8_TRT", "llama2-70b"): _nvidia_trt_fp8(
        tp=2,
        cited=f"{_NV_CFG}: H100_SXM_80GB_TP2x4_HighAccuracy <- H100_SXM_80GB_TP2x4 <- H100_SXM_80GB_TP2x1 "
        "(use_fp8 = True, tensor_parallelism = 2; pipeline_parallelism = 1 from the scenario's base config)",
    ),
    ("NVIDIA", "H200-SXM-141GBx8_TRT", "llama2-70b"): _nvidia_trt_fp8(
        tp=1,
        cited=f"{_NV_CFG}: H200_SXM_141GBx8 <- H200_SXM_141GBx1 (use_fp8 = True, tensor_parallelism = 1; "
        "pipeline_parallelism = 1 from the scenario's base config)",
    ),
    ("AMD", "1xMI300X_2xEPYC-9374F", "llama2-70b"): mlperf.Setup(
        engine="vllm",
        weights="FP8",
        weights_published="test_VllmFp8",
        kv="unstated",
        tp=1,
        pp=1,
        cited=f"{MLPERF_REPO} closed/AMD/measurements/1xMI300X_2xEPYC-9374F/llama2-70b-99/Server/README.md "
        f"@{MLPERF_COMMIT[:8]} (scripts in code/llama2-70b-99.9/test_VllmFp8); one accelerator",
    ),
    ("NVIDIA", "DGX-H100_H100-SXM-80GBx8_TRT", "mixtral-8x7b"): _nvidia_trt_fp8(
        tp=1,
        cited=f"{_NV_MIX}: H100_SXM_80GBx8 <- H100_SXM_80GBx1 (use_fp8 = True, tensor_parallelism = 1; "
        "pipeline_parallelism = 1 from the scenario's base config; no expert parallelism is configured)",
    ),
    ("NVIDIA", "H200-SXM-141GBx8_TRT", "mixtral-8x7b"): _nvidia_trt_fp8(
        tp=1,
        cited=f"{_NV_MIX}: H200_SXM_141GBx8 <- H200_SXM_141GBx1 (use_fp8 = True, tensor_parallelism = 1; "
        "pipeline_parallelism = 1 from the scenario's base config; no expert parallelism is configured)",
    ),
}


# aiconfigurator's MoE operator tables read (--moe-ops), at one commit: per (card folder, engine, release)
# the weight formats (moe_dtype) the published MoE rows ran as, at the oldest release aiconfigurator measured
# the format in for that card and engine (the published rows ran older or equal releases: TensorRT-LLM
# 1.0-1.2.0rc6, vLLM 0.12-0.18, SGLang 0.5.6-0.5.9; spec/published_moe.csv). Hopper runs MXFP4 experts as
# BF16 x MXFP4 (w4a16_mxfp4: Triton), Blackwell's TensorRT-LLM as MXFP8 x MXFP4 (w4a8_mxfp4_mxfp8), first in
# 1.3.0rc10 (NVIDIA/TensorRT-LLM docs/source/deployment-guide/deployment-guide-for-gpt-oss-on-trtllm.md
# @d2c804bc, "MoE Backend Support Matrix"); FP8 checkpoints of DeepSeek-V3 and Qwen3 are block-scaled
# (fp8_block), Mixtral's FP8 (TensorRT-LLM 0.17's perf-overview rows) per tensor (fp8: simulate.moe_law.FP8_BLOCK).
# SGLang 0.5.6.post2's H200 table holds these shapes' fp8_block only under power-law routing,
# so H200's SGLang rows read 0.5.9 (the release its DeepSeek-V3 rows ran). H100's vLLM tables hold gpt-oss's
# shape only from 0.24.0 (w4a16_mxfp4, kernel_source vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic:
# OpenAI's Triton MoE kernels, the backend vLLM picks for MXFP4 on SM90 without a FlashInfer opt-in,
# vllm-project/vllm vllm/model_executor/layers/quantization/mxfp4.py @007d5005 get_mxfp4_backend), newer than the
# rows' 0.18.0 and 0.11.2: the one H100 vLLM measurement of that layer. Not read: B200 vLLM's w4a16_mxfp4
# (vllm_mxfp4_moe) table, which is not the FlashInfer path vLLM serves MXFP4 with on SM100 by default (the same
# get_mxfp4_backend).
AIC_OPS_COMMIT = "095f58a5"
MOE_OPS = (
    ("h100_sxm", "trtllm", "1.2.0rc5", ("w4a16_mxfp4", "fp8_block", "fp8")),
    ("h200_sxm", "trtllm", "1.2.0rc5", ("w4a16_mxfp4", "fp8_block", "fp8")),
    ("h100_sxm", "vllm", "0.24.0", ("w4a16_mxfp4",)),
    ("b200_sxm", "trtllm", "1.2.0rc5", ("fp8_block",)),
    ("b200_sxm", "trtllm", "1.3.0rc10", ("w4a8_mxfp4_mxfp8",)),
    ("h200_sxm", "vllm", "0.18.0", ("w4a16_mxfp4", "fp8_block")),
    ("h200_sxm", "sglang", "0.5.9", ("fp8_block",)),
    ("b200_sxm", "sglang", "0.5.9", ("fp8_block",)),
)


# aiconfigurator's GEMM tables read (--gemm-ops), at AIC_OPS_COMMIT: per (card folder, engine, release) the
# formats the published dense rows of that card and engine ran (spec/published_multigpu.csv: BF16 and FP8
# "gemm_quant_mode fp8", per-tensor), at the oldest release aiconfigurator measured for that card and engine
# (the rows ran TensorRT-LLM 1.0.0rc3 and vLLM 0.12.0 or unstated releases). Hopper only: the cards the
# published multi-GPU dense rows held out are on. Not read: SGLang's (its H200 rows state fp8_block, a
# format the product does not tell from per-tensor FP8), B200's, and H200 vLLM's: its 0.14.0 folder's rows
# state another release (0.14.1.dev1+gd68209402), which the reader leaves out, and the next folder (0.18.0)
# is six releases past the rows'.
GEMM_OPS = (
    ("h100_sxm", "trtllm", "1.2.0rc5", ("bfloat16", "fp8")),
    ("h100_sxm", "vllm", "0.14.0", ("bfloat16", "fp8")),
    ("h200_sxm", "trtllm", "1.2.0rc5", ("bfloat16", "fp8")),
)


# aiconfigurator's all-reduce tables read (--allreduce-ops), at AIC_OPS_COMMIT: per (card folder, engine,
# release) the engine's own all-reduce at the oldest release measured (the rows ran TensorRT-LLM 1.0.0rc3 and
# vLLM 0.12.0 or unstated releases). Not read: SGLang's folders (they hold TensorRT-LLM's rows: framework
# TRTLLM 1.2.0rc5), H200 vLLM's 0.14.0 (its rows state 0.14.1.dev1+gd68209402, which the reader leaves out):
# H200's vLLM is read at 0.18.0, the oldest release whose rows state the folder's release.
ALLREDUCE_OPS = (
    ("h100_sxm", "trtllm", "1.2.0rc5"),
    ("h100_sxm", "vllm", "0.14.0"),
    ("h200_sxm", "trtllm", "1.2.0rc5"),
    ("h200_sxm", "vllm", "0.18.0"),
)


def write_allreduce_ops(git_dir: Path, out: Path) -> int:
    """The all-reduce operator table: each file of ALLREDUCE_OPS read at AIC_OPS_COMMIT, its small messages."""
    commit = _git(git_dir, "rev-parse", AIC_OPS_COMMIT).strip()
    rows = []
    for card, engine, release in ALLREDUCE_OPS:
        path = aiconfigurator_allreduce_ops.PATH.format(card=card, engine=engine, release=release)
        data = subprocess.run(
            ["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"], check=True, capture_output=True
        ).stdout
        res = aiconfigurator_allreduce_ops.read(aiconfigurator_allreduce_ops.OpsFile(AIC[0], path, commit, data))
        print(f"{card}/{engine}/{release}: {len(res.rows)} rows")
        print_left_out(res)
        rows += res.rows
    for i, r in enumerate(rows):
        if err := aiconfigurator_allreduce_ops.row_error(r):
            sys.exit(f"row {i} ({r['gpu']}, {r['engine']}, {r['version']}): {err}")
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=aiconfigurator_allreduce_ops.HEADER, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"{out}: {len(rows)} rows")
    return 0


def write_gemm_ops(git_dir: Path, out: Path) -> int:
    """The GEMM operator table: each file of GEMM_OPS read at AIC_OPS_COMMIT, its rows at decode sizes."""
    commit = _git(git_dir, "rev-parse", AIC_OPS_COMMIT).strip()
    rows = []
    for card, engine, release, dtypes in GEMM_OPS:
        path = aiconfigurator_gemm_ops.PATH.format(card=card, engine=engine, release=release)
        data = subprocess.run(
            ["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"], check=True, capture_output=True
        ).stdout
        res = aiconfigurator_gemm_ops.read(aiconfigurator_gemm_ops.OpsFile(AIC[0], path, commit, data), set(dtypes))
        print(f"{card}/{engine}/{release}: {len(res.rows)} rows")
        print_left_out(res)
        rows += res.rows
    for i, r in enumerate(rows):
        if err := aiconfigurator_gemm_ops.row_error(r):
            sys.exit(f"row {i} ({r['gpu']}, {r['engine']}, {r['version']}): {err}")
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=aiconfigurator_gemm_ops.HEADER, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"{out}: {len(rows)} rows")
    return 0


def moe_shapes() -> set[tuple[int, int, int, int]]:
    """(hidden_size, inter_size, num_experts, topk) of each shipped MoE card."""
    from pareto_atlas.spec.cards import shipped_models

    return {
        (m.hidden, m.expert_intermediate, m.n_experts, m.experts_per_token)
        for m in shipped_models().values()
        if m.is_moe
    }


def write_moe_ops(git_dir: Path, out: Path) -> int:
    """The MoE operator table: each file of MOE_OPS read at AIC_OPS_COMMIT, its rows of the shipped shapes."""
    commit = _git(git_dir, "rev-parse", AIC_OPS_COMMIT).strip()
    rows, shapes = [], moe_shapes()
    for card, engine, release, dtypes in MOE_OPS:
        path = aiconfigurator_moe_ops.PATH.format(card=card, engine=engine, release=release)
        data = subprocess.run(
            ["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"], check=True, capture_output=True
        ).stdout
        res = aiconfigurator_moe_ops.read(
            aiconfigurator_moe_ops.OpsFile(AIC[0], path, commit, data), shapes, set(dtypes)
        )
        print(f"{card}/{engine}/{release}: {len(res.rows)} rows")
        print_left_out(res)
        rows += res.rows
    for i, r in enumerate(rows):
        if err := aiconfigurator_moe_ops.row_error(r):
            sys.exit(f"row {i} ({r['gpu']}, {r['engine']}, {r['version']}): {err}")
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=aiconfigurator_moe_ops.HEADER, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"{out}: {len(rows)} rows")
    return 0


def mlperf_setup(submitter: str, system: str, benchmark: str) -> mlperf.Setup | None:
    """The setup a system ran a benchmark with ("llama2-70b-99.9" is the llama2-70b family's)."""
    return MLPERF_SETUPS.get((submitter, system, benchmark.split("-99")[0]))


# The llama2-70b dataset's input cap, read from the reference implementation's README (the verbatim part
# saved under RAW that holds its processing command): no file read states the mean input length.
MLPERF_REFERENCE = ("mlcommons/inference", "00bf834669d3e343cda9f9c50da453aa2c067973", "language/llama2-70b/README.md")
# The Mixtral dataset's input cap (15,000 prompts of OpenOrca, GSM8K and MBXP: mlcommons/inference
# language/mixtral-8x7b/README.md states neither their mean nor a cap): NVIDIA's preprocessing pads each
# prompt to it and asserts it holds (the verbatim lines saved under RAW that define it).
MIXTRAL_CAP = "closed/NVIDIA/code/mixtral-8x7b/tensorrt/preprocess_data.py"


def mlperf_datasets(raw: Path) -> dict[str, mlperf.Dataset]:
    repo, commit, path = MLPERF_REFERENCE
    f = raw / repo.replace("/", "+") / commit / path
    m = re.search(r"processorca\.py .*--seqlen_limit=(\d+)", f.read_text()) if f.is_file() else None
    if not m:
        sys.exit(f"{f}: no processorca.py --seqlen_limit line; save {repo}'s {path} at {commit} there")
    basis = (
        f"{m.group(1)}, OpenOrca's input cap (processorca.py --seqlen_limit={m.group(1)}, {repo} {path} "
        f"@{commit[:8]}), not its mean: no file read states the mean input length"
    )
    card = mlperf.Dataset("llama-2-70b", "Llama-2-70b-chat-hf", int(m.group(1)), basis)
    out = {"llama2-70b-99": card, "llama2-70b-99.9": card}
    repo, path = MLPERF_REPO, MIXTRAL_CAP
    f = raw / repo.replace("/", "+") / MLPERF_COMMIT / path
    m = re.search(r"^G_MAX_INPUT_TOK_LEN = (\d+)$", f.read_text(), re.M) if f.is_file() else None
    if not m:
        sys.exit(f"{f}: no G_MAX_INPUT_TOK_LEN line; save {repo}'s {path} at {MLPERF_COMMIT} there")
    basis = (
        f"{m.group(1)}, the input cap NVIDIA's preprocessing pads every prompt to (G_MAX_INPUT_TOK_LEN, {repo} "
        f"{path} @{MLPERF_COMMIT[:8]}), not its mean: no file read states the mean input length"
    )
    out["mixtral-8x7b"] = mlperf.Dataset("mixtral-8x7b", "Mixtral-8x7B-Instruct-v0.1", int(m.group(1)), basis)
    return out


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True, text=True).stdout


def aiconfigurator_file(git_dir: Path) -> SourceFile:
    commit = _git(git_dir, "log", "-1", "--format=%H", "HEAD", "--", AIC[1]).strip()
    if not commit:
        sys.exit(f"{git_dir}: no {AIC[1]} in its history")
    return SourceFile(AIC[0], AIC[1], commit, _git(git_dir, "show", f"{commit}:{AIC[1]}"))


def trtllm_file(commit: str, git_dir: Path | None, raw: Path) -> SourceFile:
    repo = "NVIDIA/TensorRT-LLM"
    if git_dir:
        return SourceFile(repo, TRT_PATH, commit, _git(git_dir, "show", f"{commit}:{TRT_PATH}"))
    f = raw / repo.replace("/", "+") / commit / TRT_PATH
    if not f.is_file():
        sys.exit(f"{f}: missing; give --trtllm-git or save the file at {commit} there")
    return SourceFile(repo, TRT_PATH, commit, f.read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--aiconfigurator-git", type=Path, help="git directory of ai-dynamo/aiconfigurator")
    ap.add_argument("--trtllm-git", type=Path, help="git directory of NVIDIA/TensorRT-LLM")
    ap.add_argument(
        "--raw", type=Path, default=Path(".published_raw"), help="saved files, RAW/<owner+name>/<commit>/<path>"
    )
    ap.add_argument("--out", type=Path, help=f"default: spec/{SHIPPED_MULTIGPU} (spec/{SHIPPED_MOE} with --moe)")
    ap.add_argument("--moe", action="store_true", help=f"write the MoE table (spec/{SHIPPED_MOE})")
    ap.add_argument(
        "--trtllm-moe-from-table",
        action="store_true",
        help="with --moe: keep TensorRT-LLM's MoE rows as the shipped table holds them (read from the same "
        "commits by an earlier run), where neither its git directory nor the saved files are on this machine",
    )
    ap.add_argument("--mlperf", action="store_true", help=f"write MLPerf's table (spec/{mlperf.SHIPPED})")
    ap.add_argument(
        "--moe-ops",
        action="store_true",
        help=f"write aiconfigurator's MoE operator table (spec/{aiconfigurator_moe_ops.SHIPPED})",
    )
    ap.add_argument(
        "--gemm-ops",
        action="store_true",
        help=f"write aiconfigurator's GEMM operator table (spec/{aiconfigurator_gemm_ops.SHIPPED})",
    )
    ap.add_argument(
        "--allreduce-ops",
        action="store_true",
        help=f"write aiconfigurator's all-reduce operator table (spec/{aiconfigurator_allreduce_ops.SHIPPED})",
    )
    a = ap.parse_args(argv)
    if a.mlperf:
        return write_mlperf(a.raw if a.raw != Path(".published_raw") else MLPERF_RAW, a.out or SPEC / mlperf.SHIPPED)
    if a.aiconfigurator_git is None:
        ap.error("--aiconfigurator-git is required (except with --mlperf)")
    if a.allreduce_ops:
        return write_allreduce_ops(a.aiconfigurator_git, a.out or SPEC / aiconfigurator_allreduce_ops.SHIPPED)
    if a.gemm_ops:
        return write_gemm_ops(a.aiconfigurator_git, a.out or SPEC / aiconfigurator_gemm_ops.SHIPPED)
    if a.moe_ops:
        return write_moe_ops(a.aiconfigurator_git, a.out or SPEC / aiconfigurator_moe_ops.SHIPPED)
    if a.moe:
        if a.trtllm_moe_from_table:
            from pareto_atlas.calibrate.published_moe_table import read_moe_table

            sids = {sid for _, sid, _ in TRT}
            kept = [{c: r[c] for c in MOE_HEADER} for r in read_moe_table() if r["source_id"] in sids]
            print(f"TensorRT-LLM MoE: {len(kept)} rows kept from spec/{SHIPPED_MOE}")
            return write_moe(aiconfigurator_file(a.aiconfigurator_git), [], a.out or SPEC / SHIPPED_MOE, kept)
        trt = [(trtllm_file(c, a.trtllm_git, a.raw), sid, v) for c, sid, v in TRT]
        return write_moe(aiconfigurator_file(a.aiconfigurator_git), trt, a.out or SPEC / SHIPPED_MOE)
    a.out = a.out or SPEC / SHIPPED_MULTIGPU
    results: list[tuple[str, ReadResult]] = [
        ("aiconfigurator", aiconfigurator.read(aiconfigurator_file(a.aiconfigurator_git)))
    ]
    for commit, sid, version in TRT:
        results.append((sid, trtllm_perf.read(trtllm_file(commit, a.trtllm_git, a.raw), sid, version)))
    known = {tuple(r[k] for k in KEY) for r in read_table()}
    rows = []
    for name, res in results:
        fresh = [r for r in res.rows if tuple(r[k] for k in KEY) not in known]
        print(f"{name}: {len(fresh)} rows ({len(res.rows) - len(fresh)} already in the one-GPU table)")
        print_left_out(res)
        rows += fresh
    return write_table(
        rows,
        a.out,
        list(COLUMNS[:-1]) + list(PARALLEL) + ["notes"],
        row_error,
        key=lambda r: (
            r["source_id"],
            r["model"],
            r["gpu"],
            r["engine"],
            r["weights"],
            int(r["n_gpus"]),
            int(r["tp"]),
            int(r["prompt_tokens"]),
            int(r["output_tokens"]),
            r["load"],
            float(r["load_value"]),
        ),
    )


def mlperf_file(raw: Path, path: str) -> SourceFile:
    f = raw / MLPERF_REPO.replace("/", "+") / MLPERF_COMMIT / path
    if not f.is_file():
        sys.exit(f"{f}: missing; save {MLPERF_REPO}'s {path} at {MLPERF_COMMIT} there")
    return SourceFile(MLPERF_REPO, path, MLPERF_COMMIT, f.read_text())


def write_mlperf(raw: Path, out: Path) -> int:
    """MLPerf's table: each run of MLPERF_RUNS read from its saved summary and system files."""
    rows, datasets = [], mlperf_datasets(raw)
    for sub, system, bench, scen in MLPERF_RUNS:
        summary = f"closed/{sub}/results/{system}/{bench}/{scen}/performance/run_1/{mlperf.SUMMARY}"
        res = mlperf.read(
            mlperf_file(raw, summary),
            mlperf_file(raw, f"closed/{sub}/systems/{system}.json"),
            MLPERF_ID,
            MLPERF_DATE,
            mlperf_setup(sub, system, bench),
            datasets.get(bench),
        )
        print(f"{system} {bench} {scen}: {len(res.rows)} rows")
        print_left_out(res)
        rows += res.rows
    return write_table(
        rows,
        out,
        list(COLUMNS[:-1]) + list(PARALLEL) + ["notes"],
        row_error,
        key=lambda r: (r["gpu"], r["engine"], r["model_published"], r["load"], r["stat"]),
    )


def print_left_out(res: ReadResult) -> None:
    """What the reader left out, one line per reason with its count."""
    for reason, n in sorted(res.skipped.items()):
        print(f"    left out {n}: {reason}")


def write_table(
    rows: list[dict[str, str]],
    out: Path,
    header: list[str],
    error: Callable[[dict[str, str]], str],
    key: Callable[[dict[str, str]], tuple],
) -> int:
    """Validate every row (exit naming the first bad one, in read order), sort by key, write the
    header's columns."""
    for i, r in enumerate(rows):
        if err := error(r):
            sys.exit(f"row {i} ({r['source_id']}, {r['model']}, {r['gpu']}): {err}")
    rows = sorted(rows, key=key)
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header, lineterminator="\n")
        w.writeheader()
        w.writerows({c: r[c] for c in header} for r in rows)
    print(f"{out}: {len(rows)} rows")
    return 0


def write_moe(
    src: SourceFile, trt: list[tuple[SourceFile, str, str]], out: Path, kept: list[dict[str, str]] = ()
) -> int:
    """The MoE table: aiconfigurator's MoE points and TensorRT-LLM's MoE rows (each perf-overview file
    with its source id and release, or `kept` as an earlier run read them), validated, sorted, written."""
    results = [("aiconfigurator MoE", aiconfigurator_moe.read(src))]
    results += [(f"{sid} MoE", trtllm_perf_moe.read(f, sid, v)) for f, sid, v in trt]
    rows = list(kept)
    for name, res in results:
        print(f"{name}: {len(res.rows)} rows")
        print_left_out(res)
        rows += res.rows
    return write_table(
        rows,
        out,
        MOE_HEADER,
        moe_row_error,
        key=lambda r: (
            r["source_id"],
            r["model"],
            r["gpu"],
            r["engine"],
            r["weights"],
            int(r["n_gpus"]),
            int(r["tp"]),
            int(r["attn_dp"]),
            int(r["ep"]),
            int(r["prompt_tokens"]),
            int(r["output_tokens"]),
            float(r["load_value"]),
            r["engine_version"],
            r["notes"],
        ),
    )


if __name__ == "__main__":
    raise SystemExit(main())
