"""How quality damage scales with model size: the same knobs (Q4_0 weights, a q8_0 and a q4_0 KV
cache, each against the Q4_K_M source with an f16 cache) scored on Qwen2.5-Coder-0.5B-Instruct (the
built-in `default` study) and Qwen2.5-Coder-1.5B-Instruct (the `sizes` study), by llama.cpp's KL
divergence (`pareto-atlas kld`, llama-perplexity) and GSM8K accuracy relative to the baseline,
and the damage ratio 1.5B / 0.5B: what carrying a smaller model's measured damage to a larger one
of its family (the quality ladder's rung (c)) must allow for.

Damage: the mean KL divergence (nats per token), and for GSM8K one minus the accuracy relative to
the baseline, paired item by item. The ratio's interval divides the bounds crosswise (a
conservative box, not a propagated interval). Reads the two studies' stores; `--measure` first
scores what they lack (KLD needs llama-perplexity: scripts/build_llama_tools.sh, ~7 min on 2 cores).

    python benchmarks/bench_damage.py --small atlas-out/default-cpu/store.duckdb \\
        --large atlas-out/sizes-cpu/store.duckdb [--measure] [--gsm8k]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from rich.console import Console

from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.study import Study, load_study
from pareto_atlas.store import Store
from pareto_atlas.store.quality import kld_table, quality_table

KNOBS = {"Q4_0": Knobs(weights="Q4_0"), "KV q8_0": Knobs(kv="q8_0"), "KV q4_0": Knobs(kv="q4_0")}
ARMS = {"default": ["q4km", "q4_0", "kv-q8_0", "kv-q4_0"], "sizes": ["q4km", "q4_0", "kv-q8_0", "kv-q4_0"]}


def kld_damage(study: Study, store: Store) -> dict[str, tuple[float, float, float]]:
    kt = kld_table(study, store)
    return {name: kt[k.quality_key()][:3] for name, k in KNOBS.items() if k.quality_key() in kt}


def gsm8k_damage(study: Study, store: Store) -> dict[str, tuple[float, float, float]]:
    qt = quality_table(study, store)
    out = {}
    for name, k in KNOBS.items():
        hit = qt.get(k.quality_key())
        if hit is not None and hit.get("rel") == hit.get("rel"):
            out[name] = (1.0 - hit["rel"], 1.0 - hit["rel_hi"], 1.0 - hit["rel_lo"])
    return out


def ratio(small: tuple, large: tuple) -> tuple[float, float, float]:
    (s, s_lo, s_hi), (g, g_lo, g_hi) = small, large

    def div(a: float, b: float) -> float:
        return a / b if b > 0 else math.inf if a > 0 else math.nan
    return div(g, s), div(max(g_lo, 0.0), s_hi), div(g_hi, max(s_lo, 0.0))


def lines(what: str, small: dict, large: dict, fmt: str) -> list[str]:
    out = [f"{what}: 0.5B [95 %], 1.5B [95 %], ratio 1.5B / 0.5B [crosswise bounds]"]
    for name in KNOBS:
        if name not in small or name not in large:
            where = "both" if name not in small and name not in large else "0.5B" if name not in small else "1.5B"
            out.append(f"  {name:8s} not measured on {where}")
            continue
        r = ratio(small[name], large[name])
        s, g = small[name], large[name]
        out.append(f"  {name:8s} {s[0]:{fmt}} [{s[1]:{fmt}}, {s[2]:{fmt}}]   {g[0]:{fmt}} [{g[1]:{fmt}}, {g[2]:{fmt}}]"
                   f"   {r[0]:.2f} [{r[1]:.2f}, {r[2]:.2f}]")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", type=Path, default=Path("atlas-out/default-cpu/store.duckdb"))
    ap.add_argument("--large", type=Path, default=Path("atlas-out/sizes-cpu/store.duckdb"))
    ap.add_argument("--measure", action="store_true", help="score what the stores lack first")
    ap.add_argument("--gsm8k", action="store_true", help="with --measure, also GSM8K (tens of minutes on 2 cores)")
    args = ap.parse_args()
    console = Console(stderr=True)
    found: dict[str, tuple[dict, dict]] = {}
    for key, path in (("default", args.small), ("sizes", args.large)):
        study = load_study(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with Store(path) as store:
            if args.measure:
                from pareto_atlas.quality.kld_stage import kld_study
                kld_study(study, store, console, arms=ARMS[key], workdir=path.parent / "kld")
                if args.gsm8k:
                    from pareto_atlas.quality.campaign import run_quality_campaign
                    run_quality_campaign(study, store, arms=ARMS[key])
            found[key] = (kld_damage(study, store), gsm8k_damage(study, store))
    (k05, g05), (k15, g15) = found["default"], found["sizes"]
    print("\n".join(lines("mean KL divergence from the baseline (nats/token)", k05, k15, ".4f")))
    print("\n".join(lines("GSM8K damage (1 - accuracy relative to the baseline, paired)", g05, g15, ".2f")))


if __name__ == "__main__":
    main()
