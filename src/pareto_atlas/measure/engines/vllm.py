"""vLLM per arm: `vllm serve` with the paper's knobs, as a child process group.

The knob -> flag mapping is a pure function (`vllm_argv`) so it is tested without a GPU.
GPU memory is read through NVML by `measure.memory.PeakMemorySampler` when a GPU exists.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path

import httpx

from .base import ArmLaunch, Engine, EngineStartError, RunningEngine, ServerProcess, check_extra, free_port

WEIGHTS = {"F16": ["--dtype", "float16"], "BF16": ["--dtype", "bfloat16"],
           "FP8": ["--quantization", "fp8"], "AWQ4": ["--quantization", "awq"]}
KV = {"f16": ["--kv-cache-dtype", "auto"], "fp8": ["--kv-cache-dtype", "fp8"]}
EXTRA_KEYS = ("binary", "gpu_memory_utilization", "seed", "max_num_batched_tokens", "prompt_lookup_max",
              "prompt_lookup_min", "served_model_name", "tensor_parallel_size", "enforce_eager", "dtype")


def speculative_config(launch: ArmLaunch) -> dict | None:
    k, extra = launch.knobs, launch.extra
    if k.spec == "none":
        return None
    if k.spec_k < 1:
        raise ValueError(f"knobs.spec_k: {k.spec_k} must be >= 1 when spec={k.spec!r}")
    if k.spec == "ngram":
        return {"method": "ngram", "num_speculative_tokens": k.spec_k,
                "prompt_lookup_max": int(extra.get("prompt_lookup_max", 4)),
                "prompt_lookup_min": int(extra.get("prompt_lookup_min", 1))}
    if not launch.draft_model_path:
        raise ValueError(f"draft_model_path: required when knobs.spec={k.spec!r}")
    cfg = {"model": launch.draft_model_path, "num_speculative_tokens": k.spec_k}
    if k.spec == "eagle":
        cfg = {"method": "eagle", **cfg}
    return cfg


def vllm_argv(launch: ArmLaunch, port: int, binary: str = "vllm") -> list[str]:
    """`vllm serve` command line for the arm; knobs vLLM cannot serve are errors."""
    k, extra = launch.knobs, launch.extra
    check_extra("vllm", extra, EXTRA_KEYS)
    if k.weights not in WEIGHTS:
        raise ValueError(f"knobs.weights: {k.weights!r} is not served by vllm; allowed: {', '.join(WEIGHTS)}")
    if k.kv not in KV:
        raise ValueError(f"knobs.kv: {k.kv!r} is not served by vllm; allowed: {', '.join(KV)}")
    if k.batching not in ("continuous", "chunked", "slo"):
        raise ValueError(f"knobs.batching: {k.batching!r} is not served by vllm; allowed: continuous, chunked, slo")
    if k.eviction != "none" or k.sparse_budget < 1.0:
        raise ValueError("knobs.eviction/sparse_budget: vllm serves neither; allowed: eviction='none', sparse_budget=1")
    argv = [binary, "serve", launch.model_path, "--host", "127.0.0.1", "--port", str(port),
            "--served-model-name", served_name(launch),
            "--max-model-len", str(launch.n_ctx), "--max-num-seqs", str(k.slots),
            "--seed", str(int(extra.get("seed", 0))),
            "--gpu-memory-utilization", str(float(extra.get("gpu_memory_utilization", 0.9))),
            # a prefix cache would serve one request from another's work
            "--no-enable-prefix-caching"]
    argv += WEIGHTS[k.weights]
    if "dtype" in extra:  # activation dtype of a quantized model; F16/BF16 weights set it themselves
        if k.weights in ("F16", "BF16"):
            raise ValueError("launch.extra.dtype: only with weights FP8 or AWQ4 (F16/BF16 already set the dtype)")
        argv += ["--dtype", str(extra["dtype"])]
    argv += KV[k.kv]
    if k.batching in ("chunked", "slo"):
        argv += ["--enable-chunked-prefill"]
    batched = extra.get("max_num_batched_tokens") or (k.chunk_tokens if k.batching in ("chunked", "slo") else 0)
    if batched:
        argv += ["--max-num-batched-tokens", str(int(batched))]
    spec = speculative_config(launch)
    if spec is not None:
        argv += ["--speculative-config", json.dumps(spec, sort_keys=True)]
    if extra.get("tensor_parallel_size"):
        argv += ["--tensor-parallel-size", str(int(extra["tensor_parallel_size"]))]
    if extra.get("enforce_eager"):
        argv += ["--enforce-eager"]
    return argv


def served_name(launch: ArmLaunch) -> str:
    return str(launch.extra.get("served_model_name") or Path(launch.model_path).name or "model")


class VllmRunning(RunningEngine):
    name = "vllm"

    def __init__(self, server: ServerProcess, base_url: str, version: str, model: str):
        self._server, self.base_url, self.version, self.model = server, base_url, version, model
        self.pid = server.pid

    def describe(self) -> dict:
        return {"engine": self.name, "version": self.version, "argv": self._server.argv}

    def alive(self) -> bool:
        return self._server.alive()

    def stop(self) -> None:
        self._server.stop(grace_s=20.0)  # vLLM frees GPU memory on SIGTERM; give it time
        self._server.cleanup()


class VllmEngine(Engine):
    name = "vllm"

    def __init__(self, binary: str | None = None):
        self.binary = binary

    def start(self, launch: ArmLaunch | Mapping) -> VllmRunning:
        launch = ArmLaunch.coerce(launch)
        binary = launch.extra.get("binary") or self.binary or shutil.which("vllm")
        if not binary:
            raise EngineStartError("vllm: no `vllm` executable on PATH (pip install vllm on a GPU host) and no binary given")
        local = launch.model_path.startswith(("/", ".", "~"))
        if not launch.model_path or (local and not Path(launch.model_path).expanduser().exists()):
            raise EngineStartError(f"vllm: model_path {launch.model_path!r} does not exist")
        port = free_port()
        server = ServerProcess(vllm_argv(launch, port, binary))
        base_url = f"http://127.0.0.1:{port}"
        server.wait_healthy(base_url, launch.startup_timeout_s)
        try:
            version = f"vllm {httpx.get(base_url + '/version', timeout=5).json().get('version', 'unknown')}"
        except (httpx.HTTPError, ValueError):
            version = "vllm unknown"
        return VllmRunning(server, base_url, version, served_name(launch))
