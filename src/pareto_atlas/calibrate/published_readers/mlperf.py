"""Reader of MLCommons' MLPerf Inference results (mlcommons/inference_results_v<round>): one submission's
`closed/<submitter>/results/<system>/<benchmark>/<scenario>/performance/run_1/mlperf_log_summary.txt`
with its system description `closed/<submitter>/systems/<system>.json`.

What the files state: the summary, loadgen's figures of the run (Offline: "Tokens per second" and
"Samples per second" with every sample queued at once; Server: "Completed tokens per second", the
first-token latency and "Time to Output Token" as mean and percentiles in ns, at "target_qps" queries
a second, which loadgen's Server scenario sends as Poisson arrivals) and whether the result is VALID;
the system file, the accelerator ("accelerator_model_name"), how many a node holds, the nodes, and the
framework. What they do not state and a row needs is given by the caller with where it was read
(Setup: the engine, its weight format, tensor and pipeline parallelism, from the submission's code or
measurements; Dataset: the benchmark's model card and prompt length). A run whose setup or card is
unknown is left out, counted with the reason.

Lengths: the benchmarks' datasets have variable lengths. output_tokens is the run's own mean, the
summary's tokens per second over its samples per second; prompt_tokens is what the caller's Dataset
gives with its basis (where the mean input is stated nowhere read, a bound), kept in the row's notes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from pareto_atlas.calibrate.published_readers import ReadResult, SourceFile, table_row

SHIPPED = "published_mlperf.csv"  # spec/: MLPerf's rows, apart from the tables the fits read
SUMMARY = "mlperf_log_summary.txt"
_PATH = re.compile(
    r"^closed/(?P<submitter>[^/]+)/results/(?P<system>[^/]+)/(?P<benchmark>[^/]+)/(?P<scenario>Offline|Server)/"
    r"performance/run_\d+/mlperf_log_summary\.txt$"
)
_LINE = re.compile(r"^\s*(?P<key>[^:]+?)\s*:\s*(?P<value>\S.*?)\s*$")
# The systems' accelerator names -> hardware cards (spec/hardware.toml); another accelerator has none.
GPUS = {
    "NVIDIA H100-SXM-80GB": "H100-SXM",
    "NVIDIA H200-SXM-141GB": "H200",
    "NVIDIA B200-SXM-180GB": "B200",
}
NS = 1e6  # ns per ms
MAX_QUEUED = 100_000  # published_table.MAX["load_value"]: an offline row's queue is recorded up to it
MAX_SAMPLES = 1_000_000  # published_table.MAX["n_requests"]: its requests likewise (the note keeps the count)
# The Server scenario's latency figures, by the table's statistic: (first-token line, TPOT line).
SERVER_STATS = {
    "mean": ("Mean First Token latency (ns)", "Mean Time to Output Token (ns)"),
    "p50": ("50.00 percentile first token latency (ns)", "50.00 percentile time to output token (ns)"),
    "p99": ("99.00 percentile first token latency (ns)", "99.00 percentile time to output token (ns)"),
}
ROW_STATS = ("p50", "p99")  # one row per statistic; the mean stays in the notes (the fit reads a mean as a p50)


class MLPerfFileError(ValueError):
    """A summary or system file lacks a field the reader needs; the message names file and field."""


@dataclass(frozen=True)
class Setup:
    """What a run's files do not state, as the submission's code or measurements state it (`cited`)."""

    engine: str  # published_table.ENGINES
    weights: str  # the table's weight format
    weights_published: str  # as the source writes it
    kv: str  # the table's KV dtype, or "unstated"
    tp: int
    pp: int
    cited: str  # repository, path@commit and the lines the setup was read from


@dataclass(frozen=True)
class Dataset:
    """A benchmark's model card and prompt length, with what the length rests on."""

    model: str  # catalog card (spec/models.toml)
    model_published: str
    prompt_tokens: int
    prompt_basis: str  # e.g. "the input cap ..., not its mean"


def summary_figures(src: SourceFile) -> dict[str, str]:
    """Every `name : value` line of a summary as printed (first occurrence), names stripped."""
    out: dict[str, str] = {}
    for line in src.text.splitlines():
        if (m := _LINE.match(line)) and not line.lstrip().startswith("*"):
            out.setdefault(m["key"], m["value"])
    return out


def _field(figs: dict[str, str], name: str, src: SourceFile) -> float:
    if name not in figs:
        raise MLPerfFileError(f"{src.path}: no {name!r} line")
    try:
        return float(figs[name])
    except ValueError:
        raise MLPerfFileError(f"{src.path}: {name!r} is {figs[name]!r}, not a number") from None


def system_fields(src: SourceFile) -> dict:
    """The system description's fields the rows need: accelerator, its count, nodes, framework."""
    try:
        d = json.loads(src.text)
    except ValueError as e:
        raise MLPerfFileError(f"{src.path}: not JSON ({e})") from None
    for f in ("accelerator_model_name", "accelerators_per_node", "framework"):
        if f not in d:
            raise MLPerfFileError(f"{src.path}: no field {f!r}")
    try:
        n = int(d["accelerators_per_node"]) * int(d.get("number_of_nodes") or 1)
    except (TypeError, ValueError):
        raise MLPerfFileError(f"{src.path}: field 'accelerators_per_node' is not an integer") from None
    return {"accelerator": str(d["accelerator_model_name"]), "n": n, "framework": str(d["framework"])}


def _version(engine: str, framework: str) -> str:
    # the framework field names vLLM's release; NVIDIA's names TensorRT, not TensorRT-LLM's
    m = re.search(r"vLLM ([\w.+-]+)", framework) if engine == "vllm" else None
    return m.group(1) if m else f"unstated (framework: {framework})"


def read(
    summary: SourceFile,
    system: SourceFile,
    source_id: str,
    date: str,
    setup: Setup | None,
    dataset: Dataset | None,
) -> ReadResult:
    """The rows of one run: Offline, one row (out_tok_s, every sample queued at once); Server, one row per
    ROW_STATS statistic (ttft_ms, tpot_ms; out_tok_s on the p50 row) at a Poisson rate of target_qps.
    Left out, with the reason: a result not VALID, a benchmark without a Dataset, a system without a
    Setup, an accelerator without a hardware card, a parallel layout that does not divide the system."""
    out = ReadResult()
    m = _PATH.match(summary.path)
    if not m:
        raise MLPerfFileError(f"{summary.path}: not closed/<submitter>/results/<system>/<benchmark>/<scenario>/...")
    figs, sysf = summary_figures(summary), system_fields(system)
    if figs.get("Result is") != "VALID":
        out.skip(f"result {figs.get('Result is', 'unstated')}")
        return out
    if dataset is None:
        out.skip(f"benchmark {m['benchmark']}: no model card or lengths")
        return out
    if setup is None:
        out.skip(f"{m['submitter']} {m['system']}: engine, weights and parallelism stated in no file read")
        return out
    gpu = GPUS.get(sysf["accelerator"])
    if gpu is None:
        out.skip(f"accelerator {sysf['accelerator']}: no hardware card")
        return out
    per, n = setup.tp * setup.pp, sysf["n"]
    if n % per:
        out.skip(f"TP{setup.tp} x PP{setup.pp} does not divide {n} accelerators")
        return out
    offline = m["scenario"] == "Offline"
    tok, smp = (
        ("Tokens per second", "Samples per second")
        if offline
        else (
            "Completed tokens per second",
            "Completed samples per second",
        )
    )
    tok_s, smp_s = _field(figs, tok, summary), _field(figs, smp, summary)
    out_mean = round(tok_s / smp_s)
    base = dict(
        source_id=source_id,
        source=summary.url,
        date=date,
        engine=setup.engine,
        engine_version=_version(setup.engine, sysf["framework"]),
        gpu=gpu,
        gpu_published=f"{sysf['accelerator']} x{n} ({m['system']})",
        model=dataset.model,
        model_published=f"{dataset.model_published} ({m['benchmark']})",
        weights=setup.weights,
        weights_published=setup.weights_published,
        kv=setup.kv,
        prompt_tokens=dataset.prompt_tokens,
        output_tokens=out_mean,
        tp=setup.tp,
        pp=setup.pp,
        replicas=n // per,
        n_gpus=n,
    )
    common = (
        f"MLPerf Inference closed, {m['submitter']} {m['system']}, {m['benchmark']} {m['scenario']}; "
        f"system {system.url}; output_tokens: the run's mean, {tok!r} {figs[tok]} / {smp!r} {figs[smp]} "
        f"(variable lengths); prompt_tokens: {dataset.prompt_basis}; setup: {setup.cited}"
    )
    if offline:
        q = int(_field(figs, "samples_per_query", summary))
        out.rows.append(
            table_row(
                **base,
                load="offline",
                load_value=min(q, MAX_QUEUED),
                n_requests=min(q, MAX_SAMPLES),
                stat="-",
                out_tok_s=figs[tok],
                notes=f"{common}; {tok!r} as out_tok_s; every sample queued at once (samples_per_query {q})",
            )
        )
        return out
    qps = figs.get("target_qps", "")
    _field(figs, "target_qps", summary)
    for stat in ROW_STATS:
        ttft, tpot = SERVER_STATS[stat]
        mean_ttft, mean_tpot = SERVER_STATS["mean"]
        out.rows.append(
            table_row(
                **base,
                load="rate",
                load_value=qps,
                stat=stat,
                ttft_ms=f"{_field(figs, ttft, summary) / NS:.3f}",
                tpot_ms=f"{_field(figs, tpot, summary) / NS:.3f}",
                out_tok_s=figs[tok] if stat == "p50" else "",
                notes=f"{common}; Poisson arrivals at target_qps {qps} (loadgen's Server scenario); "
                f"{ttft!r} and {tpot!r} in ms as ttft_ms and tpot_ms"
                + (f", {tok!r} as out_tok_s" if stat == "p50" else "")
                + f"; means: {mean_ttft!r} {figs.get(mean_ttft, '?')}, {mean_tpot!r} {figs.get(mean_tpot, '?')}",
            )
        )
    return out
