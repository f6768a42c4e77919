"""The exact token-count contract: prompts of exactly P tokens as the server counts them,
requests for exactly N output tokens, and the check of every response against server usage.

A request that breaks the contract is rejected with its reason; it is counted and shown,
never averaged into a metric.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from numbers import Integral

import httpx

from .records import RequestRecord

APIS = ("completions", "chat")

# Common short English words: almost all are one token in BPE vocabularies, so the prompt
# length can be tuned word by word. Prose-like text keeps n-gram speculation honest (no
# artificial repetition for the drafter to exploit).
_WORDS = (
    "the of and to in is was for that on with as by at from his her they this which were be "
    "are had not but have one all there their been has when who will more would out so up "
    "what about into than them can only other new some could time these two may then do first "
    "any my now such like our over man me even most made after also did many before must "
    "through back years where much your way well down should because each just those people "
    "how too little state good very make world still own see men work long get here between "
    "both life being under never day same another know while last might us great old year off "
    "come since against go came right used take three small large river house city water light "
    "green table stone paper market garden window morning letter number answer question"
).split()


def header_secrets(headers: Mapping[str, str] | None) -> tuple[str, ...]:
    """Credential values carried in request headers, to be scrubbed from anything we print."""
    out = []
    for k, v in (headers or {}).items():
        if k.lower() in ("authorization", "api-key", "x-api-key") and v:
            out.append(v)
            out.extend(part for part in v.split() if len(part) >= 8)  # the bare token of "Bearer <token>"
    return tuple(out)


def redact(text: str, secrets: tuple[str, ...]) -> str:
    for s in sorted(secrets, key=len, reverse=True):
        text = text.replace(s, "***")
    return text


def endpoint_path(api: str) -> str:
    if api not in APIS:
        raise ValueError(f"api: {api!r} is not one of {', '.join(APIS)}")
    return "/v1/completions" if api == "completions" else "/v1/chat/completions"


def contract_body(
    api: str,
    prompt: str,
    output_tokens: int,
    *,
    model: str | None = None,
    stream: bool = True,
    extra: Mapping | None = None,
) -> dict:
    """The request body asking for exactly `output_tokens` tokens: max = min = N, EOS ignored,
    no stop strings, greedy (so reruns are comparable), usage included in the stream."""
    if output_tokens < 1:
        raise ValueError(f"output_tokens: {output_tokens} must be >= 1")
    body: dict = {
        "max_tokens": output_tokens,
        "min_tokens": output_tokens,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    if api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        endpoint_path(api)
        body["prompt"] = prompt
    if model:
        body["model"] = model
    body.update(extra or {})
    return body


def check_contract(record: RequestRecord, prompt_tokens: int | None, output_tokens: int | None) -> str | None:
    """Why `record` breaks the contract, or None when it holds. Errors are not judged here."""
    if record.error is not None:
        return None
    if record.prompt_tokens is None or record.completion_tokens is None:
        return "no usage in the response (server did not report prompt/completion tokens)"
    if prompt_tokens is not None and record.prompt_tokens != prompt_tokens:
        return f"prompt_tokens {record.prompt_tokens} != contract P={prompt_tokens}"
    if output_tokens is not None and record.completion_tokens != output_tokens:
        return f"completion_tokens {record.completion_tokens} != contract N={output_tokens}"
    if not record.chunk_ts:
        return "no streamed chunk carried generated text"
    return None


def apply_contract(record: RequestRecord, prompt_tokens: int | None, output_tokens: int | None) -> RequestRecord:
    """The record with its verdict: ok only when it completed and the contract holds."""
    if record.error is not None:
        return record.with_verdict(False, None)
    reason = check_contract(record, prompt_tokens, output_tokens)
    return record.with_verdict(reason is None, reason)


# ----------------------------------------------------------------------------- prompt building


class TokenCounter:
    """Counts prompt tokens as the server will report them in usage.prompt_tokens.

    Uses the server's `/tokenize` (llama.cpp: {"content"} -> tokens; vLLM: {"prompt"} -> tokens)
    plus a constant offset (BOS, chat template) found with one probe request; without a
    tokenizer endpoint every count is a 1-token probe request (slow but exact).
    """

    def __init__(self, client: httpx.Client, api: str = "completions", model: str | None = None):
        self.client, self.api, self.model = client, api, model
        self._secrets = header_secrets(client.headers)
        self._tokenize: Callable[[str], list[int]] | None = self._find_tokenizer()
        self.offset = 0
        if self._tokenize is not None:
            probe = "Counting probe text."
            self.offset = self._usage_count(probe) - len(self._tokenize(probe))

    def __call__(self, text: str) -> int:
        if self._tokenize is None:
            return self._usage_count(text)
        return len(self._tokenize(text)) + self.offset

    def ids(self, text: str) -> list[int] | None:
        """The server's token ids of `text` as its `/tokenize` gives them (llama.cpp: without BOS;
        vLLM: with its special tokens; the rest of what usage counts is `offset`), or None where the
        server has no tokenizer endpoint."""
        return None if self._tokenize is None else self._tokenize(text)

    def _find_tokenizer(self) -> Callable[[str], list[int]] | None:
        def llama(text: str) -> list[int]:
            r = self.client.post("/tokenize", json={"content": text})
            r.raise_for_status()
            return [int(t) for t in r.json()["tokens"]]

        def vllm(text: str) -> list[int]:
            body = {"prompt": text, "add_special_tokens": True}
            if self.model:
                body["model"] = self.model
            r = self.client.post("/tokenize", json=body)
            r.raise_for_status()
            return [int(t) for t in r.json()["tokens"]]

        for fn in (llama, vllm):
            try:
                fn("probe")
                return fn
            except (httpx.HTTPError, KeyError, ValueError, TypeError):
                continue
        return None

    def _usage_count(self, text: str) -> int:
        body = contract_body(self.api, text, 1, model=self.model, stream=False)
        r = self.client.post(endpoint_path(self.api), json=body)
        if r.status_code >= 400:
            detail = redact(r.text[:200], self._secrets).replace("\n", " ")
            raise RuntimeError(f"token count probe: HTTP {r.status_code} from {endpoint_path(self.api)}: {detail}")
        usage = r.json().get("usage") or {}
        if "prompt_tokens" not in usage:
            raise RuntimeError("token count probe: the server reported no usage.prompt_tokens")
        return int(usage["prompt_tokens"])


@contextmanager
def server_counter(
    base_url: str, api: str, model: str | None, headers: Mapping[str, str] | None, timeout_s: float
) -> Iterator[TokenCounter]:
    """A TokenCounter on a client of the server at `base_url`, closed after."""
    with httpx.Client(base_url=base_url, timeout=timeout_s, headers=dict(headers or {})) as client:
        yield TokenCounter(client, api=api, model=model)


def exact_prompt(
    count: Callable[[str], int],
    target: int,
    prefix: str,
    rng: random.Random,
    attempts: int = 8,
    hint: int | None = None,
) -> str:
    """Text starting with `prefix` that the server counts as exactly `target` tokens.

    Tries `hint` words (and its neighbours) first: consecutive prompts of one length need
    about the same number of words, so one or two counts usually suffice (this matters when
    each count is a probe request). Otherwise a binary search over how many pool words follow
    the prefix (the count is monotone in it); when merges make the count jump over the
    target, the words are redrawn.
    """
    words = [rng.choice(_WORDS) for _ in range(target + 8)]
    text = lambda k: prefix + " ".join(words[:k])  # noqa: E731
    if hint is not None:
        for k in (hint, hint - 1, hint + 1):
            if 0 <= k <= len(words) and count(text(k)) == target:
                return text(k)
    base = count(prefix)
    if base > target:
        raise ValueError(f"prompt_tokens: P={target} is shorter than the unique request prefix ({base} tokens)")
    for attempt in range(attempts):
        if attempt:
            words = [rng.choice(_WORDS) for _ in range(target + 8)]
        lo, hi = 0, len(words)
        while lo < hi:  # smallest k with count >= target
            mid = (lo + hi) // 2
            if count(text(mid)) < target:
                lo = mid + 1
            else:
                hi = mid
        if count(text(lo)) == target:
            return text(lo)
    raise RuntimeError(f"prompt_tokens: could not build a prompt of exactly {target} tokens after {attempts} tries")


def build_contract_prompts(
    base_url: str,
    P: int | Sequence[int],
    n: int | None = None,
    seed: int = 0,
    *,
    api: str = "completions",
    model: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 60.0,
) -> list[str]:
    """Prompts of exactly `P` server tokens (`n` of them), or one per length of a list `P` (a
    trace's; n then None), each opening with a unique nonce so that no prefix cache can serve one
    request from another's work. Deterministic in `seed`."""
    one = isinstance(P, Integral)
    if one == (n is None):
        raise ValueError("build_contract_prompts: give one length P and a count n, or a list of lengths and no n")
    lengths = [int(P)] * n if one else [int(p) for p in P]
    if (one and P < 1) or (n is not None and n < 0) or any(p < 1 for p in lengths):
        raise ValueError(f"build_contract_prompts: P={P} must be >= 1 (every length of a list) and n={n} >= 0")
    with server_counter(base_url, api, model, headers, timeout_s) as count:
        return request_prompts(count, lengths, seed, random.Random(seed))


def request_prompts(
    count: Callable[[str], int], lengths: Sequence[int], seed: int, rng: random.Random, heads: Sequence[str] = ()
) -> list[str]:
    """One prompt of exactly lengths[i] tokens per request i: its head (heads[i], a group's shared text;
    none by default), then "Request <seed>-<i> <6 hex digits>: " (the nonce: unique per request, though
    its "Request <seed>-" is common to all, which measure_shared_prefix counts), then pool words."""
    out: list[str] = []
    hints: dict[int, int] = {}  # words that last made a prompt of this length: the next needs about as many
    for i, target in enumerate(lengths):
        prefix = f"{heads[i] + ' ' if heads else ''}Request {seed}-{i} {rng.randrange(16**6):06x}: "
        out.append(exact_prompt(count, target, prefix, rng, hint=hints.get(target)))
        hints[target] = len(out[-1][len(prefix) :].split())
    return out


def build_shared_prompts(
    base_url: str,
    P: int,
    n: int,
    prefix_tokens: int,
    groups: int = 1,
    seed: int = 0,
    *,
    api: str = "completions",
    model: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 60.0,
) -> list[str]:
    """Prompts of exactly `P` server tokens (`n` of them) that share exactly what a workload states
    (spec.sharing): request i opens with group i % groups' prefix text of `prefix_tokens` server
    tokens (its BOS included), then a unique nonce and words. Nothing else is shared; what a cache
    really reused is the server's to report (RequestRecord.cached_tokens), never assumed from this."""
    if not 0 < prefix_tokens < P or groups < 1 or n < 0:
        raise ValueError(
            f"build_shared_prompts: prefix_tokens={prefix_tokens} must be in 1..P-1 (P={P}), "
            f"groups={groups} >= 1, n={n} >= 0"
        )
    rng = random.Random(seed)
    with server_counter(base_url, api, model, headers, timeout_s) as count:
        shared = [exact_prompt(count, prefix_tokens, f"System {seed}-{g}: ", rng) for g in range(groups)]
        return request_prompts(count, [P] * n, seed, rng, [shared[i % groups] for i in range(n)])


def build_block_prompts(
    base_url: str,
    P: Sequence[int],
    blocks: Sequence[Sequence[int]],
    block_tokens: int,
    seed: int = 0,
    *,
    api: str = "completions",
    model: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 60.0,
) -> list[str]:
    """Prompts of exactly P[i] server tokens whose blocks are a trace row's ids (the Mooncake format's
    hash_ids, one id per `block_tokens` tokens, the last one partial): equal ids are equal text, so two
    prompts share exactly the chain of leading blocks their rows share. A block's text is its id's own
    word draw (seeded by the id), about `block_tokens` tokens; the last block is the first words of its
    id's draw, as many as make the prompt exactly P[i] tokens (so a partial block is a prefix of the
    same id's full one). What a cache reused is the server's to report, never assumed from this."""
    if len(P) != len(blocks) or block_tokens < 1 or any(not b for b in blocks):
        raise ValueError(
            f"build_block_prompts: {len(P)} lengths and {len(blocks)} block lists must match, every list "
            f"non-empty, block_tokens={block_tokens} >= 1"
        )
    with server_counter(base_url, api, model, headers, timeout_s) as count:
        base = count("")  # what the server adds to any text (its BOS)
        text: dict[int, str] = {}

        def full(h: int) -> str:
            if h not in text:
                text[h] = exact_prompt(count, base + block_tokens, "", random.Random(f"{seed}:{h}"))
            return text[h]

        out = []
        for target, ids in zip(P, blocks):
            head = " ".join(full(h) for h in ids[:-1])
            out.append(exact_prompt(count, int(target), head + " " if head else "", random.Random(f"{seed}:{ids[-1]}")))
        return out


# ----------------------------------------------------------------------------- what prompts share


@dataclass(frozen=True)
class SharedPrefix:
    """The leading tokens an anchor's prompts share, as the server's own tokenizer gives them.

    The prompt builders share text (a group's system prompt; for unique prompts nothing but the
    "Request <seed>-" their nonce opens with), and the text around the shared part is common too (each
    request's " Request <seed>-" follows its group's prefix), so the tokens two requests share are not
    the workload's stated `prefix_tokens`: they are counted here. `tokens`: what every request of a
    group shares with the others of its group (the longest common prefix of the group's token ids, plus
    the server's leading offset: BOS), the least over groups; None where not measured (`basis` says
    why). `by_group`: each group's figure. `stated`: the workload's prefix_tokens (0: unique prompts)."""

    tokens: int | None
    by_group: tuple[int, ...]
    stated: int
    basis: str

    def to_metrics(self) -> dict:
        return {
            "shared_prefix_tokens": self.tokens,
            "shared_prefix_by_group": list(self.by_group),
            "shared_prefix_stated": self.stated,
            "shared_prefix_line": self.line(),
        }

    def line(self) -> str:
        if self.tokens is None:
            return f"shared prefix not measured ({self.basis}); the stated {self.stated} tokens stand"
        groups = f", by group {', '.join(map(str, self.by_group))}" if len(self.by_group) > 1 else ""
        return f"prompts share {self.tokens} leading tokens ({self.basis}; stated {self.stated}{groups})"


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading ids two token sequences have in common."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def measure_shared_prefix(
    base_url: str,
    prompts: Sequence[str],
    groups: int = 1,
    stated: int = 0,
    *,
    api: str = "completions",
    model: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 60.0,
) -> SharedPrefix:
    """The tokens the requests of each group (request i in group i % groups, as build_shared_prompts and
    build_contract_prompts lay them out: one group for unique prompts) share, from the server's
    `/tokenize` ids of every prompt (SharedPrefix). Not measured where the server has no tokenizer
    endpoint, or for the chat API (its template's tokens around the text are not told apart from the
    text by /tokenize, so the shared count of the whole request is not known)."""
    if groups < 1:
        raise ValueError(f"measure_shared_prefix: groups={groups} must be >= 1")
    if api == "chat":
        return SharedPrefix(None, (), stated, "chat API: the template's tokens are not split from the text")
    with server_counter(base_url, api, model, headers, timeout_s) as count:
        if count._tokenize is None:
            return SharedPrefix(None, (), stated, "the server has no /tokenize")
        ids = [count.ids(p) for p in prompts]
        lead = count.offset  # completions: what the server adds before the text (BOS), shared by all
    by_group = []
    for g in range(groups):
        members = ids[g::groups]
        if len(members) >= 2:
            by_group.append(lead + min(common_prefix(a, b) for a, b in zip(members, members[1:])))
    if not by_group:
        return SharedPrefix(None, (), stated, "fewer than two requests in every group")
    return SharedPrefix(min(by_group), tuple(by_group), stated, "the server's /tokenize ids")
