"""KL divergence by the real llama-perplexity on SmolLM2-135M: the baseline's logits, three arms of
growing damage, and the stage end to end into a store (slow: the binary is built by
`make llama-tools`, minutes on 2 cores, which CI's default run does not do)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from pareto_atlas.measure.weights import smollm2_gguf, variant_file
from pareto_atlas.quality import kld as K
from pareto_atlas.quality import kld_stage as S
from pareto_atlas.spec.study import load_study
from pareto_atlas.store import Store

pytestmark = [pytest.mark.slow, pytest.mark.engine]
MODEL = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def exe() -> Path:
    exe = K.llama_perplexity()
    if exe is None:
        pytest.skip("llama-perplexity is not built: `make llama-tools` builds it (~7 min on 2 cores, once)")
    return exe


@pytest.fixture(scope="module")
def base(exe, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("kld")
    text, _ = K.kld_text(1)
    (d / "text.txt").write_text(text)
    out, _ = K.run_perplexity(K.base_argv(exe, smollm2_gguf(), "f16", d / "text.txt", d / "base.kld", 1))
    parsed = K.parse_base(out)
    assert parsed.chunks == 1 and parsed.ppl > 1
    return d / "base.kld"


def _arm(exe: Path, base: Path, weights: str, kv: str) -> K.KldResult:
    path = smollm2_gguf() if weights == "Q4_1" else variant_file(MODEL, weights)[0]
    out, _ = K.run_perplexity(K.arm_argv(exe, path, kv, base))
    return K.summarize(K.parse_kld(out))


def test_kld_orders_arms_by_their_damage(exe, base):
    same = _arm(exe, base, "Q4_1", "f16")  # the baseline against itself
    q8 = _arm(exe, base, "Q8_0", "f16")  # a re-encoding above the Q4_1 source
    kvq4 = _arm(exe, base, "Q4_1", "q4_0")  # 4-bit KV cache
    rand = _arm(exe, base, "RANDOM", "f16")  # the deliberately broken arm
    assert same.kld.value < 1e-3 and same.top1.value > 0.99
    assert q8.kld.hi < kvq4.kld.lo and kvq4.kld.hi < rand.kld.lo
    assert rand.top1.hi < kvq4.top1.lo and kvq4.top1.value < q8.top1.value
    assert rand.kld.value > 1.0 and rand.ppl_ratio[1] > 2.0
    assert q8.n_tokens == kvq4.n_tokens == K.scored_per_chunk()


def test_stage_on_the_tiny_study_stores_every_configuration_once(exe, tmp_path):
    study, console = load_study("tiny"), Console(file=open("/dev/null", "w"))
    with Store(tmp_path / "s.duckdb") as store:
        rows = S.kld_study(study, store, console, tokens=255, workdir=tmp_path / "w")
        assert [r["role"] for r in rows] == ["base", "arm"] and rows[1]["weights"] == "Q8_0"
        assert 0.0 <= rows[1]["kld_lo"] <= rows[1]["kld"] <= rows[1]["kld_hi"] < 0.05
        assert rows[1]["engine_version"].startswith("llama.cpp 11434.0.0")
        assert not list((tmp_path / "w").glob("*.kld"))  # the baseline's logits are gone
        assert len(store.kld_points(study.name)) == 2
        t = len(list((tmp_path / "w").iterdir()))
        S.kld_study(study, store, console, tokens=255, workdir=tmp_path / "w")
        assert len(store.kld_points(study.name)) == 2 and len(list((tmp_path / "w").iterdir())) == t
