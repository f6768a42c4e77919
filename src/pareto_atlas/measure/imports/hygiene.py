"""Checks every imported run passes whatever tool wrote it: a warm prefix cache (caching on with
repeated prompts, where the file says both) makes throughput and TTFT a cache-hit figure (vLLM
issues #52884, #54227: up to 2.3x), not the configuration's."""

from __future__ import annotations

from pareto_atlas.measure.imports.parse import Fields
from pareto_atlas.measure.imports.result import reject

CACHE_ON = ("enable_prefix_caching", "enable-prefix-caching", "prefix_caching")
CACHE_OFF = ("disable_radix_cache", "disable-radix-cache", "no_enable_prefix_caching")
# datasets and settings that send the same prefix again and again
REPEATED_DATASETS = ("prefix_repetition", "generated-shared-prefix", "prefix-repetition")
REPEAT_KEYS = ("random_prefix_len", "prefix_repetition_prefix_len", "gsp_system_prompt_len", "prefix_tokens")


def _on(f: Fields, keys: tuple[str, ...]) -> str | None:
    for k in keys:
        v = f.raw(k)
        if (
            v is True
            or (isinstance(v, str) and v.lower() in ("true", "1", "on"))
            or (isinstance(v, (int, float)) and not isinstance(v, bool) and v == 1)
        ):
            return k
    return None


def warm_prefix_cache(f: Fields) -> None:
    """Reject a run the file shows as served from a warm prefix cache."""
    on = _on(f, CACHE_ON)
    if on is None or _on(f, CACHE_OFF):
        return
    dataset = f.raw("dataset_name")
    repeated = [
        k for k in REPEAT_KEYS if isinstance(f.raw(k), (int, float)) and not isinstance(f.raw(k), bool) and f.raw(k) > 0
    ]
    if dataset in REPEATED_DATASETS or repeated:
        what = f"dataset {dataset!r}" if dataset in REPEATED_DATASETS else f"{repeated[0]} = {f.raw(repeated[0])}"
        raise reject(
            f.path,
            f.name(on),
            f"prefix caching on with repeated prompts ({what}): a warm-cache "
            "figure, not the configuration's (throughput inflated up to 2.3x in vLLM #52884)",
        )
