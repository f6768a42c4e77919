"""Importing what users already measured: result files of vLLM, SGLang, GuideLLM, AIPerf /
genai-perf, llama-bench, MLPerf loadgen and lm-evaluation-harness, read strictly (`read_result`)
and written as anchors and quality evidence into a study's store (`import_paths`)."""

from __future__ import annotations

from pathlib import Path

from pareto_atlas.measure.imports.detect import UNFORESEEN, read
from pareto_atlas.measure.imports.result import ImportedFile, ImportFileError
from pareto_atlas.measure.imports.write import Outcome, write_imports
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.store import Store

__all__ = ["ImportFileError", "ImportedFile", "Outcome", "import_paths", "read_result"]


def read_result(
    path: str | Path, raw: bytes | None = None, requested_output: int | None = None, strict: bool = False
) -> ImportedFile:
    """One file read, or an ImportFileError in one line. strict=True lets an unforeseen reader error
    through (the property test uses it to find them); otherwise it is reported as the file's."""
    try:
        return read(path, raw, requested_output)
    except ImportFileError:
        raise
    except UNFORESEEN as e:
        if strict:
            raise
        msg = (str(e).splitlines() or [""])[0][:200]
        raise ImportFileError(f"{path}: unreadable ({type(e).__name__}: {msg})") from None


def _card(kind: str, name: str | None, allowed: list[str]) -> str | None:
    if name is not None and name not in allowed:
        raise ImportFileError(f"--{kind} {name!r}: not a shipped card; allowed: {', '.join(allowed)}")
    return name


def import_paths(
    store: Store,
    study: str,
    paths: list[str | Path],
    *,
    hardware: str | None = None,
    model: str | None = None,
    engine: str | None = None,
    knobs: Knobs | None = None,
    requested_output: int | None = None,
) -> list[Outcome]:
    """Read every file first (one bad file imports nothing), then write them all in one transaction."""
    gpus = sorted(n for n, h in shipped_hardware().items() if h.kind == "gpu")
    hardware = _card("hardware", hardware, gpus)
    model = _card("model", model, sorted(shipped_models()))
    if not paths:
        raise ImportFileError("import: no file given")
    files, raws = [], []
    for p in paths:
        try:
            raw = Path(p).read_bytes()
        except OSError as e:
            raise ImportFileError(f"{p}: cannot read ({e.strerror})") from None
        files.append(read_result(p, raw, requested_output))
        raws.append(raw)
    return write_imports(store, study, files, raws, hardware=hardware, model=model, engine=engine, knobs=knobs)
