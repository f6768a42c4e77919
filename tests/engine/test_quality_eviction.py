"""KV eviction and top-k sparse attention on the real small model in transformers (slow; needs the
`eviction` extra)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.engine]


@pytest.fixture(scope="module")
def eviction_extra():
    # `make test-slow` installs the eviction extra; checked here, not at import, so that the
    # default run (which deselects slow tests) does not report a skip.
    pytest.importorskip("torch", reason="KV eviction needs the optional extra: pip install 'pareto-atlas[eviction]'")
    pytest.importorskip(
        "transformers", reason="KV eviction needs the optional extra: pip install 'pareto-atlas[eviction]'"
    )


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
    ref = model.generate(ids, max_new_tokens=len(full.token_ids), do_sample=False)[0, ids.shape[1] :].tolist()
    assert list(full.token_ids) == ref
    cfg = EvictionConfig("h2o", 0.25, chunk=64)
    ev = generate(model, tok, item.prompt, cfg, max_new_tokens=8)
    assert ev.peak_kv_tokens <= cfg.budget(ev.n_prompt) + 64 and ev.kv_keep < 0.3
    p_full, p_ev = perplexity(model, tok, item.prompt, EvictionConfig()), perplexity(model, tok, item.prompt, cfg)
    assert p_full.n_tokens == p_ev.n_tokens == ids.shape[1] - 1
    assert p_full.ppl > 1 and p_ev.ppl > 1


def test_top_k_at_budget_one_is_the_full_cache_and_below_it_reads_a_share_of_the_keys(smollm2):
    import math
    from contextlib import nullcontext

    import torch

    from pareto_atlas.quality.eviction.decode import PrunedCache, _forward, generate, perplexity
    from pareto_atlas.quality.eviction.policies import EvictionConfig
    from pareto_atlas.quality.eviction.sparse import TopK, sparse_attention
    from pareto_atlas.quality.retrieval import retrieval_items

    model, tok = smollm2
    item = retrieval_items((256,), (0.5,), per_cell=1, count_tokens=lambda s: len(tok(s).input_ids))[0]
    ids = tok(item.prompt, return_tensors="pt").input_ids
    n = ids.shape[1]

    def last_step(keep: float | None) -> tuple[torch.Tensor, TopK | None]:
        """Logits of a decode step for the prompt's last token over the cache of all before it:
        plain eager attention (None), or top-k attention at `keep`."""
        cfg = EvictionConfig() if keep is None else EvictionConfig("topk", keep)
        state = PrunedCache(model, cfg, None)
        topk = TopK(cfg) if cfg.sparse else None
        with torch.no_grad(), sparse_attention(model) if topk else nullcontext():
            _forward(model, state, ids[:, :-1], 0, compress=False)
            return _forward(model, state, ids[:, -1:], n - 1, compress=False, topk=topk), topk

    full, _ = last_step(None)
    one, read_all = last_step(1.0)
    quarter, read_quarter = last_step(0.25)
    assert model.config._attn_implementation == "eager"  # restored after each sparse block
    assert read_all.rows == model.config.num_hidden_layers and read_all.fraction() == 1.0
    assert torch.equal(one, full)  # every key read: exactly the full cache
    assert read_quarter.fraction() == pytest.approx(math.ceil(0.25 * n) / n)
    assert (quarter - full).abs().max() > 1e-3  # a quarter of the keys: attention changed

    cfg = EvictionConfig("topk", 0.25)
    g_full = generate(model, tok, item.prompt, EvictionConfig(), 8)
    assert generate(model, tok, item.prompt, EvictionConfig("topk", 1.0), 8).token_ids == g_full.token_ids
    g = generate(model, tok, item.prompt, cfg, 8)
    assert g.peak_kv_tokens == g_full.peak_kv_tokens  # nothing evicted
    assert g.sparse_steps >= 1 and g_full.sparse_steps == 0  # the first token comes from the dense prefill
    assert 0.25 <= g.kv_keep < 0.27

    p_full, p_one, p_q = (
        perplexity(model, tok, item.prompt, c) for c in (EvictionConfig(), EvictionConfig("topk", 1.0), cfg)
    )
    assert p_one.nll == p_full.nll and p_one.kv_keep == 1.0
    # every teacher-forced token reads its own top quarter, at least 16 keys: the early ones read all
    assert p_q.nll != p_full.nll and 0.25 < p_q.kv_keep < 0.45
    assert p_q.peak_kv_tokens == p_full.peak_kv_tokens and p_q.n_tokens == p_full.n_tokens


def check_stored_sweep(store_path) -> None:
    """What `evict tiny --policies h2o,snapkv,topk --keeps 0.5 --task retrieval --n 1` must leave in the store."""
    from pareto_atlas.measure.weights import SOURCES
    from pareto_atlas.spec.study import load_study
    from pareto_atlas.store import Store
    from pareto_atlas.store.quality import eviction_effects

    study = load_study("tiny")
    with Store(store_path) as s:
        pts = s.eviction_points("tiny").set_index("policy")
        assert set(pts.index) == {"none", "h2o", "snapkv", "topk"}
        full = pts.loc["none"]
        assert full.kv_keep == 1.0 and full.keep == 1.0 and full.ppl == full.ppl_full > 1
        assert full.model_sha256 == SOURCES[study.model.name].sha256 and full.engine == "transformers-dense-gguf"
        ids = [it["item_id"] for it in s.eviction_items(full.evict_id)]
        assert len(ids) == full.n_items == 3  # one needle per depth at 256 tokens
        for policy in ("h2o", "snapkv"):
            ev = pts.loc[policy]
            assert ev.ref_id == full.evict_id and ev.ppl_full == full.ppl and ev.keep == 0.5
            # the cache really shrank: about half kept at the end, and a smaller peak than the full cache
            assert 0.4 < ev.kv_keep < 0.6 and ev.peak_kv_tokens < full.peak_kv_tokens
            # SmolLM2-135M: 30 layers x 3 KV heads x 64 dims x (K, V) x 2 bytes
            assert ev.kv_bytes_per_token == 30 * 3 * 64 * 2 * 2
            assert [it["item_id"] for it in s.eviction_items(ev.evict_id)] == ids
            assert 0 <= ev.correct <= ev.n_items == 3 and ev.lo <= ev.p <= ev.hi
        sparse = pts.loc["topk"]
        # top-k evicts nothing: the full cache's peak, and about half the keys read per decode step
        assert sparse.ref_id == full.evict_id and sparse.keep == 0.5 and sparse.peak_kv_tokens == full.peak_kv_tokens
        assert 0.5 <= sparse.kv_keep < 0.6 and sparse.ppl != full.ppl
        effects = eviction_effects(study, s)
    assert {p: [e["keep"] for e in v] for p, v in effects.items()} == {"h2o": [0.5], "snapkv": [0.5], "topk": [0.5]}


def test_evict_subcommand_stores_each_point_and_a_rerun_keeps_them(eviction_extra, tmp_path):
    from typer.testing import CliRunner

    from pareto_atlas.cli import app

    store = tmp_path / "store.duckdb"
    args = [
        "evict",
        "tiny",
        "--policies",
        "h2o,snapkv,topk",
        "--keeps",
        "0.5",
        "--task",
        "retrieval",
        "--n",
        "1",
        "--store",
        str(store),
        "--out",
        str(tmp_path),
    ]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    check_stored_sweep(store)
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and again.output.count("stored earlier, kept") == 4
    assert "model loaded" not in again.output


def test_pyramidkv_cuts_each_layer_to_its_budget_and_masks_each_layer_causally(smollm2):
    import torch

    from pareto_atlas.quality.eviction.decode import _attention, _chunks, _forward, _state, generate, perplexity
    from pareto_atlas.quality.eviction.policies import EvictionConfig
    from pareto_atlas.quality.retrieval import retrieval_items

    model, tok = smollm2
    n_layers = model.config.num_hidden_layers
    item = retrieval_items((256,), (0.5,), per_cell=1, count_tokens=lambda s: len(tok(s).input_ids))[0]
    ids = tok(item.prompt, return_tensors="pt").input_ids
    n = ids.shape[1]
    cfg = EvictionConfig("pyramidkv", 0.25, chunk=64)
    budgets = cfg.budgets(n, n_layers)
    assert budgets[0] > budgets[-1] and sum(budgets) == cfg.budget(n) * n_layers

    def prefill(upto: int):
        """The pruned cache after every chunk but the last, and the last chunk's logits cut at `upto`."""
        state = _state(model, cfg, n)
        bounds = _chunks(n, cfg.chunk)
        with torch.no_grad(), _attention(model, state):
            for s, e in bounds[:-1]:
                _forward(model, state, ids[:, s:e], s, compress=True)
            s, e = bounds[-1]
            logits = _forward(model, state, ids[:, s:upto], s, compress=False)
        return state, logits

    assert model.config._attn_implementation == "eager"
    state, whole = prefill(n)
    assert state.ragged and model.config._attn_implementation == "eager"  # restored after the block
    # before the last chunk is compressed, each layer holds its budget plus the 64 new tokens
    assert state.lengths() == [b + 64 for b in budgets]
    assert [lay.keys.shape[-2] for lay in state.cache.layers] == state.lengths()
    # causal within the chunk in every layer, however short its cache: a token's logits do not
    # change when the tokens after it are left out
    _, cut = prefill(n - 10)
    assert torch.allclose(cut[0], whole[0, :-10], atol=1e-4)

    state = _state(model, cfg, n)
    with torch.no_grad(), _attention(model, state):
        for s, e in _chunks(n, cfg.chunk):
            _forward(model, state, ids[:, s:e], s, compress=True)
    assert state.lengths() == list(budgets) and state.held() == cfg.budget(n)
    g = generate(model, tok, item.prompt, cfg, 8)
    snap = generate(model, tok, item.prompt, EvictionConfig("snapkv", 0.25, chunk=64), 8)
    # SnapKV's memory at the same keep: the mean budget, plus the tokens decoded after the prompt
    b, m = cfg.budget(n), len(g.token_ids)
    assert b / n <= g.kv_keep <= (b + m) / (n + m) and g.peak_kv_tokens <= b + 64
    if m == len(snap.token_ids):
        assert g.kv_keep == snap.kv_keep
    p = perplexity(model, tok, item.prompt, cfg)
    assert p.kv_keep == pytest.approx(cfg.budget(n) / n) and p.ppl > 1
