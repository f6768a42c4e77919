"""A row of the shipped multi-GPU table's columns as aiconfigurator publishes one (a vLLM Llama-3.1-8B
closed loop of 8 clients on H100-SXM), for the tests of how published rows run; each test overrides what
it varies. Every value a string, as the table's reader reads them."""

from __future__ import annotations

from pareto_atlas.calibrate import published_runs as pr
from pareto_atlas.calibrate.published_table import COLUMNS, PARALLEL_DEFAULT


def aiconfigurator_row(**kw) -> dict[str, str]:
    r = {c: "" for c in COLUMNS} | dict(PARALLEL_DEFAULT)
    r.update(
        source_id=pr.AICONFIGURATOR,
        source="https://example.org/aic",
        date="undated",
        engine="vllm",
        gpu="H100-SXM",
        model="llama-3.1-8b",
        weights="BF16",
        kv="unstated",
        prompt_tokens="1024",
        output_tokens="64",
        load="concurrency",
        load_value="8",
        stat="unstated",
        ttft_ms="100",
        tpot_ms="10",
    )
    r.update({k: str(v) for k, v in kw.items()})
    return r
