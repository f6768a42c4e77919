"""A GGUF file's header read without the tokenizer: its scalar metadata and its tensors' names,
shapes, types and stored bytes.

gguf-py's GGUFReader builds a numpy view of every field, the 150,000 vocabulary strings among
them: about 9 s per read of a Qwen2.5 file on this project's 2-core machine, paid once per anchor
for the bits per weight of the file served. Here array fields are skipped by their lengths
(strings one by one, fixed-size elements in one seek), which takes a fraction of a second. The
layout is GGUF v2/v3's (little-endian): magic, version, tensor count, metadata count, the
metadata (key, type, value), then each tensor's name, dimensions, type and offset.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

# GGUF metadata value types -> struct format of a scalar (None: string or array)
_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


class GGUFHeaderError(ValueError):
    pass


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    type_id: int  # ggml type (gguf.GGMLQuantizationType)
    n_elements: int
    n_bytes: int


@dataclass(frozen=True)
class GGUFHeader:
    version: int
    metadata: dict  # scalar and string values; an array's value is its length
    tensors: tuple[TensorInfo, ...]


class _Reader:
    def __init__(self, fh, size: int):
        self.fh, self.size = fh, size

    def _room(self, n: int) -> None:
        if n > self.size - self.fh.tell():
            raise GGUFHeaderError("truncated GGUF header (a length runs past the end of the file)")

    def read(self, fmt: str):
        size = struct.calcsize("<" + fmt)
        data = self.fh.read(size)
        if len(data) != size:
            raise GGUFHeaderError("truncated GGUF header")
        return struct.unpack("<" + fmt, data)[0]

    def string(self) -> str:
        n = self.read("Q")
        self._room(n)
        data = self.fh.read(n)
        if len(data) != n:
            raise GGUFHeaderError("truncated GGUF header")
        return data.decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        n = self.read("Q")
        self._room(n)
        self.fh.seek(n, 1)

    def value(self, vtype: int):
        if vtype in _SCALAR:
            return self.read(_SCALAR[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype, count = self.read("I"), self.read("Q")
            if etype in _SCALAR:
                n = struct.calcsize("<" + _SCALAR[etype]) * count
                self._room(n)
                self.fh.seek(n, 1)
            elif etype == _STRING:
                for _ in range(count):
                    self.skip_string()
            else:
                for _ in range(count):
                    self.value(etype)
            return count
        raise GGUFHeaderError(f"unknown GGUF metadata type {vtype}")


def _block(type_id: int) -> tuple[int, int]:
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    try:
        return GGML_QUANT_SIZES[GGMLQuantizationType(type_id)]
    except (ValueError, KeyError):
        raise GGUFHeaderError(f"unknown ggml tensor type {type_id}") from None


def read_header(path: str | Path) -> GGUFHeader:
    """The header of a GGUF file (see the module doc); memoised by path, size and modification time."""
    p = Path(path)
    st = p.stat()
    return _read(str(p), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=32)
def _read(path: str, size: int, _mtime_ns: int) -> GGUFHeader:
    with open(path, "rb") as fh:
        r = _Reader(fh, size)
        if fh.read(4) != b"GGUF":
            raise GGUFHeaderError(f"{path}: not a GGUF file")
        version = r.read("I")
        if version not in (2, 3):
            raise GGUFHeaderError(f"{path}: GGUF version {version}; versions 2 and 3 are read")
        n_tensors, n_kv = r.read("Q"), r.read("Q")
        meta = {}
        for _ in range(n_kv):
            key = r.string()
            meta[key] = r.value(r.read("I"))
        tensors = []
        for _ in range(n_tensors):
            name = r.string()
            dims = tuple(r.read("Q") for _ in range(r.read("I")))
            type_id = r.read("I")
            r.read("Q")  # offset in the data section
            n = 1
            for d in dims:
                n *= d
            block, size = _block(type_id)
            tensors.append(TensorInfo(name, dims, type_id, n, n // block * size))
    return GGUFHeader(version, meta, tuple(tensors))


__all__ = ["GGUFHeader", "GGUFHeaderError", "TensorInfo", "read_header"]
