"""How quality damage scales with model size: the same knobs (Q4_0 weights, a q8_0 and a q4_0 KV
cache, each against the Q4_K_M source with an f16 cache) scored on Qwen2.5-Coder-0.5B-Instruct (the
built-in `full` study, whose store is the default's: `make atlas-full` scores GSM8K on these arms,
`make atlas` only their KL divergence) and Qwen2.5-Coder-1.5B-Instruct (the `sizes` study), by llama.cpp's KL
divergence (`pareto-atlas kld`, llama-perplexity) and GSM8K accuracy relative to the baseline,
and the damage ratio 1.5B / 0.5B: what carrying a smaller model's measured damage to a larger one
of its family (the quality ladder's rung (c)) must allow for.

Damage: the mean KL divergence (nats per token), and for GSM8K one minus the accuracy relative to
the baseline, paired item by item. The ratio's interval divides the bounds crosswise (a
conservative box, not a propagated interval). Reads the two studies' stores; `--measure` first
scores what they lack (KLD needs llama-perplexity: scripts/build_llama_tools.sh, ~7 min on 2 cores).
`--write` rewrites the shipped damage-scaling table (spec/damage_scaling.csv) from the KL rows,
which the ladder's rung (c) reads (quality.damage_scaling).

    python benchmarks/bench_damage.py --small atlas-out/default-cpu/store.duckdb \\
        --large atlas-out/sizes-cpu/store.duckdb [--measure] [--gsm8k] [--write]
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

KNOBS = {
    "Q4_0": Knobs(weights="Q4_0"),
    "KV q8_0": Knobs(weights="Q4_K_M", kv="q8_0"),
    "KV q4_0": Knobs(weights="Q4_K_M", kv="q4_0"),
}  # each against the Q4_K_M source with an f16 cache
ARMS = {"full": ["q4km", "q4_0", "kv-q8_0", "kv-q4_0"], "sizes": ["q4km", "q4_0", "kv-q8_0", "kv-q4_0"]}


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


def rel_intervals(study: Study, store: Store) -> dict[str, tuple[float, float, float]]:
    """GSM8K accuracy relative to the baseline, paired, per knob: (rel, lo, hi)."""
    qt = quality_table(study, store)
    return {
        name: (qt[k.quality_key()]["rel"], qt[k.quality_key()]["rel_lo"], qt[k.quality_key()]["rel_hi"])
        for name, k in KNOBS.items()
        if k.quality_key() in qt and qt[k.quality_key()].get("rel") == qt[k.quality_key()].get("rel")
    }


def scaling_rows(small: dict, large: dict, studies: tuple[Study, Study]) -> list:
    """The KL rows as quality.damage_scaling rows (what `--write` ships)."""
    import datetime

    from pareto_atlas.calibrate.stage import model_card
    from pareto_atlas.quality.damage_scaling import DamageScaling

    cards = [model_card(s) for s in studies]
    out = []
    for name, k in KNOBS.items():
        if name in small and name in large:
            out.append(
                DamageScaling(
                    cards[0].family,
                    "Q4_K_M",
                    "f16",
                    k.weights,
                    k.kv,
                    "mean KL divergence (nats/token)",
                    studies[0].model.name,
                    float(cards[0].n_params),
                    tuple(small[name]),
                    studies[1].model.name,
                    float(cards[1].n_params),
                    tuple(large[name]),
                    f"measured: benchmarks/bench_damage.py {datetime.date.today().isoformat()}, llama-perplexity "
                    f"--kl-divergence over 2,040 tokens, the {studies[0].name} and {studies[1].name} studies' stores",
                )
            )
    return out


def coverage_lines(
    small: dict, large: dict, scalings: dict | None = None, n_from: float = 0.0, n_to: float = 0.0
) -> list[str]:
    """Whether the interval the quality ladder carries from the 0.5B (rung (c): its measured
    relative effect, widened x CARRY_WIDENING and by the knob's damage scaling where it grows)
    covers what the 1.5B measured; `scalings`: knob name -> DamageScaling (None: the x2 rule alone)."""
    from pareto_atlas.store.ladder import CARRY_WIDENING, carried
    from pareto_atlas.store.quality import Quality

    rule = "and the damage scaling" if scalings else "alone"
    out = [
        f"carried to the 1.5B from the 0.5B (GSM8K relative to the baseline, interval x{CARRY_WIDENING:g} {rule}) "
        "against the 1.5B's measured relative score"
    ]
    for name in KNOBS:
        if name not in small or name not in large:
            out.append(f"  {name:8s} not measured on both")
            continue
        s = small[name]
        c = carried(
            Quality(math.nan, math.nan, math.nan, s[0], s[1], s[2], "", "measured"),
            "0.5B",
            name,
            (scalings or {}).get(name),
            n_from,
            n_to,
        )
        g = large[name]
        inside = c.rel_lo <= g[0] <= c.rel_hi
        out.append(
            f"  {name:8s} carried {c.rel:.2f} [{c.rel_lo:.2f}, {c.rel_hi:.2f}]   measured {g[0]:.2f} "
            f"[{g[1]:.2f}, {g[2]:.2f}]   {'covered' if inside else 'NOT covered'}"
        )
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
        out.append(
            f"  {name:8s} {s[0]:{fmt}} [{s[1]:{fmt}}, {s[2]:{fmt}}]   {g[0]:{fmt}} [{g[1]:{fmt}}, {g[2]:{fmt}}]"
            f"   {r[0]:.2f} [{r[1]:.2f}, {r[2]:.2f}]"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", type=Path, default=Path("atlas-out/default-cpu/store.duckdb"))
    ap.add_argument("--large", type=Path, default=Path("atlas-out/sizes-cpu/store.duckdb"))
    ap.add_argument("--measure", action="store_true", help="score what the stores lack first")
    ap.add_argument("--gsm8k", action="store_true", help="with --measure, also GSM8K (tens of minutes on 2 cores)")
    ap.add_argument(
        "--write",
        type=Path,
        nargs="?",
        const=Path("src/pareto_atlas/spec/damage_scaling.csv"),
        help="rewrite the damage-scaling table the ladder reads (default: the shipped one)",
    )
    args = ap.parse_args()
    console = Console(stderr=True)
    found: dict[str, tuple[dict, dict]] = {}
    for key, path in (("full", args.small), ("sizes", args.large)):
        study = load_study(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with Store(path) as store:
            if args.measure:
                from pareto_atlas.quality.kld_stage import kld_study

                kld_study(study, store, console, arms=ARMS[key], workdir=path.parent / "kld")
                if args.gsm8k:
                    from pareto_atlas.quality.campaign import run_quality_campaign

                    run_quality_campaign(study, store, arms=ARMS[key])
            found[key] = (kld_damage(study, store), gsm8k_damage(study, store), rel_intervals(study, store))
    (k05, g05, r05), (k15, g15, r15) = found["full"], found["sizes"]
    print("\n".join(lines("mean KL divergence from the baseline (nats/token)", k05, k15, ".4f")))
    print("\n".join(lines("GSM8K damage (1 - accuracy relative to the baseline, paired)", g05, g15, ".2f")))
    rows = scaling_rows(k05, k15, (load_study("full"), load_study("sizes")))
    scalings = {name: r for name, r in zip([n for n in KNOBS if n in k05 and n in k15], rows)}
    n_from, n_to = (rows[0].small_params, rows[0].large_params) if rows else (0.0, 0.0)
    print("\n".join(coverage_lines(r05, r15)))
    print("\n".join(coverage_lines(r05, r15, scalings, n_from, n_to)))
    if args.write and rows:
        from pareto_atlas.quality.damage_scaling import write_table

        write_table(
            rows,
            args.write,
            "How each knob's damage scales with model size, measured on this project's CPU "
            "(quality.damage_scaling;\nrewritten by benchmarks/bench_damage.py --write). Values: "
            "value, 95 % low, 95 % high; larger is worse.",
        )
        print(f"wrote {len(rows)} rows to {args.write}")


if __name__ == "__main__":
    main()
