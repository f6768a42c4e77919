"""What machine a measurement ran on, as the machine itself reports it: recorded with every anchor
beside the hardware card the study named (the card is the study's claim, this is the evidence).

The host: CPU, cores, memory, and its GPUs as `nvidia-smi` reports them (name, memory, driver).
An attached endpoint: what the server says of itself on /v1/models, /version and /metrics.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from functools import lru_cache

GPU_QUERY = "name,memory.total,driver_version"


def gpus_from_smi(text: str) -> list[dict]:
    """`nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader,nounits` lines."""
    out = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3:
            continue
        try:
            mem_mib = float(parts[1])
        except ValueError:
            mem_mib = None
        out.append({"name": parts[0], "memory_gib": round(mem_mib / 1024, 1) if mem_mib else None, "driver": parts[2]})
    return out


def host_gpus() -> list[dict]:
    """This host's GPUs ([] when it has none, or no nvidia-smi to say so)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        res = subprocess.run(
            [smi, f"--query-gpu={GPU_QUERY}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return gpus_from_smi(res.stdout) if res.returncode == 0 else []


@lru_cache(maxsize=1)
def host_description() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gib = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    mem_gib = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    gpus = host_gpus()
    return {
        "hostname": platform.node(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "mem_gib": mem_gib,
        "os": platform.platform(),
        "python": platform.python_version(),
        "gpu": gpus[0]["name"] if gpus else None,
        "gpus": gpus,
    }


# /metrics lines worth keeping: the engine's build and model facts, not its counters
_INFO_METRIC = re.compile(r"^(\w*(?:info|version|cache_config)\w*)\{(.*)\}\s", re.M)


def endpoint_description(base_url: str, headers: dict | None = None, timeout_s: float = 5.0) -> dict:
    """What an OpenAI-compatible server says of itself: its models (/v1/models: id, owner, max
    length), its version (/version, vLLM and others), and the labels of its info gauges (/metrics);
    each part only where the server answers it."""
    import httpx

    out: dict = {"base_url": base_url}
    try:
        with httpx.Client(base_url=base_url, headers=headers or {}, timeout=timeout_s) as c:
            r = c.get("/v1/models")
            if r.status_code < 400:
                out["models"] = [
                    {k: m.get(k) for k in ("id", "owned_by", "max_model_len", "root") if m.get(k) is not None}
                    for m in (r.json().get("data") or [])
                    if isinstance(m, dict)
                ][:8]
            r = c.get("/version")
            if r.status_code < 400:
                try:
                    out["version"] = r.json()
                except ValueError:
                    out["version"] = r.text[:200]
            r = c.get("/metrics")
            if r.status_code < 400:
                info = {name: labels[:400] for name, labels in _INFO_METRIC.findall(r.text)}
                if info:
                    out["metrics_info"] = dict(list(info.items())[:10])
    except (httpx.HTTPError, ValueError, AttributeError):
        pass  # what answered is kept; an endpoint owes us none of these
    return out
