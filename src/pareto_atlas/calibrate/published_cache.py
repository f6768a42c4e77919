"""The published fits, kept in the model cache between stores: every fresh store (a clean clone,
a new study) would otherwise refit the GPU cards on the shipped table (tens of seconds on 2 cores)
although nothing it depends on changed.

A fit is keyed by what it is a function of: the table's content, the fit's version, the tool's, the
source of the code that fits and predicts (calibrate and simulate), and the cards asked for. A file
that does not read back as a fit is ignored and refitted, never trusted and never fatal.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import asdict
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from pareto_atlas import __version__
from pareto_atlas.calibrate.published import CardCalibration
from pareto_atlas.calibrate.published_formats import FormatFit, calibrate_published_formats
from pareto_atlas.calibrate.published_table import PublishedTable
from pareto_atlas.measure.weights import cache_root
from pareto_atlas.simulate.params import CalibParams

_CODE = ("calibrate", "simulate")


# bump when the published fit's setup changes: stored fits are then redone (8: rows as run; 9: a row's
# engine release decides whether its steps overlap host and device work; 10: MoE operator laws)
FIT_VERSION = "10"


def fit_key(table: PublishedTable) -> str:
    """What a stored fit is keyed by: the table's content, the shipped multi-GPU table's (its one-GPU
    rows fit the quantized formats: calibrate.published_formats), this fit's version and the tool's,
    and whether rows run as their source ran them (calibrate.published.RUN_AS_PUBLISHED, read now:
    a fit made with it off is never read back as the product's) and overlap host work by their engine's
    release (HOST_OVERLAP_BY_RELEASE, likewise)."""
    from pareto_atlas.calibrate import published
    from pareto_atlas.calibrate.published_table import load_multigpu
    from pareto_atlas.simulate import gemm_floor

    multi = load_multigpu().sha256
    run = "as-run" if published.RUN_AS_PUBLISHED else "engine-defaults"
    run += "" if published.HOST_OVERLAP_BY_RELEASE else "|host-serial"
    run += f"|{gemm_floor.key()}"
    return hashlib.sha256(f"{table.sha256}|{multi}|{FIT_VERSION}|{__version__}|{run}".encode()).hexdigest()[:12]


def cache_dir() -> Path:
    return cache_root() / "published-fits"


def code_hash() -> str:
    """sha256 over the source of the packages the fit runs, their subpackages included (simulate.kernels):
    a code change is a new key."""
    h = hashlib.sha256()
    for pkg in _CODE:
        _hash_tree(h, resources.files(f"pareto_atlas.{pkg}"), "")
    return h.hexdigest()[:16]


def _hash_tree(h, folder, prefix: str) -> None:
    for f in sorted(folder.iterdir(), key=lambda p: p.name):
        if f.name.endswith(".py"):
            h.update((prefix + f.name).encode())
            h.update(f.read_bytes())
        elif f.is_dir() and f.name != "__pycache__":
            _hash_tree(h, f, prefix + f.name + "/")


def cache_key(fit_key: str, cards: list[str]) -> str:
    return hashlib.sha256(f"{fit_key}|{code_hash()}|{','.join(sorted(cards))}".encode()).hexdigest()[:20]


def _encode(c: CardCalibration) -> dict:
    return {
        "hardware": c.hardware,
        "engine": c.engine,
        "params": c.params.to_dict(),
        "anchors": c.anchors.to_dict(orient="split"),
        "held_out": c.held_out,
        "errors": c.errors,
        "tpot_basis": list(c.tpot_basis),
        "lomo_errors": c.lomo_errors,
        "formats": [asdict(f) for f in c.formats],
    }


def _native(v):
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(f"not JSON: {type(v).__name__}")


def _decode(d: dict) -> CardCalibration:
    a = d["anchors"]
    anchors = pd.DataFrame(a["data"], columns=a["columns"], index=a["index"])
    return CardCalibration(
        hardware=str(d["hardware"]),
        engine=str(d["engine"]),
        params=CalibParams.from_dict(d["params"]),
        anchors=anchors,
        held_out=str(d["held_out"]),
        errors={k: float(v) for k, v in d["errors"].items()},
        tpot_basis=tuple(d["tpot_basis"]),
        lomo_errors={m: {k: float(v) for k, v in e.items()} for m, e in d["lomo_errors"].items()},
        formats=tuple(FormatFit(**f) for f in d["formats"]),
    )


def load(key: str) -> list[CardCalibration] | None:
    path = cache_dir() / f"{key}.json"
    try:
        raw = json.loads(path.read_text())
        return [_decode(d) for d in raw["fits"]] if raw.get("key") == key else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def save(key: str, cals: list[CardCalibration]) -> None:
    """Written whole or not at all (a temporary file renamed); a cache that cannot be written is skipped."""
    d = cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{key}.{os.getpid()}.tmp"
        # Python's own float repr (exact) and NaN: the fit reads back bit for bit
        tmp.write_text(json.dumps({"key": key, "fits": [_encode(c) for c in cals]}, default=_native))
        os.replace(tmp, d / f"{key}.json")
    except OSError:
        return


def fitted(
    table: PublishedTable, cards: list[str], tell: Callable[[bool], None] | None = None
) -> list[CardCalibration]:
    """The one-GPU fits of `cards` on `table`, with their formats: from the cache when it holds them,
    else fitted now and kept. `tell` hears which (True: from the cache) before a fit starts, so a
    caller can say so before the tens of seconds it takes."""
    key = cache_key(fit_key(table), cards)
    cals = load(key)
    if tell is not None:
        tell(cals is not None)
    if cals is None:
        cals = calibrate_published_formats(table, cards)
        save(key, cals)
    return cals
