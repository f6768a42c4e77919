"""Dependencies run one way: a module imports only from its own layer or an earlier one, and no two
modules import each other, directly or around a circle.

The layers (docs/structures.md, "Layers") are listed earliest first. A module belongs to the layer of the
longest prefix below that names it. The import graph is read with `ast` from the sources, so a function-level
import counts like a module-level one (it still makes the dependency), and so does an import under
`if TYPE_CHECKING:` (a type names what a module depends on). Only imports of this package are edges: lazy
imports of heavy optional dependencies (torch, ray, transformers) are outside it and not walked.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pareto_atlas

ROOT = Path(pareto_atlas.__file__).parent
PKG = "pareto_atlas"

# Earliest first. The pipeline is spec → measure → quality → store → calibrate → simulate → atlas → report;
# three places are libraries that earlier stages stand on, so they sit lower than their package's stage:
# - `scale`: the executor (where a job runs), generic over the job: it imports no campaign;
# - the store's file (`store.db`, its migrations and integrity check): every stage writes through it; the
#   store's readers, which turn stored rows into points and qualities of the simulator's targets, stay after
#   quality and the simulator;
# - the simulator's model (cost model, kernels, discrete-event simulation, the space, the targets): calibration
#   fits it, so it sits before calibrate; the simulate stage (which reads the fits) after.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("spec", (PKG, f"{PKG}.spec")),
    ("scale", (f"{PKG}.scale",)),
    ("store file", (f"{PKG}.store", f"{PKG}.store.db", f"{PKG}.store.migrations", f"{PKG}.store.integrity")),
    ("measure", (f"{PKG}.measure",)),
    ("quality", (f"{PKG}.quality",)),
    ("simulator", (f"{PKG}.simulate",)),
    ("store readers", (f"{PKG}.store.quality", f"{PKG}.store.compare", f"{PKG}.store.points", f"{PKG}.store.ladder")),
    ("calibrate", (f"{PKG}.calibrate",)),
    ("simulate stage", (f"{PKG}.simulate.stage", f"{PKG}.simulate.resume")),
    ("atlas", (f"{PKG}.atlas",)),
    ("report", (f"{PKG}.report",)),
    (
        "stages",
        (
            f"{PKG}.stages",
            f"{PKG}.cli",
            f"{PKG}.cli_run",
            f"{PKG}.cli_options",
            f"{PKG}.cli_aliases",
            f"{PKG}.__main__",
        ),
    ),
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def layer_of(module: str) -> int:
    best, index = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, index = len(p), i
    assert index is not None, f"{module} is in no layer: add it to LAYERS"
    return index


def _typing_only(tree: ast.Module) -> set[int]:
    """The ids of import nodes under `if TYPE_CHECKING:`."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return out


def imports_of(module: str, path: Path, known: dict[str, Path], runtime_only: bool = False) -> list[tuple[str, int]]:
    """(imported module of this package, line) for every import in the file, at any depth (`runtime_only`:
    not those under `if TYPE_CHECKING:`). `from pkg import name` is an edge to `pkg.name` where that is a
    module, else to `pkg`."""
    is_package = path.name == "__init__.py"
    out = []
    tree = ast.parse(path.read_text(), str(path))
    skip = _typing_only(tree) if runtime_only else set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            subs = [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in known]
            targets = subs if len(subs) == len(node.names) else [source, *subs]
        else:
            continue
        for t in targets:
            if t != PKG and not t.startswith(PKG + "."):
                continue
            while t not in known:  # `import pkg.mod.name` of a name: the module that holds it
                t = t.rsplit(".", 1)[0]
            if t != module:
                out.append((t, node.lineno))
    return out


def graph(runtime_only: bool = False) -> dict[str, list[tuple[str, int]]]:
    known = modules()
    return {m: imports_of(m, p, known, runtime_only) for m, p in known.items()}


def upward_edges(g: dict[str, list[tuple[str, int]]]) -> list[str]:
    out = []
    for m, edges in sorted(g.items()):
        for t, line in edges:
            if layer_of(t) > layer_of(m):
                out.append(f"{m}:{line} ({LAYERS[layer_of(m)][0]}) imports {t} ({LAYERS[layer_of(t)][0]})")
    return out


def circles(g: dict[str, list[tuple[str, int]]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    succ = defaultdict(set, {m: {t for t, _ in es} for m, es in g.items()})

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(succ[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


def test_every_module_has_a_layer():
    for m in modules():
        layer_of(m)


def test_no_upward_import():
    bad = upward_edges(graph())
    assert not bad, f"{len(bad)} imports run upward (a module may import its own layer or earlier):\n" + "\n".join(bad)


def test_no_import_circle():
    g = graph(runtime_only=True)
    found = circles(g)
    lines = []
    for comp in found:
        members = set(comp)
        lines.append("circle: " + ", ".join(comp))
        lines += [f"  {m}:{line} imports {t}" for m in comp for t, line in g[m] if t in members]
    assert not found, "\n".join(lines)


def test_the_walk_sees_an_upward_edge_and_a_circle():
    """The checks can fail: a made-up graph with one upward edge and one circle is caught by both."""
    g = {f"{PKG}.spec.a": [(f"{PKG}.measure.b", 3)], f"{PKG}.measure.b": [(f"{PKG}.spec.a", 5)]}
    assert upward_edges(g) == [f"{PKG}.spec.a:3 (spec) imports {PKG}.measure.b (measure)"]
    assert circles(g) == [[f"{PKG}.measure.b", f"{PKG}.spec.a"]]
