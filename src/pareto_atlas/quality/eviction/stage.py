"""The `evict` stage: the study's KV-eviction and sparse-attention sweep on its real model, dense in
transformers, into the store.

llama.cpp has neither KV eviction nor sparse attention, so this is the one quality measurement made
outside the serving engine: the study's source GGUF, dequantized, answers the study's own quality
items with a full cache (the reference) and under every (policy, keep) of the sweep. Each point is
stored as it finishes, with its item records; a rerun skips the points already stored. The atlas
reads them as a measured relative effect (`store.quality.quality_for`), never as an engine
measurement.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from rich.console import Console

from pareto_atlas.measure.weights import source_file
from pareto_atlas.quality.tasks import task as task_of
from pareto_atlas.spec.study import EvictionSpec, Study
from pareto_atlas.store import Store
from pareto_atlas.store.db import dumps

ENGINE = "transformers-dense-gguf"


def engine_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"transformers {version('transformers')}, torch {version('torch')}"
    except PackageNotFoundError:
        return "unknown"


def sweep_spec(
    study: Study,
    *,
    policies: list[str] | None = None,
    keeps: list[float] | None = None,
    task: str | None = None,
    n: int | None = None,
) -> EvictionSpec:
    """The study's `[eviction]` sweep with the command line's options on top."""
    return study.eviction.with_overrides(policies=policies, keeps=keeps, task=task, n=n)


def items_ident(study: Study, spec: EvictionSpec) -> dict:
    """Everything that defines the item set; two sweeps with the same ident ask the same prompts."""
    q = study.quality
    return task_of(spec.task or q.task).eviction_ident(q, spec)  # quality.tasks: the task's own fields


def evict_id(study: Study, model_sha256: str, items: dict, policy: str, keep: float, chunk: int) -> str:
    ident = {
        "study": study.name,
        "model": study.model.name,
        "model_sha256": model_sha256,
        "items": items,
        "policy": policy,
        "keep": keep,
        "chunk": chunk,
        "engine": ENGINE,
    }
    return hashlib.sha256(dumps(ident).encode()).hexdigest()[:20]


def point_row(
    point: Any,
    *,
    study: Study,
    items: dict,
    eid: str,
    ref_id: str,
    model_file: str,
    model_sha256: str,
    ppl_full: float | None,
    ppl_item: str,
    engine_version: str,
) -> dict:
    """The store row of one `EvictionPoint`."""
    acc = point.accuracy
    return {
        "evict_id": eid,
        "ref_id": ref_id,
        "study": study.name,
        "model": study.model.name,
        "model_file": model_file,
        "model_sha256": model_sha256,
        "task": items["task"],
        "mode": items["mode"],
        "n": items["n"],
        "seed": items["seed"],
        "items_json": dumps(items),
        "policy": point.policy,
        "keep": point.keep,
        "chunk": point.chunk,
        "label": point.label,
        "kv_keep": point.kv_keep,
        "peak_kv_tokens": point.peak_kv_tokens,
        "kv_bytes_per_token": point.kv_bytes_per_token,
        "n_items": acc.n if acc else 0,
        "correct": acc.k if acc else 0,
        "p": acc.p if acc else None,
        "lo": acc.lo if acc else None,
        "hi": acc.hi if acc else None,
        "ppl": point.ppl,
        "ppl_full": ppl_full if ppl_full is not None else point.ppl,
        "ppl_item": ppl_item,
        "seconds": point.seconds,
        "engine": ENGINE,
        "engine_version": engine_version,
    }


def _line(row: dict) -> str:
    acc = (
        f"{row['correct']}/{row['n_items']} = {row['p']:.3f} [95% {row['lo']:.2f}–{row['hi']:.2f}]"
        if row["n_items"]
        else "no items"
    )
    ppl = "—" if row["ppl"] is None else f"{row['ppl']:.3f} vs full {row['ppl_full']:.3f}"
    achieved = "attended" if row["policy"] == "topk" else "kv_keep"  # topk reads a share of a full cache
    return (
        f"{row['label']:<16} keep {row['keep']:.2f}  achieved {achieved} {row['kv_keep']:.3f}  "
        f"peak {row['peak_kv_tokens']} tok  {acc}  ppl {ppl}  ({row['seconds']:.0f} s)"
    )


def evict_study(
    study: Study,
    store: Store,
    console: Console,
    *,
    policies: list[str] | None = None,
    keeps: list[float] | None = None,
    task: str | None = None,
    n: int | None = None,
) -> list[dict]:
    """Run what the store lacks of the study's eviction sweep; returns the rows of the whole sweep."""
    from .model import require_torch

    spec = sweep_spec(study, policies=policies, keeps=keeps, task=task, n=n)
    try:
        require_torch()
    except ImportError as e:  # one line naming the extra, like a missing Ray (scale.ray_exec)
        raise ValueError(f"evict: {e}") from None

    from pareto_atlas.quality.campaign import study_items

    from .experiment import eviction_sweep, item_prompt
    from .model import load_dense
    from .policies import EvictionConfig

    path, sha = source_file(study.model.name)
    items = items_ident(study, spec)
    ref = EvictionConfig(chunk=spec.chunk)
    configs = [ref] + [EvictionConfig(p, k, chunk=spec.chunk) for p in spec.policies for k in spec.keeps]
    ids = {c: evict_id(study, sha, items, c.policy, c.keep, c.chunk) for c in configs}
    ref_id = ids[ref]
    what = task_of(items["task"]).eviction_what(items)
    console.print(
        f"[bold]evict[/] {study.name}: {study.model.name} ({path.name}) dense in transformers, {what}; "
        f"{', '.join(spec.policies)} at keep {', '.join(f'{k:g}' for k in spec.keeps)}, "
        f"prefill chunk {spec.chunk}",
        highlight=False,
    )

    rows: dict[str, dict] = {}
    stored = store.eviction_points(study.name)
    for c in configs:
        hit = stored[stored.evict_id == ids[c]]
        if len(hit):
            rows[ids[c]] = hit.iloc[-1].to_dict()
            console.print(f"  {_line(rows[ids[c]])}  [stored earlier, kept]", highlight=False, markup=False)
    todo = [c for c in configs if ids[c] not in rows]
    if not todo:
        return [rows[ids[c]] for c in configs]

    t0 = time.monotonic()
    model, tok = load_dense(path)
    # Haystacks sized with the model's own tokenizer, without special tokens as the engine's
    # /tokenize counts them, so the prompts are the engine quality arm's wherever the two agree.
    lengths = task_of(items["task"]).length_field
    q = study.quality.model_copy(update={lengths: items["lengths"]}) if lengths else study.quality
    qitems = study_items(
        q, task=items["task"], n=items["n"], count_tokens=lambda s: len(tok(s, add_special_tokens=False).input_ids)
    )
    # Perplexity on the longest prompt of the set: where the evicted share of the cache is largest.
    ppl_src = max(qitems, key=lambda it: len(item_prompt(tok, it)))
    console.print(
        f"  model loaded in {time.monotonic() - t0:.0f} s; {len(qitems)} items, perplexity on {ppl_src.item_id}",
        highlight=False,
    )

    by_knob = {(c.policy, 1.0 if c.reference else c.keep): c for c in todo}

    def save(point) -> None:
        cfg = by_knob[(point.policy, point.keep)]
        full = rows.get(ref_id)
        row = point_row(
            point,
            study=study,
            items=items,
            eid=ids[cfg],
            ref_id=ref_id,
            model_file=str(path),
            model_sha256=sha,
            ppl_full=None if full is None else full["ppl"],
            ppl_item=ppl_src.item_id,
            engine_version=engine_version(),
        )
        store.put_eviction_point(row, [r.to_dict() for r in point.records])
        rows[ids[cfg]] = row
        console.print(f"  {_line(row)}", highlight=False, markup=False)

    # the reference comes first in `configs`, so every evicted point finds its full-cache perplexity
    eviction_sweep(model, tok, qitems, todo, ppl_text=item_prompt(tok, ppl_src), on_point=save)
    return [rows[ids[c]] for c in configs]


__all__ = ["ENGINE", "evict_id", "evict_study", "items_ident", "sweep_spec"]
