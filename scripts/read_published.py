"""Write spec/published_multigpu.csv: the published multi-GPU measurements, read by the readers in
calibrate/published_readers from the files their publishers ship, each row citing repository, path
and commit.

    python scripts/read_published.py --aiconfigurator-git DIR [--trtllm-git DIR | --raw DIR] [--out CSV]
    python scripts/read_published.py --moe --aiconfigurator-git DIR [--trtllm-git DIR | --raw DIR |
        --trtllm-moe-from-table] [--out CSV]

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
    aiconfigurator_moe,
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
    ap.add_argument("--aiconfigurator-git", type=Path, required=True, help="git directory of ai-dynamo/aiconfigurator")
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
    a = ap.parse_args(argv)
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
