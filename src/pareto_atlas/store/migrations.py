"""Append-only, named schema migrations. Never edit one that has shipped: add the next."""

from __future__ import annotations

MIGRATIONS: list[tuple[str, str]] = [
    (
        "001_anchors",
        """
        CREATE TABLE anchors (
            anchor_id TEXT PRIMARY KEY,      -- hash of study, arm, knobs, workload, load, model, hardware, repeat
            study TEXT, arm TEXT, repeat INTEGER, campaign_id TEXT,
            status TEXT,                     -- ok | failed
            reason TEXT,
            knobs_json TEXT, workload_json TEXT, load_json TEXT,
            model TEXT, model_file TEXT, model_sha256 TEXT,
            engine TEXT, engine_version TEXT,
            hardware TEXT, hardware_json TEXT,
            provenance_json TEXT, metrics_json TEXT,
            started_at TIMESTAMP, finished_at TIMESTAMP, tool_version TEXT
        );
        CREATE TABLE requests (
            anchor_id TEXT, idx INTEGER, warmup BOOLEAN, ok BOOLEAN, record_json TEXT
        );
    """,
    ),
    (
        "002_quality",
        """
        CREATE TABLE quality_runs (
            qrun_id TEXT PRIMARY KEY,        -- hash of study, arm, quality knobs, task, mode, n, seed, model
            study TEXT, arm TEXT, quality_key TEXT, task TEXT, mode TEXT, n INTEGER, seed INTEGER,
            model_sha256 TEXT, engine TEXT, engine_version TEXT,
            status TEXT, reason TEXT, summary_json TEXT,
            started_at TIMESTAMP, finished_at TIMESTAMP, tool_version TEXT
        );
        CREATE TABLE quality_items (
            qrun_id TEXT, item_id TEXT, record_json TEXT
        );
    """,
    ),
    (
        "003_calibration_and_simulation",
        """
        CREATE TABLE calibrations (
            calib_id TEXT PRIMARY KEY, study TEXT, hardware TEXT, engine TEXT, engine_version TEXT,
            params_json TEXT, fidelity_json TEXT, n_anchors INTEGER, created_at TIMESTAMP, tool_version TEXT
        );
        CREATE TABLE sim_runs (
            sim_id TEXT PRIMARY KEY, study TEXT, calib_id TEXT, n_points INTEGER,
            created_at TIMESTAMP, tool_version TEXT
        );
    """,
    ),
    (
        "004_hardware_probes",
        """
        CREATE TABLE hardware_probes (
            probe_id TEXT PRIMARY KEY, hardware TEXT, card_json TEXT, created_at TIMESTAMP
        );
    """,
    ),
    # KV eviction measured on the real model in transformers (llama.cpp has none): one row per
    # policy and keep ratio on one item set, plus that set's full-cache reference (policy 'none').
    (
        "005_eviction_points",
        """
        CREATE TABLE eviction_points (
            evict_id TEXT PRIMARY KEY,       -- hash of study, model file, item set, policy, keep, chunk, engine
            ref_id TEXT,                     -- evict_id of the full-cache run on the same items (itself for 'none')
            study TEXT, model TEXT, model_file TEXT, model_sha256 TEXT,
            task TEXT, mode TEXT,            -- gsm8k chat-0shot | lm-eval-5shot; retrieval niah
            n INTEGER,                       -- as asked: GSM8K items, or retrieval items per (length, depth)
            seed INTEGER, items_json TEXT,   -- everything that defines the item set
            policy TEXT, keep DOUBLE, chunk INTEGER, label TEXT,
            kv_keep DOUBLE,                  -- achieved: cache kept / full cache, mean over items
            peak_kv_tokens INTEGER, kv_bytes_per_token INTEGER,
            n_items INTEGER, correct INTEGER, p DOUBLE, lo DOUBLE, hi DOUBLE,   -- strict, Wilson 95 %
            ppl DOUBLE, ppl_full DOUBLE, ppl_item TEXT,                         -- perplexity of one item's prompt
            seconds DOUBLE, engine TEXT, engine_version TEXT,
            created_at TIMESTAMP, tool_version TEXT
        );
        CREATE TABLE eviction_items (
            evict_id TEXT, item_id TEXT, record_json TEXT
        );
    """,
    ),
    # Token-level KL divergence and top-1 agreement of each quality configuration against the
    # baseline arm (llama.cpp's llama-perplexity on a fixed GSM8K text; quality.kld): one row per
    # (study, configuration, base, text, chunks, ctx). The baseline's own row (role 'base') is zero
    # by definition and carries the baseline's perplexity. Intervals are 95 %, chunk-clustered.
    (
        "006_kld_points",
        """
        CREATE TABLE kld_points (
            kld_id TEXT PRIMARY KEY,         -- hash of study, model, quality key, base, text, chunks, ctx, engine
            study TEXT, arm TEXT, role TEXT, -- role: base | arm
            quality_key TEXT, weights TEXT, kv TEXT,
            model TEXT, model_file TEXT, model_sha256 TEXT,
            base_arm TEXT, base_sha256 TEXT, base_kv TEXT,
            text_source TEXT, text_sha256 TEXT,
            n_tokens INTEGER,                -- tokens scored (chunks x (ctx - 1 - ctx/2))
            chunks INTEGER, ctx INTEGER, threads INTEGER,
            kld DOUBLE, kld_lo DOUBLE, kld_hi DOUBLE, kld_se DOUBLE, kld_token_se DOUBLE, kld_deff DOUBLE,
            kld_median DOUBLE, kld_p99 DOUBLE, kld_p999 DOUBLE, kld_max DOUBLE,
            top1 DOUBLE, top1_lo DOUBLE, top1_hi DOUBLE, top1_se DOUBLE, top1_token_se DOUBLE, top1_deff DOUBLE,
            ln_ppl_ratio DOUBLE, ln_ppl_ratio_lo DOUBLE, ln_ppl_ratio_hi DOUBLE, ln_ppl_ratio_se DOUBLE,
            ln_ppl_ratio_token_se DOUBLE, ln_ppl_ratio_deff DOUBLE,
            ppl DOUBLE, ppl_base DOUBLE,
            interval_method TEXT,
            engine TEXT, engine_version TEXT, seconds DOUBLE, output TEXT,
            created_at TIMESTAMP, tool_version TEXT
        );
    """,
    ),
    # A sweep's shards as they finish (simulate.resume): a simulate stage stopped midway resumes
    # from them. Points are Parquet bytes: the points table's columns grow with the code.
    (
        "007_sim_shards",
        """
        CREATE TABLE sim_shards (
            sweep_key TEXT, study TEXT, shard INTEGER, n_shards INTEGER, points BLOB,
            created_at TIMESTAMP, tool_version TEXT,
            PRIMARY KEY (sweep_key, shard)
        );
    """,
    ),
]
MIGRATIONS.append(
    # Result files of other tools imported as anchors (measure.imports): each file's bytes kept beside
    # the anchors it gave (their provenance names it imported:<tool>@<version>:<sha256>), and the
    # quality evidence of evaluation harnesses. One row per (study, file): importing it again is a no-op.
    (
        "008_imports",
        """
        CREATE TABLE import_files (
            study TEXT, sha256 TEXT, tool TEXT, tool_version TEXT, file_name TEXT, n_bytes INTEGER,
            content BLOB, summary_json TEXT, imported_at TIMESTAMP, atlas_version TEXT,
            PRIMARY KEY (study, sha256)
        );
        CREATE TABLE imported_quality (
            evidence_id TEXT PRIMARY KEY,    -- hash of study, file sha256, task, metric
            study TEXT, sha256 TEXT, task TEXT, metric TEXT, value DOUBLE, stderr DOUBLE,
            n INTEGER, n_original INTEGER, knobs_json TEXT, model TEXT, settings_json TEXT,
            provenance_json TEXT, created_at TIMESTAMP
        );
    """,
    )
)
