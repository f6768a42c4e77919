"""A tiny OpenAI-compatible streaming server for tests and the harness benchmark.

Raw asyncio HTTP/1.1 on its own thread and loop, so it costs the load generator as little
as possible (the engine must not be the bottleneck when measuring the generator). A "token"
is a whitespace-separated word; the stream mimics llama.cpp/vLLM: a role-only chunk (chat),
an optional empty chunk, one chunk per token, a usage-only chunk, then [DONE]. It names the model
it serves on /v1/models, a version on /version, and can fail requests (HTTP 500) on purpose.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class FakeBehaviour:
    prefill_s: float = 0.0  # delay before the first token
    token_s: float = 0.0  # delay between tokens
    extra_completion_tokens: int = 0  # > 0 reports more tokens than asked: a contract violator
    empty_first_chunk: bool = True  # an empty-text chunk before the first token (must not count as TTFT)
    chat_template_tokens: int = 3  # what a chat template adds to the prompt count
    model_id: str = "fake-model"  # the id /v1/models lists
    tokenize: bool = True  # False: no /tokenize, so prompts are counted from usage probes
    fail_every: int = 0  # > 0: every k-th streamed completion answers HTTP 500 (2: every other)
    # > 0: a prefix cache of blocks of this many tokens, as vLLM's: a prompt's cached tokens are its
    # longest common prefix with an earlier prompt in whole blocks (never all of it), reported as
    # usage.prompt_tokens_details.cached_tokens (0 included, as vLLM 0.32 with --enable-prompt-tokens-details)
    cache_block: int = 0
    bos_tokens: int = 0  # what a completion's usage counts before the text (a BOS), as /tokenize leaves it out


class FakeOpenAIServer:
    def __init__(self, behaviour: FakeBehaviour = FakeBehaviour()):
        self.behaviour = behaviour
        self.requests = 0
        self.streamed = 0  # streamed completion requests (what fail_every counts)
        self.seen: list[list[str]] = []  # prompts served, in words (what cache_block reuses)
        self.vocab: dict[str, int] = {}  # a word's token id on /tokenize: its order of first sight
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-openai", daemon=True)
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=1024))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    def start(self) -> "FakeOpenAIServer":
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        async def close() -> None:
            self._server.close()
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in others:
                t.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # keep-alive: many requests per connection
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                length = next(
                    (int(s.split(":", 1)[1]) for s in lines[1:] if s.lower().startswith("content-length:")), 0
                )
                body = json.loads(await reader.readexactly(length)) if length else {}
                self.requests += 1
                await self._route(method, path, body, writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    @staticmethod
    def _send_json(writer: asyncio.StreamWriter, obj: dict, status: int = 200) -> None:
        data = json.dumps(obj).encode()
        writer.write(
            f"HTTP/1.1 {status} {'OK' if status < 400 else 'Error'}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
            + data
        )

    async def _route(self, method: str, path: str, body: dict, writer: asyncio.StreamWriter) -> None:
        b = self.behaviour
        if path == "/health":
            self._send_json(writer, {"status": "ok"})
        elif path == "/v1/models":
            self._send_json(
                writer,
                {
                    "object": "list",
                    "data": [{"id": b.model_id, "object": "model", "owned_by": "fakeserver", "max_model_len": 4096}],
                },
            )
        elif path == "/version":
            self._send_json(writer, {"version": "fakeserver 1"})
        elif path == "/tokenize" and b.tokenize:
            words = body.get("content", "").split()
            self._send_json(writer, {"tokens": [self.vocab.setdefault(w, len(self.vocab)) for w in words]})
        elif path in ("/v1/completions", "/v1/chat/completions"):
            chat = "chat" in path
            text = body["messages"][-1]["content"] if chat else body["prompt"]
            usage = {
                "prompt_tokens": len(text.split()) + (b.chat_template_tokens if chat else b.bos_tokens),
                "completion_tokens": int(body.get("max_tokens", 16)) + b.extra_completion_tokens,
            }
            if b.cache_block:
                usage["prompt_tokens_details"] = {"cached_tokens": self._cached(text.split(), b.cache_block)}
            self.streamed += bool(body.get("stream"))
            if not body.get("stream"):
                self._send_json(writer, {"choices": [{"text": "x"}], "usage": usage})
            elif b.fail_every and self.streamed % b.fail_every == 0:
                self._send_json(writer, {"error": {"message": "injected failure", "type": "server_error"}}, status=500)
            else:
                await self._stream(writer, chat, usage)
        else:
            self._send_json(writer, {"error": f"no route {path}"}, status=404)
        await writer.drain()

    def _cached(self, words: list[str], block: int) -> int:
        """Tokens of `words` an earlier prompt already holds, in whole blocks, the last token never
        (the engine computes it to sample); the prompt is then kept for later ones."""
        common = max(
            (next((i for i, (a, b) in enumerate(zip(w, words)) if a != b), min(len(w), len(words))) for w in self.seen),
            default=0,
        )
        self.seen.append(words)
        return min(common, len(words) - 1) // block * block

    async def _stream(self, writer: asyncio.StreamWriter, chat: bool, usage: dict) -> None:
        b = self.behaviour
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")

        def event(obj: dict | str) -> None:
            data = f"data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n".encode()
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

        def tok(s: str) -> dict:
            return (
                {"choices": [{"index": 0, "delta": {"content": s}}]} if chat else {"choices": [{"index": 0, "text": s}]}
            )

        if chat:
            event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]})
        if b.empty_first_chunk:
            event(tok(""))
        await writer.drain()
        if b.prefill_s:
            await asyncio.sleep(b.prefill_s)
        for i in range(usage["completion_tokens"]):
            if i and b.token_s:
                await asyncio.sleep(b.token_s)
            event(tok(f" t{i}"))
            await writer.drain()
        event(
            {
                "choices": [],
                "usage": usage,
                "timings": {"prompt_ms": b.prefill_s * 1e3, "predicted_per_token_ms": b.token_s * 1e3},
            }
        )
        event("[DONE]")
        writer.write(b"0\r\n\r\n")
