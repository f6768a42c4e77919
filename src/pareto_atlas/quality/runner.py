"""Ask quality items through any OpenAI-compatible endpoint (the arm's own server), greedily.

The runner never starts an engine: it takes the `base_url` of one that is serving the arm.
Concurrency is bounded by the arm's slots. Each finished record is handed to `on_record`
first (save first), then the run is scored from the records (`scoring.summarize`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Mapping, Sequence

import httpx

from . import gsm8k as gsm
from . import retrieval as niah
from . import ruler
from .extract import INVALID
from .records import QualityItem, QualityRecord
from .scoring import QualityRun, score_output, summarize

DEFAULT_SEED = 1234
Progress = Callable[[int, int], None]


def api_root(base_url: str) -> str:
    """'http://h:p', 'http://h:p/' and 'http://h:p/v1' all name the same server."""
    url = base_url.rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"base_url: {base_url!r} must start with http:// or https://")
    return url[:-3] if url.endswith("/v1") else url


def request_body(
    item: QualityItem, seed: int, model: str | None, logprobs: bool, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Greedy: temperature 0 and top_k 1 (llama.cpp, vLLM) so ties cannot be sampled either way."""
    body: dict[str, Any] = {"max_tokens": item.max_tokens, "temperature": 0.0, "top_k": 1, "seed": seed}
    if item.endpoint == "completions":
        body["prompt"] = item.prompt
        if logprobs:
            body["logprobs"] = 1
    else:
        body["messages"] = [{"role": r, "content": c} for r, c in item.messages]
        if logprobs:
            body["logprobs"], body["top_logprobs"] = True, 1
    if item.stop:
        body["stop"] = list(item.stop)
    if model is not None:
        body["model"] = model
    body.update(extra or {})
    return body


def parse_choice(data: Mapping[str, Any]) -> tuple[str, tuple[int, ...] | None, tuple[float, ...] | None, str | None]:
    """(text, token ids, token logprobs, finish_reason) from a completions or chat response.

    Token ids come from llama.cpp-style `logprobs.content[].id`; the legacy OpenAI completions
    form (`tokens`, `token_logprobs`) has no ids, so agreement falls back to characters there.
    """
    choice = data["choices"][0]
    if "message" in choice:
        text = (choice["message"] or {}).get("content") or ""
    else:
        text = choice.get("text") or ""
    ids = lps = None
    lp = choice.get("logprobs")
    if isinstance(lp, Mapping):
        content = lp.get("content")
        if isinstance(content, list) and content:
            if all("id" in c for c in content):
                ids = tuple(int(c["id"]) for c in content)
            if all("logprob" in c for c in content):
                lps = tuple(float(c["logprob"]) for c in content)
        elif isinstance(lp.get("token_logprobs"), list):
            lps = tuple(float(x) if x is not None else float("nan") for x in lp["token_logprobs"])
    return text, ids, lps, choice.get("finish_reason")


async def ask(
    client: httpx.AsyncClient,
    root: str,
    item: QualityItem,
    *,
    seed: int = DEFAULT_SEED,
    model: str | None = None,
    logprobs: bool = True,
    extra: Mapping[str, Any] | None = None,
) -> QualityRecord:
    path = "/v1/completions" if item.endpoint == "completions" else "/v1/chat/completions"
    body = request_body(item, seed, model, logprobs, extra)
    common = dict(
        item_id=item.item_id,
        task=item.task,
        variant=item.variant,
        prompt_sha256=item.prompt_sha256(),
        target=item.target,
        stop=item.stop,
        meta=dict(item.meta),
    )
    t0 = time.monotonic()
    try:
        resp = await client.post(root + path, json=body)
        latency = time.monotonic() - t0
        if resp.status_code != 200:
            raise RuntimeError(f"HTTP {resp.status_code}: {resp.text[:300]}")
        data = resp.json()
        text, ids, lps, finish = parse_choice(data)
    except Exception as e:  # kept as a failed record: errors count as wrong answers, never vanish
        return QualityRecord(
            output="",
            extracted_strict=INVALID,
            extracted_flexible=INVALID,
            correct_strict=False,
            correct_flexible=False,
            latency_s=time.monotonic() - t0,
            error=f"{type(e).__name__}: {e}"[:500],
            **common,
        )
    # off the event loop: HumanEval scoring runs the answer in a sandbox (up to its wall-clock limit)
    strict, flexible, ok_s, ok_f = await asyncio.to_thread(
        score_output, item.task, item.variant, text, item.target, item.stop
    )
    usage = data.get("usage") or {}
    return QualityRecord(
        output=text,
        extracted_strict=strict,
        extracted_flexible=flexible,
        correct_strict=ok_s,
        correct_flexible=ok_f,
        latency_s=latency,
        token_ids=ids,
        token_logprobs=lps,
        finish_reason=finish,
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        **common,
    )


async def arun_items(
    base_url: str,
    items: Sequence[QualityItem],
    *,
    concurrency: int = 1,
    seed: int = DEFAULT_SEED,
    model: str | None = None,
    logprobs: bool = True,
    timeout_s: float = 600.0,
    extra: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
    on_record: Callable[[QualityRecord], None] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> QualityRun:
    """Ask every item (at most `concurrency` in flight); records come back in item order.
    `transport` replaces the network (tests use httpx.MockTransport)."""
    if concurrency < 1:
        raise ValueError(f"quality concurrency: {concurrency} must be >= 1 (the arm's slots)")
    if not items:
        raise ValueError("quality run: no items to ask")
    ids = [it.item_id for it in items]
    if len(set(ids)) != len(ids):
        raise ValueError("quality run: item ids must be unique")
    root = api_root(base_url)
    sem = asyncio.Semaphore(concurrency)
    done = 0
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async with httpx.AsyncClient(timeout=timeout_s, limits=limits, transport=transport) as client:

        async def one(item: QualityItem) -> QualityRecord:
            nonlocal done
            async with sem:
                rec = await ask(client, root, item, seed=seed, model=model, logprobs=logprobs, extra=extra)
            done += 1
            if on_record is not None:
                on_record(rec)
            if progress is not None:
                progress(done, len(items))
            return rec

        t0 = time.monotonic()
        records = await asyncio.gather(*(one(it) for it in items))
        wall = time.monotonic() - t0
    return QualityRun(tuple(records), summarize(records, wall_s=wall))


def run_items(base_url: str, items: Sequence[QualityItem], **kw: Any) -> QualityRun:
    """Synchronous `arun_items` (for the CLI); inside an event loop await `arun_items` instead."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(arun_items(base_url, items, **kw))
    raise RuntimeError("run_items: an event loop is running here; await arun_items(...) instead")


def run_gsm8k(
    base_url: str,
    *,
    n: int | None = 200,
    variant: str = "lm-eval-5shot",
    concurrency: int = 1,
    sample_seed: int = gsm.FEWSHOT_SEED,
    test_path: str | None = None,
    train_path: str | None = None,
    max_tokens: int | None = None,
    **kw: Any,
) -> QualityRun:
    """GSM8K on the arm at `base_url`: n seeded test items (None = all 1319)."""
    items = gsm.gsm8k_items(
        n, variant, sample_seed=sample_seed, test_path=test_path, train_path=train_path, max_tokens=max_tokens
    )
    return run_items(base_url, items, concurrency=concurrency, **kw)


def server_token_counter(base_url: str, timeout_s: float = 60.0) -> Callable[[str], int] | None:
    """Count tokens with the server's own tokenizer (llama.cpp `/tokenize`); None if it has none."""
    root = api_root(base_url)
    try:
        r = httpx.post(root + "/tokenize", json={"content": "probe"}, timeout=timeout_s)
        if r.status_code != 200 or "tokens" not in r.json():
            return None
    except (httpx.HTTPError, ValueError):
        return None

    def count(text: str) -> int:
        resp = httpx.post(root + "/tokenize", json={"content": text}, timeout=timeout_s)
        resp.raise_for_status()
        return len(resp.json()["tokens"])

    return count


def run_retrieval(
    base_url: str,
    *,
    context_tokens: Sequence[int] = niah.CONTEXT_TOKENS,
    depths: Sequence[float] = niah.DEPTHS,
    per_cell: int = 2,
    seed: int = 0,
    concurrency: int = 1,
    use_server_tokenizer: bool = True,
    **kw: Any,
) -> QualityRun:
    """Needle retrieval on the arm. Haystacks are sized with the server's tokenizer when it has one
    (the same tokenizer across weight/KV arms of one model, so prompts match across arms).
    Each slot's context must hold context_tokens + ~60."""
    counter = server_token_counter(base_url) if use_server_tokenizer else None
    items = niah.retrieval_items(context_tokens, depths, per_cell, seed, counter)
    return run_items(base_url, items, concurrency=concurrency, **kw)


def run_ruler(
    base_url: str,
    *,
    context_tokens: Sequence[int] = ruler.CONTEXT_TOKENS,
    subtasks: Sequence[str] = ruler.SUBTASKS,
    per_cell: int = 1,
    seed: int = 0,
    concurrency: int = 1,
    use_server_tokenizer: bool = True,
    **kw: Any,
) -> QualityRun:
    """RULER's synthetic tasks on the arm, each request sized to its length with the server's
    tokenizer when it has one. Each slot's context must hold the longest length."""
    counter = server_token_counter(base_url) if use_server_tokenizer else None
    items = ruler.ruler_items(context_tokens, subtasks, per_cell, seed, counter)
    return run_items(base_url, items, concurrency=concurrency, **kw)
