"""K-quants below 4 bits made by llama.cpp's own llama-quantize, served by the real engine (slow:
`make test-slow` builds llama-quantize first, about 4-10 minutes once)."""

from __future__ import annotations

import gguf
import pytest

from pareto_atlas.measure import weights as W
from pareto_atlas.measure.contract import build_contract_prompts
from pareto_atlas.measure.engines import get_engine
from pareto_atlas.measure.loadgen import run_load_sync
from pareto_atlas.spec.knobs import Knobs

pytestmark = [pytest.mark.slow, pytest.mark.engine]


@pytest.fixture(scope="module")
def quantizer():
    exe = W.llama_quantize()
    # `make test-slow` builds it; a missing one is an error here, never a skip
    assert exe is not None, "llama-quantize is not built: run make llama-tools (scripts/build_llama_tools.sh)"
    return exe


@pytest.mark.parametrize("weights", ["Q2_K", "Q3_K"])
def test_k_quant_variant_is_llama_cpps_mix_and_serves_the_contract(quantizer, weights):
    src, _ = W.source_file("smollm2-135m-instruct")
    out, sha = W.variant_file("smollm2-135m-instruct", weights)
    types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(out)).tensors}
    # SmolLM2's 1536-wide FFN down rows take K-quant blocks (llama.cpp's mix gives them more bits than
    # the nominal type: Q3_K in a Q2_K file); its 576-wide rows (not a multiple of 256) fall back to a
    # 32-block type. The file is llama.cpp's mix, and smaller than the source.
    assert any(t.endswith("_K") for t in types.values()) and "Q4_0" in types.values(), types
    assert W.matmul_bits_per_weight(out) < W.matmul_bits_per_weight(src)
    assert W.variant_file("smollm2-135m-instruct", weights) == (out, sha)  # made once, cached
    launch = {
        "model_path": str(out),
        "knobs": Knobs(weights=weights),
        "n_ctx": 1024,
        "threads": 2,
        "startup_timeout_s": 60,
        "extra": {},
    }
    with get_engine("llamacpp").start(launch) as eng:
        prompts = build_contract_prompts(eng.base_url, 32, 3, seed=5)
        recs = run_load_sync(
            eng.base_url, prompts, 8, concurrency=1, warmup=1, prompt_tokens=32, extra_body=eng.extra_body, timeout_s=60
        )
    assert all(r.ok and (r.prompt_tokens, r.completion_tokens) == (32, 8) for r in recs if not r.warmup)
