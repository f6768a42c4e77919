"""Engines behind one interface, chosen by name: `get_engine("llamacpp")`.

Each engine lives in its own module and is imported only when asked for, so `vllm` costs
nothing on a machine without it.
"""

from __future__ import annotations

import importlib

from .base import ArmLaunch, Engine, EngineStartError, RunningEngine

# name -> (module, class)
ENGINES = {
    "llamacpp": ("llamacpp", "LlamaCppEngine"),
    "vllm": ("vllm", "VllmEngine"),
    "openai": ("openai", "OpenAIEngine"),
}


def get_engine(name: str, **options) -> Engine:
    """The engine registered as `name`; `options` go to its constructor."""
    if name not in ENGINES:
        raise ValueError(f"Unsupported engine: {name!r}. Supported engines: {', '.join(ENGINES)}")
    module, cls = ENGINES[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)(**options)


def option_keys(name: str) -> tuple[str, ...]:
    """The engine-specific launch options (`ArmLaunch.extra` keys) engine `name` takes."""
    if name not in ENGINES:
        raise ValueError(f"Unsupported engine: {name!r}. Supported engines: {', '.join(ENGINES)}")
    return tuple(importlib.import_module(f"{__name__}.{ENGINES[name][0]}").EXTRA_KEYS)


__all__ = ["ENGINES", "ArmLaunch", "Engine", "EngineStartError", "RunningEngine", "get_engine", "option_keys"]
