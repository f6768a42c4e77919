"""Attach to any running OpenAI-compatible endpoint (nothing is launched or stopped).

The API key comes from an environment variable whose *name* is configured; the key itself is
read at request time and never stored on an object, logged, or put in describe()/errors.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import httpx

from ..contract import redact
from .base import ArmLaunch, Engine, EngineStartError, RunningEngine, check_extra

EXTRA_KEYS = ("base_url", "model", "api_key_env", "check")


class OpenAIRunning(RunningEngine):
    name = "openai"
    pid = None

    def __init__(self, base_url: str, model: str | None, api_key_env: str | None, version: str):
        self.base_url, self.model, self.api_key_env, self.version = base_url, model, api_key_env, version

    def headers(self) -> dict[str, str]:
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        return {"Authorization": f"Bearer {key}"} if key else {}

    def describe(self) -> dict:
        return {
            "engine": self.name,
            "version": self.version,
            "base_url": self.base_url,
            "model": self.model,
            "api_key_env": self.api_key_env,
        }  # the variable's name only

    def stop(self) -> None:
        pass  # attached, not owned


class OpenAIEngine(Engine):
    name = "openai"

    def __init__(self, base_url: str | None = None, model: str | None = None, api_key_env: str | None = None):
        self.base_url, self.model, self.api_key_env = base_url, model, api_key_env

    def start(self, launch: ArmLaunch | Mapping | None = None) -> OpenAIRunning:
        launch = ArmLaunch.coerce(launch or {})
        check_extra("openai", launch.extra, EXTRA_KEYS)
        base_url = str(launch.extra.get("base_url") or self.base_url or "").rstrip("/")
        if not base_url.startswith(("http://", "https://")):
            raise EngineStartError(f"openai: base_url {base_url!r} must start with http:// or https://")
        base_url = base_url.removesuffix("/v1")  # requests add /v1/... themselves
        model = launch.extra.get("model") or self.model
        key_env = launch.extra.get("api_key_env") or self.api_key_env
        if key_env and key_env not in os.environ:
            raise EngineStartError(f"openai: api_key_env names {key_env!r}, which is not set in the environment")
        running = OpenAIRunning(base_url, model, key_env, "unknown")
        if launch.extra.get("check", True):
            running.version = _probe(running)
        return running


def _probe(running: OpenAIRunning) -> str:
    """Check the endpoint answers /v1/models; returns what it says it serves."""
    headers = running.headers()
    secrets = tuple(v.split()[-1] for v in headers.values())
    try:
        r = httpx.get(f"{running.base_url}/v1/models", headers=headers, timeout=10)
    except httpx.HTTPError as e:
        raise EngineStartError(
            redact(f"openai: cannot reach {running.base_url}: {type(e).__name__}: {e}", secrets)
        ) from None
    if r.status_code >= 400:
        raise EngineStartError(
            redact(f"openai: {running.base_url}/v1/models answered HTTP {r.status_code}: {r.text[:160]}", secrets)
        )
    try:
        ids = [m.get("id") for m in r.json().get("data", [])]
    except (ValueError, AttributeError):
        ids = []
    if running.model is None and ids:
        running.model = ids[0]
    owner = (r.json().get("data") or [{}])[0].get("owned_by", "") if ids else ""
    return f"{owner or 'openai-compatible'} serving {', '.join(map(str, ids[:3])) or '?'}"
