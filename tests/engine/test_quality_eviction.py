"""KV eviction on the real small model in transformers (slow; needs the `eviction` extra)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.engine]



@pytest.fixture(scope="module")
def eviction_extra():
    # `make test-slow` installs the eviction extra; checked here, not at import, so that the
    # default run (which deselects slow tests) does not report a skip.
    pytest.importorskip("torch", reason="KV eviction needs the optional extra: pip install 'pareto-atlas[eviction]'")
    pytest.importorskip("transformers", reason="KV eviction needs the optional extra: pip install 'pareto-atlas[eviction]'")


@pytest.fixture(scope="module")
def smollm2(eviction_extra):
    from pareto_atlas.measure.weights import smollm2_gguf
    from pareto_atlas.quality.eviction.model import load_dense

    return load_dense(smollm2_gguf())


def test_full_cache_matches_plain_greedy_and_eviction_bounds_memory(smollm2):
    from pareto_atlas.quality.eviction.decode import generate, perplexity
    from pareto_atlas.quality.eviction.policies import EvictionConfig
    from pareto_atlas.quality.retrieval import retrieval_items

    model, tok = smollm2
    item = retrieval_items((256,), (0.5,), per_cell=1, count_tokens=lambda s: len(tok(s).input_ids))[0]
    full = generate(model, tok, item.prompt, EvictionConfig(), max_new_tokens=8)
    # The manual chunked loop must reproduce HF's own greedy decoding with a full cache.
    ids = tok(item.prompt, return_tensors="pt").input_ids
    ref = model.generate(ids, max_new_tokens=len(full.token_ids), do_sample=False)[0, ids.shape[1]:].tolist()
    assert list(full.token_ids) == ref
    cfg = EvictionConfig("h2o", 0.25, chunk=64)
    ev = generate(model, tok, item.prompt, cfg, max_new_tokens=8)
    assert ev.peak_kv_tokens <= cfg.budget(ev.n_prompt) + 64 and ev.kv_keep < 0.3
    p_full, p_ev = perplexity(model, tok, item.prompt, EvictionConfig()), perplexity(model, tok, item.prompt, cfg)
    assert p_full.n_tokens == p_ev.n_tokens == ids.shape[1] - 1
    assert p_full.ppl > 1 and p_ev.ppl > 1


def check_stored_sweep(store_path) -> None:
    """What `evict tiny --policies h2o,snapkv --keeps 0.5 --task retrieval --n 1` must leave in the store."""
    from pareto_atlas.measure.weights import SOURCES
    from pareto_atlas.spec.study import load_study
    from pareto_atlas.store import Store
    from pareto_atlas.store.points import eviction_effects

    study = load_study("tiny")
    with Store(store_path) as s:
        pts = s.eviction_points("tiny").set_index("policy")
        assert set(pts.index) == {"none", "h2o", "snapkv"}
        full = pts.loc["none"]
        assert full.kv_keep == 1.0 and full.keep == 1.0 and full.ppl == full.ppl_full > 1
        assert full.model_sha256 == SOURCES[study.model.name].sha256 and full.engine == "transformers-dense-gguf"
        ids = [it["item_id"] for it in s.eviction_items(full.evict_id)]
        assert len(ids) == full.n_items == 3          # one needle per depth at 256 tokens
        for policy in ("h2o", "snapkv"):
            ev = pts.loc[policy]
            assert ev.ref_id == full.evict_id and ev.ppl_full == full.ppl and ev.keep == 0.5
            # the cache really shrank: about half kept at the end, and a smaller peak than the full cache
            assert 0.4 < ev.kv_keep < 0.6 and ev.peak_kv_tokens < full.peak_kv_tokens
            # SmolLM2-135M: 30 layers x 3 KV heads x 64 dims x (K, V) x 2 bytes
            assert ev.kv_bytes_per_token == 30 * 3 * 64 * 2 * 2
            assert [it["item_id"] for it in s.eviction_items(ev.evict_id)] == ids
            assert 0 <= ev.correct <= ev.n_items == 3 and ev.lo <= ev.p <= ev.hi
        effects = eviction_effects(study, s)
    assert {p: [e["keep"] for e in v] for p, v in effects.items()} == {"h2o": [0.5], "snapkv": [0.5]}


def test_evict_subcommand_stores_each_point_and_a_rerun_keeps_them(eviction_extra, tmp_path):
    from typer.testing import CliRunner

    from pareto_atlas.cli import app

    store = tmp_path / "store.duckdb"
    args = ["evict", "tiny", "--policies", "h2o,snapkv", "--keeps", "0.5", "--task", "retrieval", "--n", "1",
            "--store", str(store), "--out", str(tmp_path)]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    check_stored_sweep(store)
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and again.output.count("stored earlier, kept") == 3
    assert "model loaded" not in again.output
