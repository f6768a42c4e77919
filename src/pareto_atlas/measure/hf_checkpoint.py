"""A Hugging Face checkpoint vLLM serves: a directory, or a model id in the host's Hugging Face
cache, and its weight format as its own config.json's `quantization_config` states it.

Read on the host that measures (through Ray, the GPU node): nothing is downloaded. The format maps
onto the simulator's weight knobs: AWQ and GPTQ 4-bit and compressed-tensors W4A16 are 4-bit integer
weights with 16-bit activations (vLLM runs all three on the same Marlin-style kernels: AWQ4), FP8
and compressed-tensors float 8-bit are FP8; an unquantized checkpoint serves at its dtype, or at
FP8 when the arm asks vLLM to quantize it at load.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pareto_atlas.measure.weights import ModelError

UNQUANTIZED_SERVES = ("F32", "F16", "BF16", "FP8")  # FP8: vLLM's online quantization of float weights


class CheckpointError(ModelError, ValueError):
    """A checkpoint is missing, unreadable, or stored in a format other than the arm says."""


_DTYPES = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}


def hub_cache() -> Path:
    """The Hugging Face hub cache as its own tools find it (HF_HUB_CACHE, HF_HOME/hub, ~/.cache)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface").expanduser()
    return home / "hub"


def _is_path(ref: str) -> bool:
    return ref.startswith(("/", ".", "~")) or Path(ref).expanduser().is_dir()


def find_checkpoint(ref: str) -> Path | None:
    """The directory `ref` names (a path, or an `org/name` id in this host's cache: the snapshot
    its refs/main points at, else the newest), or None when it is not on this host."""
    if _is_path(ref):
        p = Path(ref).expanduser()
        return p if (p / "config.json").is_file() else None
    repo = hub_cache() / ("models--" + ref.replace("/", "--"))
    snaps = repo / "snapshots"
    if not snaps.is_dir():
        return None
    main = repo / "refs" / "main"
    if main.is_file() and (snaps / main.read_text().strip() / "config.json").is_file():
        return snaps / main.read_text().strip()
    found = sorted((d for d in snaps.iterdir() if (d / "config.json").is_file()), key=lambda d: d.stat().st_mtime)
    return found[-1] if found else None


def resolve_checkpoint(ref: str) -> Path:
    """`find_checkpoint`, or a one-line error saying where it looked."""
    found = find_checkpoint(ref)
    if found is not None:
        return found
    if _is_path(ref):
        raise CheckpointError(f"model.hf_dir: {ref} is not a Hugging Face model directory (no config.json)")
    raise CheckpointError(
        f"model.hf_dir: {ref!r} is not in this host's Hugging Face cache ({hub_cache()}); "
        f"download it there first, or give a local directory"
    )


def read_config(path: Path) -> dict:
    try:
        return json.loads((path / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"model.hf_dir: {path}/config.json is not readable JSON ({type(e).__name__})") from None


def checkpoint_format(config: dict) -> tuple[str | None, str]:
    """(the weight knob the checkpoint is stored in, or None for float weights; what its config says)."""
    qc = config.get("quantization_config") or (config.get("text_config") or {}).get("quantization_config")
    if not qc:
        dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
        return None, f"unquantized {dtype}"
    method = str(qc.get("quant_method", "")).lower()
    bits = qc.get("bits", qc.get("w_bit"))
    if method in ("awq", "gptq") and int(bits or 4) == 4:
        return "AWQ4", f"{method} {int(bits or 4)}-bit"
    if method == "fp8":
        return "FP8", "fp8"
    if method == "compressed-tensors":
        groups = list((qc.get("config_groups") or {}).values())
        w = (groups[0] or {}).get("weights") or {} if groups else {}
        nb, kind = w.get("num_bits"), str(w.get("type", ""))
        if nb == 8 and kind == "float":
            return "FP8", "compressed-tensors float 8-bit (FP8)"
        if nb == 4 and kind == "int":
            return "AWQ4", "compressed-tensors int 4-bit (W4A16)"
        raise CheckpointError(
            f"model.hf_dir: compressed-tensors weights of {nb} bits ({kind or '?'}) have no weight knob; "
            f"served formats: FP8 (float 8-bit), AWQ4 (int 4-bit)"
        )
    raise CheckpointError(
        f"model.hf_dir: quantization_config.quant_method {method!r} ({bits} bits) has no weight knob; "
        f"served: awq or gptq 4-bit (AWQ4), fp8 and compressed-tensors (FP8, AWQ4), or float weights"
    )


def arm_weights(config: dict, typed: str | None, where: str) -> str:
    """The weight knob an arm serves this checkpoint at: the checkpoint's own when the arm types none,
    else the typed one, which must agree with it (a one-line error naming `where` when not)."""
    stored, said = checkpoint_format(config)
    if typed is None:
        if stored:
            return stored
        dtype = said.removeprefix("unquantized ")
        return _DTYPES.get(dtype, "BF16")
    if stored and typed != stored:
        raise CheckpointError(
            f"{where}: {typed!r} disagrees with the checkpoint's quantization_config ({said}: {stored}); "
            f"leave weights out or type {stored!r}"
        )
    if not stored and typed not in UNQUANTIZED_SERVES:
        raise CheckpointError(
            f"{where}: {typed!r} needs a checkpoint stored that way; this one is {said}, "
            f"which serves as {', '.join(UNQUANTIZED_SERVES)}"
        )
    return typed


def fill_arm_weights(data: dict) -> dict:
    """A study's raw data with each vLLM arm's weights read from (or checked against) its checkpoint,
    when the checkpoint is on this host; an arm that types none needs it here."""
    model, engine = data.get("model") or {}, data.get("engine") or {}
    ref = model.get("hf_dir") if isinstance(model, dict) else None
    if (
        not isinstance(engine, dict)
        or engine.get("name") != "vllm"
        or not ref
        or not isinstance(data.get("arms"), list)
    ):
        return data
    path = find_checkpoint(str(ref))
    arms = []
    for i, a in enumerate(data["arms"]):
        if not isinstance(a, dict):
            arms.append(a)
            continue
        where = f"arms.{a.get('name', i)}.weights"
        if path is None:
            if "weights" not in a:
                raise CheckpointError(
                    f"{where}: the checkpoint {ref!r} is not on this host, so its format cannot be "
                    f"read here; type it (AWQ4, FP8, BF16, F16, F32)"
                )
            arms.append(a)
            continue
        arms.append({**a, "weights": arm_weights(read_config(path), a.get("weights"), where)})
    return {**data, "arms": arms}
