"""Reading a result file's text and its fields strictly: every value a parser uses is checked
for type and range here, so a malformed or truncated file gives one line naming the field."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from pareto_atlas.measure.imports.result import ImportFileError, reject

MAX_BYTES = 64 * 2**20  # a result file larger than this is not a benchmark summary
# No figure of a benchmark run comes near this (a day in ns is 8.6e13): larger is a broken writer,
# and would overflow once scaled to ms or summed
CEILING = 1e15


def decode(path: str, raw: bytes) -> str:
    if len(raw) > MAX_BYTES:
        raise ImportFileError(f"{path}: {len(raw)} bytes; result files above {MAX_BYTES >> 20} MiB are not read")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ImportFileError(f"{path}: not UTF-8 text (byte {e.start})") from None


def _constant(token: str) -> float:
    # Python's json reads the bare tokens Infinity/-Infinity/NaN (not JSON) as floats; the fields that
    # hold them are then refused by `number` unless a parser says what the field means (e.g. a rate)
    return float({"Infinity": "inf", "-Infinity": "-inf", "NaN": "nan"}[token])


def load_json(path: str, text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_constant)
    except json.JSONDecodeError as e:
        raise ImportFileError(f"{path}: not JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except RecursionError:
        raise ImportFileError(f"{path}: not JSON (nested too deep)") from None


def load_json_lines(path: str, text: str) -> list[Any]:
    """One JSON value per non-blank line (JSON lines, as `--append-result` and SGLang write)."""
    out = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line, parse_constant=_constant))
        except json.JSONDecodeError as e:
            raise ImportFileError(f"{path}:{i}: not a JSON line ({e.msg} at column {e.colno})") from None
        except RecursionError:
            raise ImportFileError(f"{path}:{i}: not a JSON line (nested too deep)") from None
    return out


def looks_like_json_lines(text: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return len(lines) > 1 and all(ln.lstrip().startswith("{") and ln.rstrip().endswith("}") for ln in lines)


class Fields:
    """Checked access to one JSON object of a file: `where` names it in errors (e.g. "benchmarks[0]")."""

    def __init__(self, path: str, obj: Any, where: str = ""):
        if not isinstance(obj, Mapping):
            raise reject(path, where or "(top level)", f"expected an object, got {type(obj).__name__}")
        self.path, self.obj, self.where = path, obj, where

    def name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def has(self, key: str) -> bool:
        return key in self.obj and self.obj[key] is not None

    def raw(self, key: str, default: Any = None) -> Any:
        return self.obj.get(key, default)

    def sub(self, key: str, required: bool = True) -> "Fields | None":
        if not self.has(key):
            if required:
                raise reject(self.path, self.name(key), "missing")
            return None
        return Fields(self.path, self.obj[key], self.name(key))

    def number(
        self, key: str, required: bool = False, minimum: float | None = 0.0, allow_inf: bool = False
    ) -> float | None:
        """A finite number (>= minimum); missing or null gives None unless required."""
        if not self.has(key):
            if required:
                raise reject(self.path, self.name(key), "missing")
            return None
        v = self.obj[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise reject(self.path, self.name(key), f"{v!r} is not a number")
        v = float(v)
        if math.isnan(v) or (math.isinf(v) and not allow_inf):
            raise reject(self.path, self.name(key), f"{v} is not a finite number (a bare NaN/Infinity token)")
        if minimum is not None and v < minimum:
            raise reject(self.path, self.name(key), f"{v} is below {minimum:g}")
        if abs(v) > CEILING and not math.isinf(v):
            raise reject(self.path, self.name(key), f"{v:g} is beyond any plausible figure (> {CEILING:g})")
        return v

    def integer(self, key: str, required: bool = False, minimum: int = 0) -> int | None:
        v = self.number(key, required, minimum)
        if v is None:
            return None
        if v != int(v):
            raise reject(self.path, self.name(key), f"{v} is not a whole number")
        return int(v)

    def text(self, key: str, required: bool = False) -> str | None:
        if not self.has(key):
            if required:
                raise reject(self.path, self.name(key), "missing")
            return None
        v = self.obj[key]
        if not isinstance(v, (str, int, float)) or isinstance(v, bool):
            raise reject(self.path, self.name(key), f"{type(v).__name__} is not text")
        return str(v)

    def numbers(self, key: str, required: bool = False) -> list[float] | None:
        """A list of finite non-negative numbers."""
        v = self.items(key, required)
        if v is None:
            return None
        out = []
        for i, x in enumerate(v):
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or not 0 <= x <= CEILING:
                raise reject(self.path, f"{self.name(key)}[{i}]", f"{x!r} is not a finite number in [0, {CEILING:g}]")
            out.append(float(x))
        return out

    def items(self, key: str, required: bool = False) -> list[Any] | None:
        if not self.has(key):
            if required:
                raise reject(self.path, self.name(key), "missing")
            return None
        v = self.obj[key]
        if not isinstance(v, list):
            raise reject(self.path, self.name(key), f"{type(v).__name__} is not a list")
        return v


def looks_like_yaml_report(text: str) -> bool:
    """A YAML document whose top level has `benchmarks:` (GuideLLM writes .yaml reports too)."""
    head = text.lstrip()[:1]
    return head not in ("{", "[") and any(ln.startswith("benchmarks:") for ln in text.splitlines()[:400])


def load_yaml(path: str, text: str) -> Any:
    import yaml  # only GuideLLM's .yaml reports need it

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ImportFileError(f"{path}: not YAML ({getattr(e, 'problem', None) or type(e).__name__}{where})") from None
    except RecursionError:
        raise ImportFileError(f"{path}: not YAML (nested too deep)") from None
