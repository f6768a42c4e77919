"""The study's model as the Hugging Face directory vLLM reads: the source GGUF converted once in
vLLM's venv (measure/gguf_to_hf.py), cached by the GGUF's sha256, or a local directory the study names.

Converted to float32: dequantized Q4_K_M values are exact in float32 and are rounded in bf16 or
fp16, so float32 is the only lossless copy. An arm asking for BF16 or F16 lets vLLM cast at load.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from pareto_atlas.measure.weights import ModelError, cache_dir, source_file

SCRIPT = Path(__file__).with_name("gguf_to_hf.py")
DTYPE = "float32"
RECORD = "conversion.json"


def hf_dir_for(gguf_sha256: str, model: str, dtype: str = DTYPE) -> Path:
    return cache_dir() / f"hf-{model}-{gguf_sha256[:12]}-{dtype}"


def conversion_record(path: Path) -> dict:
    """The record a conversion left (source sha256, transformers version, dtype, time); {} for a
    directory the user brought."""
    rec = path / RECORD
    return json.loads(rec.read_text()) if rec.is_file() else {}


def dir_bytes(path: Path) -> int:
    """Bytes of the weight files of a Hugging Face directory (what an engine streams, at its dtype)."""
    return sum(p.stat().st_size for p in path.glob("*.safetensors"))


def hf_model(model: str, hf_dir: str | None, python: str | None, timeout_s: float = 1800.0) -> tuple[Path, str]:
    """(directory, sha256 of its source) for a study's model: `hf_dir` as given, else the converted cache."""
    if hf_dir:
        path = Path(hf_dir).expanduser()
        if not (path / "config.json").is_file():
            raise ModelError(f"model.hf_dir: {path} is not a Hugging Face model directory (no config.json)")
        return path, conversion_record(path).get("source_sha256", "user directory")
    src, sha = source_file(model)
    out = hf_dir_for(sha, Path(model).stem if model.endswith(".gguf") else model)
    if (out / RECORD).is_file():
        return out, sha
    if python is None:
        raise ModelError(
            "vllm: converting the GGUF to a Hugging Face directory needs vLLM's venv; "
            "run `make setup-vllm`, or name a directory in model.hf_dir"
        )
    convert(src, out, sha, python, timeout_s)
    return out, sha


def convert(src: Path, out: Path, sha: str, python: str, timeout_s: float) -> dict:
    """Run the conversion in vLLM's venv into a temporary directory, then move it into place."""
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": ""}
    # -I: isolated, so neither our venv's packages nor this script's folder shadow vLLM's
    cmd = [python, "-I", str(SCRIPT), str(src), str(tmp), DTYPE, sha]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ModelError(f"GGUF -> Hugging Face conversion of {src.name} took over {timeout_s:g} s") from None
    if res.returncode != 0 or not (tmp / RECORD).is_file():
        shutil.rmtree(tmp, ignore_errors=True)
        tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ModelError(f"GGUF -> Hugging Face conversion of {src.name} failed (exit {res.returncode}): {tail[0]}")
    os.replace(tmp, out)
    return conversion_record(out)
