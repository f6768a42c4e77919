"""KV eviction on the real small model in transformers (slow; needs the `eviction` extra)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.engine]



@pytest.fixture(scope="module")
def smollm2():
    # `make test-slow` installs the eviction extra; checked here, not at import, so that the
    # default run (which deselects slow tests) does not report a skip.
    pytest.importorskip("torch", reason="KV eviction needs the optional extra: pip install 'pareto-atlas[eviction]'")
    pytest.importorskip("transformers", reason="KV eviction needs the optional extra: pip install 'pareto-atlas[eviction]'")
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
