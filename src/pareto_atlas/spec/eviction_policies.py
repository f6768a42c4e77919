"""The KV-eviction policies a study may name ([eviction] policies), canonical and as users write them.
The measured policies themselves are quality.eviction.policies'."""

from __future__ import annotations

EVICTING = ("streaming", "h2o", "snapkv", "pyramidkv")
POLICIES = ("none", *EVICTING, "topk")
# Names users write for the same policy. The canonical evicting names are also the atlas's
# `Knobs.eviction` values, so a measured point and a simulated configuration meet under one name;
# `topk` is what the atlas's `Knobs.sparse_budget` reads. SparQ and Quest are not aliases of
# `topk`: they approximate its selection, and measuring the oracle under their names would flatter them.
ALIASES = {"streamingllm": "streaming", "pyramid": "pyramidkv", "sparse": "topk", "top-k": "topk"}


def canonical_policy(name: str) -> str:
    """The canonical name of a measured policy (aliases resolved); one-line ValueError otherwise."""
    allowed = [p for p in POLICIES if p != "none"]
    canon = ALIASES.get(name.strip().lower(), name.strip().lower())
    if canon not in allowed:
        alias = ", ".join(f"{a} = {c}" for a, c in ALIASES.items())
        raise ValueError(f"{name!r} is not one of {', '.join(allowed)} ({alias})")
    return canon
