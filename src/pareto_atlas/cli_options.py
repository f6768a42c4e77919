"""The options of the command line's longer verbs (quality, calibrate, pick), defined once here so that
cli.py reads as its verbs; docs/cli.md is generated from the app that uses them."""

from __future__ import annotations

import typer

QUALITY_KINDS = ("task", "kld", "evict", "published")
# which --kind reads which option: any other is refused, never silently ignored
QUALITY_OPTIONS = {
    "--arm": ("task", "kld"),
    "--n": ("task", "evict"),
    "--task": ("task", "evict", "published"),
    "--max-tokens": ("task",),
    "--ray": ("task",),
    "--tokens": ("kld",),
    "--keep-base": ("kld",),
    "--policies": ("evict",),
    "--keeps": ("evict",),
    "--store": ("kld", "evict"),
    "--table": ("published",),
    "--model": ("published",),
    "--endpoint-host": ("task",),
    "--allow-key-env": ("task",),
    "--allow-program": ("task",),
}
# which calibrate mode reads which option (--published, --import, or neither: the store's anchors)
CALIBRATE_OPTIONS = {
    "--hardware": ("--import", "--published"),
    "--engine": ("--import", "--published"),
    "--model": ("--import",),
    "--knobs": ("--import",),
    "--output-tokens": ("--import",),
    "--table": ("--published",),
    "--multi-gpu": ("--published",),
    "--allow-aggregate": ("--import", "(the store's anchors)"),
    "--allow-unverified": ("--import", "(the store's anchors)"),
}


# quality
QUALITY_KIND = typer.Option(
    "task",
    "--kind",
    help="task: score the quality arms on the study's tasks; "
    "kld: token-level KL divergence and top-1 agreement against the baseline "
    "(llama-perplexity; `make llama-tools` builds it); evict: KV eviction and top-k "
    "sparse attention in transformers (extra: pip install 'pareto-atlas\\[eviction]'); "
    "published: the published quality of deployed checkpoints (no study read).",
)

QUALITY_N = typer.Option(
    None,
    help="task: items per arm, or 'all' (overrides the study; retrieval "
    "and ruler: items per cell); evict: GSM8K items, or retrieval "
    "items per length and depth.",
)

QUALITY_TASK = typer.Option(
    None,
    help="task: gsm8k, retrieval, humaneval, ifeval or ruler (default: "
    "the study's task, then each of its [quality] tasks); evict: "
    "retrieval, ruler or gsm8k (default: the study's [eviction] "
    "task, else its quality task); published: the task the "
    "guard prefers (default: gsm8k).",
)

QUALITY_MAX_TOKENS = typer.Option(
    None,
    "--max-tokens",
    help="task: tokens per answer (overrides the study; humaneval, "
    "ifeval and each ruler subtask have their own default "
    "when the study sets none).",
)

QUALITY_TOKENS = typer.Option(
    None,
    help="kld: tokens scored per configuration (overrides the study's \\[quality] kld_tokens; whole chunks of 255).",
)

QUALITY_POLICIES = typer.Option(
    None,
    help="evict: comma-separated streamingllm (= streaming), h2o, "
    "snapkv, pyramidkv (= pyramid), topk (= sparse: oracle "
    "top-k sparse attention) (overrides the study's \\[eviction]).",
)

QUALITY_KEEPS = typer.Option(
    None,
    help="evict: comma-separated KV keep ratios in (0, 1), e.g. "
    "0.5,0.25 (topk: the share of the keys each decode step reads).",
)

QUALITY_TABLE = typer.Option(
    None, "--table", help="published: another published-quality CSV in the shipped table's columns (repeatable)."
)

# calibrate
CALIBRATE_PUBLISHED = typer.Option(
    False,
    "--published",
    help="Calibrate the GPU cards on published "
    "measurements (spec/published_anchors.csv plus --table) instead: the "
    "anchors, the fit, its leave-one-source-out error and the seed paper's "
    "ratios beside the projection; `simulate` uses the stored fit.",
)

CALIBRATE_IMPORT = typer.Option(
    None,
    "--import",
    show_default=False,
    help="Import another tool's "
    "result file as anchors first (repeatable): vllm bench serve / "
    "benchmark_serving.py JSON or JSON lines, vllm bench sweep, GuideLLM, "
    "AIPerf, genai-perf, SGLang bench_serving, llama-bench, MLPerf loadgen "
    "logs, lm-eval results (told by shape); then the card they name is "
    "calibrated.",
)

CALIBRATE_HARDWARE = typer.Option(
    None,
    "--hardware",
    help="--import: the GPU card the runs used (a "
    "shipped card, e.g. H100-SXM); --published: only this card "
    "(repeatable).",
)

CALIBRATE_ENGINE = typer.Option(
    None,
    "--engine",
    help="--import: the serving engine, where the file "
    "does not say; --published: only this engine's anchors (repeatable).",
)

CALIBRATE_MODEL = typer.Option(None, "--model", help="--import: the model card (a shipped one, e.g. llama-3-8b).")

CALIBRATE_KNOBS = typer.Option(
    None, "--knobs", help='--import: the configuration served, e.g. "weights=FP8,kv=fp8" (default: the baseline).'
)

CALIBRATE_OUTPUT_TOKENS = typer.Option(
    None,
    "--output-tokens",
    help="--import: the output length every request asked for, to check the token-count contract.",
)

CALIBRATE_TABLE = typer.Option(
    None, "--table", help="--published: another published-anchor CSV in the shipped table's columns (repeatable)."
)

CALIBRATE_MULTI_GPU = typer.Option(
    False,
    "--multi-gpu",
    help="--published: also fit "
    "spec/published_multigpu.csv per card and engine and print its held-out "
    "error per parallelism (one source, model, engine left out), and spec/published_moe.csv's "
    "mixture-of-experts fit per card with its held-out error; minutes.",
)

# pick
PICK_CONSTRAINT = typer.Argument(
    None,
    metavar="CONSTRAINT",
    show_default=False,
    help='e.g. "tpot_p99_ms<=40, quality_rel>=0.95" (given alone, it is the constraint and STUDY is the default).',
)

PICK_ALLOW_PRIORS = typer.Option(
    False,
    "--allow-priors",
    help="Let configurations whose quality or speed rests only on priors "
    "win (default: they are listed as projected, with the command that "
    "would measure them).",
)

PICK_MODEL = typer.Option(None, help="Answer for this model only (default: each model the atlas answers for).")
