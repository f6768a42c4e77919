"""llama.cpp server per arm: the xllamacpp wheel in a worker process, or a native `llama-server`.

Both run as a child process group (see base.py). Prompt caching and slot reuse are switched
off so no request is served from another's prefix work.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import httpx

from .base import ArmLaunch, Engine, EngineStartError, RunningEngine, ServerProcess, check_extra, free_port, last_line

KV_CACHE_TYPES = {"f16": "f16", "q8_0": "q8_0", "q4_0": "q4_0"}  # knobs.kv -> llama.cpp cache type
EXTRA_KEYS = ("binary", "n_batch", "ngram_size_n", "ngram_min_hits", "draft_n_min", "draft_p_min")
WORKER_MODULE = "pareto_atlas.measure.engines.llamacpp_worker"


def worker_params(launch: ArmLaunch) -> dict:
    """The arm as the plain dict the worker (and `llama_server_argv`) understand.
    Rejects knobs llama.cpp cannot serve, naming the field and what is allowed."""
    k, extra = launch.knobs, launch.extra
    check_extra("llamacpp", extra, EXTRA_KEYS)
    if k.kv not in KV_CACHE_TYPES:
        raise ValueError(f"knobs.kv: {k.kv!r} is not served by llamacpp; allowed: {', '.join(KV_CACHE_TYPES)}")
    if k.spec not in ("none", "ngram", "draft"):
        raise ValueError(f"knobs.spec: {k.spec!r} is not served by llamacpp; allowed: none, ngram, draft")
    if k.spec != "none" and k.spec_k < 1:
        raise ValueError(f"knobs.spec_k: {k.spec_k} must be >= 1 when spec={k.spec!r}")
    if k.spec == "draft" and not launch.draft_model_path:
        raise ValueError("draft_model_path: required when knobs.spec='draft'")
    if k.eviction != "none" or k.sparse_budget < 1.0:
        raise ValueError(
            "knobs.eviction/sparse_budget: llamacpp serves neither; allowed: eviction='none', sparse_budget=1"
        )
    if k.batching not in ("continuous", "static", "chunked"):
        raise ValueError(
            f"knobs.batching: {k.batching!r} is not served by llamacpp; allowed: continuous, static, chunked"
        )
    n_batch = extra.get("n_batch")
    if k.batching == "chunked" and k.chunk_tokens > 0:
        n_batch = k.chunk_tokens  # llama.cpp splits prompts into n_batch chunks between decode steps
    return {
        # llama.cpp splits -c among the slots; launch.n_ctx is per request, as vLLM's --max-model-len
        "model_path": launch.model_path,
        "n_ctx": launch.n_ctx * k.slots,
        "threads": launch.threads,
        "slots": k.slots,
        "kv": KV_CACHE_TYPES[k.kv],
        "flash_attn": k.kv != "f16",
        "cont_batching": k.batching != "static",
        "n_batch": n_batch,
        "spec": k.spec,
        "spec_k": k.spec_k,
        "draft_model_path": launch.draft_model_path,
        "ngram_size_n": extra.get("ngram_size_n"),
        "ngram_min_hits": extra.get("ngram_min_hits"),
        "draft_n_min": extra.get("draft_n_min"),
        "draft_p_min": extra.get("draft_p_min"),
    }


def llama_server_argv(params: Mapping, binary: str, port: int) -> list[str]:
    """Command line of a native llama-server for the same arm."""
    argv = [
        binary,
        "-m",
        params["model_path"],
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-c",
        str(params["n_ctx"]),
        "-t",
        str(params["threads"]),
        "--parallel",
        str(params["slots"]),
        "--no-cache-prompt",
        "--cache-reuse",
        "0",
        "--cache-ram",
        "0",
        "--no-cache-idle-slots",
        "--no-webui",
    ]
    if params["flash_attn"]:
        argv += ["-fa", "on", "-ctk", params["kv"], "-ctv", params["kv"]]
    if not params["cont_batching"]:
        argv += ["--no-cont-batching"]
    if params["n_batch"]:
        argv += ["-b", str(params["n_batch"]), "-ub", str(params["n_batch"])]
    if params["spec"] == "ngram":
        argv += ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-m", str(params["spec_k"])]
        if params["ngram_size_n"]:
            argv += ["--spec-ngram-simple-size-n", str(params["ngram_size_n"])]
        if params["ngram_min_hits"]:
            argv += ["--spec-ngram-simple-min-hits", str(params["ngram_min_hits"])]
    elif params["spec"] == "draft":
        argv += [
            "-md",
            params["draft_model_path"],
            "--spec-type",
            "draft-simple",
            "--spec-draft-n-max",
            str(params["spec_k"]),
        ]
        if params["draft_n_min"] is not None:
            argv += ["--spec-draft-n-min", str(params["draft_n_min"])]
        if params["draft_p_min"] is not None:
            argv += ["--spec-draft-p-min", str(params["draft_p_min"])]
    return argv


class LlamaCppRunning(RunningEngine):
    name = "llamacpp"
    # per request too: the server's prompt cache would otherwise reuse a slot's KV
    extra_body = {"cache_prompt": False}

    def __init__(self, server: ServerProcess, base_url: str, version: str, build: dict, params: dict, backend: str):
        self._server, self.base_url, self.version = server, base_url, version
        self.pid, self._build, self._params, self._backend = server.pid, build, params, backend

    def describe(self) -> dict:
        return {
            "engine": self.name,
            "version": self.version,
            "backend": self._backend,
            "build": self._build,
            "launch": self._params,
            "argv": self._server.argv,
        }

    def alive(self) -> bool:
        return self._server.alive()

    def why_dead(self) -> str:
        return self._server.why_dead()

    def stop(self) -> None:
        self._server.stop()
        self._server.cleanup()


def _read_ready_line(server: ServerProcess, timeout_s: float) -> dict:
    """The worker's one JSON line on stdout; early exit or silence becomes a one-line reason."""
    lines: queue.Queue = queue.Queue()
    stdout = server.proc.stdout

    def pump() -> None:  # keeps draining stdout after start so a chatty library never blocks the server
        try:
            for line in iter(stdout.readline, ""):
                lines.put(line)
        except (ValueError, OSError):  # closed by stop()
            pass
        lines.put("")

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.1)
        except queue.Empty:
            continue
        if not line:
            server.proc.wait(timeout=5)
            server.fail(f"llamacpp worker exited during start: {server.why_dead()}")
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue  # not ours: something else printed to stdout
        if not isinstance(msg, dict) or not ({"address", "error"} & set(msg)):
            continue
        if "error" in msg:
            server.fail(f"llamacpp: {last_line(server.log_path) or msg['error']}")
        return msg
    server.fail(f"llamacpp worker not ready after {timeout_s:g} s: {last_line(server.log_path)}")


class LlamaCppEngine(Engine):
    """`backend="auto"` uses a native llama-server when `binary` is given (or launch.extra
    "binary") or one is on PATH, else the xllamacpp wheel."""

    name = "llamacpp"

    def __init__(self, backend: str = "auto", binary: str | None = None):
        if backend not in ("auto", "wheel", "native"):
            raise ValueError(f"llamacpp backend: {backend!r} is not one of auto, wheel, native")
        self.backend, self.binary = backend, binary

    def _binary(self, launch: ArmLaunch) -> str | None:
        if self.backend == "wheel":
            return None
        found = launch.extra.get("binary") or self.binary or shutil.which("llama-server")
        if self.backend == "native" and not found:
            raise EngineStartError("llamacpp: backend 'native' needs llama-server on PATH or a binary path")
        return found

    def start(self, launch: ArmLaunch | Mapping) -> LlamaCppRunning:
        launch = ArmLaunch.coerce(launch)
        params = worker_params(launch)
        for field, path in (("model_path", launch.model_path), ("draft_model_path", launch.draft_model_path)):
            if path is not None and not Path(path).is_file():
                raise EngineStartError(f"llamacpp: {field} {str(path)!r} does not exist")
        binary = self._binary(launch)
        if binary:
            port = free_port()
            server = ServerProcess(llama_server_argv(params, binary, port))
            base_url = f"http://127.0.0.1:{port}"
            server.wait_healthy(base_url, launch.startup_timeout_s)
            version, build = _native_version(base_url, binary), {"binary": binary}
            backend = "native"
        else:
            argv = [sys.executable, "-m", WORKER_MODULE, json.dumps(params)]
            env = {"PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
            server = ServerProcess(argv, env=env, stdout_pipe=True)
            ready = _read_ready_line(server, launch.startup_timeout_s)
            base_url = ready["address"] if ready["address"].startswith("http") else f"http://{ready['address']}"
            server.wait_healthy(base_url, launch.startup_timeout_s)
            version, build, backend = f"xllamacpp {ready['version']}", ready.get("build_info", {}), "xllamacpp"
        return LlamaCppRunning(server, base_url, version, build, params, backend)


def _native_version(base_url: str, binary: str) -> str:
    try:
        props = httpx.get(f"{base_url}/props", timeout=5).json()
        return f"llama-server {props.get('build_info', 'unknown')}"
    except (httpx.HTTPError, ValueError):
        return f"llama-server ({binary})"
