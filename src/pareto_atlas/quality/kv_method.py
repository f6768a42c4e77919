"""Which KV-cache quantization method a knob of the atlas runs: an engine's `kv` value names a dtype,
but the quality a published score is evidence for also depends on how the scales were set
(calibrated, dynamic, default), their granularity and the implementation. spec/kv_methods.csv
states it per (engine, kv), each with its source; the ladder (store.ladder) uses a published row
for a quantized KV cache only where the row's scales are the knob's (quality.published_for)."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

SHIPPED = "kv_methods.csv"


@dataclass(frozen=True)
class KvMethod:
    engine: str
    kv: str
    kv_scales: str  # calibrated | dynamic | default (published_table.KV_SCALES)
    kv_granularity: str
    kv_engine: str  # the implementation
    source: str
    quote: str

    def describe(self) -> str:
        return f"{self.kv_engine} {self.kv} KV, {self.kv_scales} {self.kv_granularity} scales ({self.source})"


@lru_cache(maxsize=1)
def _table() -> dict[tuple[str, str], KvMethod]:
    text = resources.files("pareto_atlas.spec").joinpath(SHIPPED).read_text()
    return {(r["engine"], r["kv"]): KvMethod(**r) for r in csv.DictReader(io.StringIO(text))}


def kv_method(engine: str, kv: str) -> KvMethod | None:
    """The method `kv` runs on `engine`, or None where the table does not state it (then published
    rows match by the KV dtype's name alone, as before)."""
    return _table().get((engine, kv))
