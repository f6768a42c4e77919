"""What the requests of a workload share: a system prompt, a conversation's history, prefix blocks.

A workload states it (DESIGN: "what requests share"); the load generator then builds prompts that
share exactly that, the simulator's block cache hits exactly that, and nothing else is shared (every
other token stays unique, so a cache cannot inflate a result beyond what the workload states).

Requests are laid out as sessions: a session of `turns` turns, turn t's prompt the whole history so
far (turn 0's prompt, then each turn's answer and `turn_tokens` new user tokens); single-turn
requests are sessions of one turn. Session s opens with the shared prefix of group s % groups.
`width` sessions run side by side (as `width` closed-loop clients would): the requests go turn 0 of
sessions 0..width-1, then their turn 1, and so on, so a turn always comes after its history.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from functools import lru_cache

# Shipped sharing patterns, relative to the workload's prompt: the shared prefix as a share of the
# prompt (a system prompt, an agent's tool preamble), how many distinct prefixes, turns per session.
PRESETS: dict[str, dict[str, float | int]] = {
    "system-prompt": {"prefix_share": 0.5, "groups": 1, "turns": 1},
    "agent-shared-preamble": {"prefix_share": 0.75, "groups": 4, "turns": 1},
    "chat-multiturn": {"prefix_share": 0.25, "groups": 1, "turns": 4},
}
# Tokens per block of the simulated cache and of the blocks a synthetic workload names: vLLM's default
# block size (a hit counts whole blocks); llama.cpp reuses a slot's prompt to the token, within 15 of this.
BLOCK_TOKENS = 16


@dataclass(frozen=True)
class Sharing:
    """prefix_tokens: leading prompt tokens common to every session of a group; groups: distinct
    prefixes; turns: turns per session; turn_tokens: new user tokens of each later turn (0: turn
    0's own new tokens, prompt - prefix)."""

    prefix_tokens: int = 0
    groups: int = 1
    turns: int = 1
    turn_tokens: int = 0

    def __post_init__(self) -> None:
        for name, lo in (("prefix_tokens", 0), ("groups", 1), ("turns", 1), ("turn_tokens", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"share.{name}: {v!r} is not allowed: an integer >= {lo}")

    def check(self, prompt_tokens: int) -> None:
        """One-line ValueError where the pattern does not fit a prompt of `prompt_tokens`."""
        if self.prefix_tokens >= prompt_tokens:
            raise ValueError(
                f"share.prefix_tokens: {self.prefix_tokens} is not allowed: fewer than the prompt's "
                f"{prompt_tokens} tokens (each request keeps at least one token of its own)"
            )

    def new_tokens(self, prompt_tokens: int) -> int:
        """New user tokens of each turn after the first."""
        return self.turn_tokens or prompt_tokens - self.prefix_tokens

    def longest(self, prompt_tokens: int, output_tokens: int) -> int:
        """The prompt of a session's last turn: the longest one."""
        return prompt_tokens + (self.turns - 1) * (output_tokens + self.new_tokens(prompt_tokens))


def sharing(value: str | dict | Sharing | None, prompt_tokens: int) -> Sharing | None:
    """A workload's `share` setting (a preset name, a table of Sharing's fields with prefix_share as
    an alternative to prefix_tokens, or a Sharing) as a Sharing checked against the prompt."""
    if value is None or isinstance(value, Sharing):
        if value is not None:
            value.check(prompt_tokens)
        return value
    if isinstance(value, str):
        if value not in PRESETS:
            raise ValueError(
                f"share: {value!r} is not a shipped pattern; shipped: {', '.join(PRESETS)} "
                f"(or a table of prefix_tokens, groups, turns, turn_tokens)"
            )
        value = PRESETS[value]
    if not isinstance(value, dict):
        raise ValueError(f"share: a preset name or a table, not {type(value).__name__}")
    d = dict(value)
    unknown = set(d) - {"prefix_tokens", "prefix_share", "groups", "turns", "turn_tokens"}
    if unknown:
        raise ValueError(
            f"share.{sorted(unknown)[0]}: unknown field; allowed: prefix_tokens, prefix_share, groups, "
            f"turns, turn_tokens"
        )
    if "prefix_share" in d:
        f = d.pop("prefix_share")
        if "prefix_tokens" in d:
            raise ValueError("share.prefix_share: give prefix_tokens or prefix_share, not both")
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0.0 <= f < 1.0:
            raise ValueError(f"share.prefix_share: {f!r} is not allowed: a fraction of the prompt in [0, 1)")
        d["prefix_tokens"] = int(f * prompt_tokens)
    s = Sharing(**d)
    s.check(prompt_tokens)
    return s


@dataclass(frozen=True)
class Requests:
    """The requests of a sharing workload, in send order: their lengths, and per request the ids
    of its full blocks of `block` tokens (prompt then answer; equal ids are equal tokens)."""

    prompt: tuple[int, ...]
    output: tuple[int, ...]
    blocks: tuple[tuple[int, ...], ...]
    session: tuple[int, ...]
    turn: tuple[int, ...]
    block: int


def _order(n: int, turns: int, width: int) -> list[tuple[int, int]]:
    """(session, turn) of each of n requests: `width` sessions side by side, turn by turn."""
    out: list[tuple[int, int]] = []
    base = 0
    while len(out) < n:
        for t in range(turns):
            for s in range(base, base + width):
                out.append((s, t))
        base += width
    return out[:n]


def _segments(s: Sharing, session: int, turn: int, prompt: int, output: int) -> list[tuple[str, int]]:
    """A request's tokens as (segment id, length): the group's prefix, then each turn's user tokens and
    answer up to this turn's own user tokens and answer."""
    segs = [(f"p{session % s.groups}", s.prefix_tokens)] if s.prefix_tokens else []
    for t in range(turn + 1):
        segs.append((f"u{session}.{t}", prompt - s.prefix_tokens if t == 0 else s.new_tokens(prompt)))
        segs.append((f"a{session}.{t}", output))
    return segs


def as_measured(share: Sharing, measured: float | None, prompt_tokens: int) -> tuple[Sharing, str]:
    """The pattern an anchor's prompts really had: its prefix the tokens the server's tokenizer counted
    them sharing (measure.contract.measure_shared_prefix: the stated prefix's text plus what follows it
    alike in every request, " Request <seed>-"), and a line saying what the prefix rests on. An anchor
    stored before that count was recorded (or whose server had no /tokenize) keeps the stated prefix,
    and the line says so."""
    if measured is None or measured != measured:
        return share, f"shared prefix {share.prefix_tokens} tokens as stated (not measured for this anchor)"
    t = int(measured)
    if t != measured or not 0 <= t < prompt_tokens:
        raise ValueError(f"shared_prefix_tokens: {measured!r} is not allowed: an integer in 0..{prompt_tokens - 1}")
    line = f"shared prefix {t} tokens as the server's tokenizer counted them (stated {share.prefix_tokens})"
    return replace(share, prefix_tokens=t), line


def block_ids(segments: list[tuple[str, int]], block: int) -> tuple[int, ...]:
    """Ids of the full blocks of a token sequence given as segments: a block's id hashes every segment
    that starts before the block's end, and that end, so two blocks are equal when their tokens and
    everything before them are (a prefix cache's chained block hashes)."""
    out = []
    h = hashlib.blake2b(digest_size=8)
    end = 0
    starts = []
    for sid, length in segments:
        starts.append((end, sid))
        end += length
    i = 0
    for b_end in range(block, end + 1, block):
        while i < len(starts) and starts[i][0] < b_end:
            h.update(starts[i][1].encode() + b"|")
            i += 1
        g = h.copy()
        g.update(str(b_end).encode())
        out.append(int.from_bytes(g.digest(), "little") >> 1)
    return tuple(out)


@lru_cache(maxsize=64)
def requests(s: Sharing, prompt: int, output: int, n: int, width: int = 1, block: int = BLOCK_TOKENS) -> Requests:
    """The first n requests of the pattern (see the module's doc), `width` sessions side by side."""
    order = _order(n, s.turns, max(1, width))
    prompts, blocks = [], []
    for sess, t in order:
        segs = _segments(s, sess, t, prompt, output)
        prompts.append(sum(length for _, length in segs[:-1]))
        blocks.append(block_ids(segs, block))
    return Requests(
        tuple(prompts), (output,) * n, tuple(blocks), tuple(o[0] for o in order), tuple(o[1] for o in order), block
    )
