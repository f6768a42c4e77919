"""The shipped example trace (src/pareto_atlas/spec/traces/chat_small.csv), made deterministically
from the length and arrival statistics of a public production trace, rescaled to this CPU's budget.

Source: the conversation trace of the Azure LLM inference trace 2023 (Azure/AzurePublicDataset,
data/AzureLLMInferenceTrace_conv.csv, 19,366 requests over 3,501.7 s on 2023-11-16, CC-BY; the trace
of Patel et al., "Splitwise: Efficient generative LLM inference using phase splitting", ISCA 2024).
The figures below are that file's quantiles (pandas, linear interpolation) of ContextTokens,
GeneratedTokens and the gaps between consecutive TIMESTAMPs, copied exactly; the file itself
(sha256 2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8) is not needed here.

How it is rescaled (the production lengths, a ~1,000-token median prompt at ~5.5 requests/s, would
take hours on two cores with a 0.5B model):
- lengths: drawn from the quantiles (piecewise log-linear inverse CDF, quantile levels 1 %..99 %,
  prompt and output independent: their log-correlation in the source is 0.09), then mapped by a
  power law x' = lo * (x / q05) ** b, b chosen so that the source's 5th and 95th percentiles land on
  [lo, hi] (prompts 64..256 tokens, outputs 16..64), and clipped there: the shape of each
  distribution in log space is kept, compressed by b (0.44 for prompts, 0.58 for outputs);
- arrivals: gaps drawn from the gap quantiles the same way (burstier than Poisson: CV 1.09 in the
  source, whose mean gap is 0.1808 s), every gap stretched by one factor so that the mean rate is RATE_RPS (0.3/s: about half the
  load one llama.cpp slot serves here with Qwen2.5-0.5B Q4_K_M, ~1.6 s a request), so the trace's
  48 requests arrive over 157 s.

    python scripts/make_example_trace.py            # rewrites the shipped file (byte for byte)
    python scripts/make_example_trace.py --check    # fails if the shipped file differs
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

LEVELS = (0.01, 0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99)
PROMPT_Q = (29.0, 181.0, 207.0, 396.0, 1020.0, 1189.0, 2734.5, 4083.0, 4142.0)  # ContextTokens
OUTPUT_Q = (16.0, 41.0, 54.0, 85.0, 129.0, 395.0, 424.0, 451.0, 601.0)  # GeneratedTokens
GAP_Q = (0.0005, 0.0063, 0.0161, 0.0483, 0.1184, 0.2467, 0.4207, 0.5652, 0.8897)  # seconds (mean 0.1808)

N_REQUESTS = 48
RATE_RPS = 0.3
PROMPT_RANGE = (64, 256)
OUTPUT_RANGE = (16, 64)
SEED = 20231116
OUT = Path(__file__).resolve().parents[1] / "src/pareto_atlas/spec/traces/chat_small.csv"


def draw(quantiles: tuple[float, ...], u: np.ndarray) -> np.ndarray:
    """Inverse CDF through the quantiles, log-linear between them (levels outside 1..99 % clamp)."""
    return np.exp(np.interp(u, LEVELS, np.log(quantiles)))


def rescale(x: np.ndarray, quantiles: tuple[float, ...], lo: int, hi: int) -> np.ndarray:
    """The power map taking the source's 5th..95th percentiles onto [lo, hi], clipped there."""
    q05, q95 = quantiles[LEVELS.index(0.05)], quantiles[LEVELS.index(0.95)]
    b = np.log(hi / lo) / np.log(q95 / q05)
    return np.clip(np.rint(lo * (x / q05) ** b), lo, hi).astype(int)


def make_rows(n: int = N_REQUESTS, seed: int = SEED) -> list[tuple[float, int, int]]:
    rng = np.random.default_rng(seed)
    u_prompt, u_output, u_gap = rng.uniform(0.01, 0.99, size=(3, n))
    prompts = rescale(draw(PROMPT_Q, u_prompt), PROMPT_Q, *PROMPT_RANGE)
    outputs = rescale(draw(OUTPUT_Q, u_output), OUTPUT_Q, *OUTPUT_RANGE)
    gaps = draw(GAP_Q, u_gap[1:])
    # one stretch for every gap: the shape (burstiness) is the source's, the mean rate exactly RATE_RPS
    arrivals = np.concatenate([[0.0], np.cumsum(gaps / gaps.mean() / RATE_RPS)])
    return [(round(float(t), 3), int(p), int(o)) for t, p, o in zip(arrivals, prompts, outputs)]


def render(rows: list[tuple[float, int, int]]) -> str:
    head = [
        "# chat_small: 48 chat requests shaped like the Azure LLM inference trace 2023 (conversation),",
        "# Azure/AzurePublicDataset data/AzureLLMInferenceTrace_conv.csv (CC-BY; Patel et al., Splitwise, ISCA 2024):",
        "# its length and inter-arrival quantiles, lengths power-mapped from the source's 5th..95th percentiles",
        f"# onto prompts {PROMPT_RANGE[0]}..{PROMPT_RANGE[1]} and outputs {OUTPUT_RANGE[0]}..{OUTPUT_RANGE[1]} tokens,"
        f" gaps stretched to {RATE_RPS} requests/s.",
        "# Made by scripts/make_example_trace.py (seed %d); do not edit by hand." % SEED,
        "arrival_s,prompt_tokens,output_tokens",
    ]
    return "\n".join(head + [f"{t:.3f},{p},{o}" for t, p, o in rows]) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="fail if the shipped trace differs from what this makes")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    text = render(make_rows())
    if a.check:
        if not a.out.exists() or a.out.read_text() != text:
            sys.exit(f"{a.out}: differs from what scripts/make_example_trace.py makes; rerun it without --check")
        print(f"{a.out}: as made")
        return
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text)
    rows = make_rows()
    p, o = np.array([r[1] for r in rows]), np.array([r[2] for r in rows])
    print(
        f"wrote {a.out}: {len(rows)} requests over {rows[-1][0]:.0f} s ({len(rows) / rows[-1][0]:.2f}/s); "
        f"prompt median {np.median(p):.0f} [{p.min()}..{p.max()}], output median {np.median(o):.0f} [{o.min()}..{o.max()}]"
    )


if __name__ == "__main__":
    main()
