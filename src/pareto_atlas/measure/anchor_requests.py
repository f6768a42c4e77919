"""What an anchor sends: its requests' lengths, its contract prompts (unique, or sharing exactly the
prefix its workload states) and the per-request engine fields its knobs ask for."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pareto_atlas.spec.study import WorkloadSpec


def request_lengths(wl: WorkloadSpec, rows, warmup: int) -> tuple[int | list[int], int | list[int]]:
    """(prompt, output) tokens of an anchor's requests: the workload's, or one pair per request of a
    trace's rows (the warm-ups take its first row's)."""
    if not rows:
        return wl.prompt_tokens, wl.output_tokens
    sent = list(rows[:1]) * warmup + list(rows)
    return [r.prompt_tokens for r in sent], [r.output_tokens for r in sent]


def anchor_prompts(running, wl: WorkloadSpec, P, n: int | None, seed: int, blocks=None) -> list[str]:
    """The anchor's contract prompts: each unique (a nonce first), or, for a workload that states what
    it shares, sharing exactly its prefix (contract.build_shared_prompts), or, for a trace whose rows
    name their blocks, `blocks` (each sent request's hash_ids, warm-ups first) as text
    (contract.build_block_prompts)."""
    from pareto_atlas.measure.contract import build_block_prompts, build_contract_prompts, build_shared_prompts
    from pareto_atlas.spec.trace import HASH_BLOCK_TOKENS

    share = wl.sharing()
    if share is not None and share.turns > 1:
        raise ValueError(
            f"workload {wl.name}: share.turns = {share.turns}: sessions of several turns are simulated, "
            f"not yet measured; measure a shared prefix (turns = 1)"
        )
    traced = share is None and wl.shares()
    if traced and (blocks is None or isinstance(P, int) or len(blocks) != len(P)):
        raise ValueError(f"workload {wl.name}: a trace with hash_ids needs each sent request's blocks")
    kw = {"api": wl.api, "model": running.model, "headers": running.headers()}
    if traced:
        return build_block_prompts(running.base_url, P, blocks, HASH_BLOCK_TOKENS, seed=seed, **kw)
    if share is None or share.prefix_tokens == 0:
        return build_contract_prompts(running.base_url, P, n, seed=seed, **kw)
    return build_shared_prompts(running.base_url, P, n, share.prefix_tokens, share.groups, seed=seed, **kw)


def anchor_shared_prefix(running, wl: WorkloadSpec, prompts: list[str]) -> dict:
    """What the anchor's prompts share as the server tokenizes them (contract.measure_shared_prefix), as
    the anchor's metrics keep it: the stated prefix is text of that many tokens, but the tokens two
    requests share are counted, not assumed (the simulator replays the count: spec.sharing.as_measured).
    A trace's block prompts share row by row, not one prefix: not measured."""
    from pareto_atlas.measure.contract import SharedPrefix, measure_shared_prefix

    share = wl.sharing()
    stated = share.prefix_tokens if share is not None else 0
    if share is None and wl.shares():
        return SharedPrefix(None, (), 0, "a trace's blocks: shared row by row").to_metrics()
    groups = share.groups if share is not None and share.prefix_tokens else 1
    kw = {"api": wl.api, "model": running.model, "headers": running.headers()}
    return measure_shared_prefix(running.base_url, prompts, groups, stated, **kw).to_metrics()


def request_extra(extra: dict, engine: str, knobs) -> dict:
    """Per-request engine fields: llama.cpp's prompt cache follows the arm's prefix_cache knob (off by
    default: unique prompts could only cost)."""
    if engine == "llamacpp" and knobs.prefix_cache:
        return {**extra, "cache_prompt": True}
    return dict(extra)
