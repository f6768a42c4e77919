"""Against the real llama.cpp server (xllamacpp wheel in a worker process) with SmolLM2."""

from __future__ import annotations

import os
import signal
import threading
import time

import httpx
import pytest

from pareto_atlas.measure.contract import TokenCounter, build_contract_prompts
from pareto_atlas.measure.engines import EngineStartError, get_engine
from pareto_atlas.measure.loadgen import run_load_sync
from pareto_atlas.measure.memory import PeakMemorySampler
from pareto_atlas.measure.metrics import derive_metrics
from pareto_atlas.spec.knobs import Knobs

from pareto_atlas.measure.weights import smollm2_gguf

pytestmark = pytest.mark.engine

# The test command installs the model; a missing one is an error here, never a skip.
GGUF = smollm2_gguf()


def launch(extra: dict | None = None, **knobs) -> dict:
    return {
        "model_path": str(GGUF),
        "knobs": Knobs(weights="Q4_0", **{"slots": 2, **knobs}),
        "n_ctx": 2048,
        "threads": 2,
        "startup_timeout_s": 60,
        "extra": extra or {},
    }


@pytest.fixture(scope="module")
def engine():
    if not GGUF.is_file():
        pytest.skip("SmolLM2 GGUF not installed")
    with get_engine("llamacpp").start(launch()) as eng:
        yield eng


def test_exact_contract_holds_and_violators_are_visible(engine):
    P, N = 64, 8
    prompts = build_contract_prompts(engine.base_url, P, 7, seed=11)  # 1 warm-up + 6 measured
    prompts[-1] += " and one more word"  # a violator: the server will count more than P
    with PeakMemorySampler(engine.pid, gpu=False) as mem:
        recs = run_load_sync(
            engine.base_url,
            prompts,
            N,
            concurrency=2,
            warmup=1,
            prompt_tokens=P,
            extra_body=engine.extra_body,
            timeout_s=120,
        )
    measured = [r for r in recs if not r.warmup]
    assert len(measured) == 6 and not any(r.error for r in recs)
    for r in measured[:-1]:
        assert r.ok, r.reject_reason
        assert (r.prompt_tokens, r.completion_tokens) == (P, N)
        assert r.server_timings and "prompt_ms" in r.server_timings
    assert not measured[-1].ok and measured[-1].reject_reason.startswith(
        f"prompt_tokens {measured[-1].prompt_tokens} != contract P={P}"
    )
    m = derive_metrics(recs, P, N)
    assert (m.n_ok, m.n_rejected, m.n_errors) == (5, 1, 0)
    assert m.tpot.n == 5 and m.throughput_tok_s > 0
    overhead = m.ttft_minus_server_prompt_ms_p50
    # at concurrency 2 this includes time the request waited inside the server for the other
    # slot's batch; the harness's own overhead (1 request at a time) is benchmarks/bench_harness.py
    print(
        f"\nclient TTFT - server prompt_ms, median: {overhead:.2f} ms at concurrency 2; "
        f"client TPOT - server predicted_per_token_ms: {m.tpot_minus_server_tpot_ms_p50:.2f} ms; "
        f"peak RSS {mem.peak_rss_bytes / 1e6:.0f} MB"
    )
    assert overhead > -1.0  # the client cannot see the first token before the server finished the prompt
    assert mem.peak_rss_bytes > GGUF.stat().st_size * 0.5
    assert engine.describe()["version"].startswith("xllamacpp ")


def test_chat_api_contract(engine):
    # P counts the chat template (SmolLM2's adds a system prompt of ~30 tokens) as the server does
    prompts = build_contract_prompts(engine.base_url, 64, 2, seed=5, api="chat")
    recs = run_load_sync(
        engine.base_url, prompts, 4, concurrency=1, warmup=0, api="chat", prompt_tokens=64, extra_body=engine.extra_body
    )
    assert all(r.ok and (r.prompt_tokens, r.completion_tokens) == (64, 4) for r in recs), recs


def test_killing_the_engine_mid_run_records_errors():
    with get_engine("llamacpp").start(launch()) as eng:
        prompts = build_contract_prompts(eng.base_url, 32, 4, seed=2)
        first = threading.Event()

        def on_record(_r) -> None:
            first.set()

        def killer() -> None:
            first.wait(300)  # generous: a shared 2-core box can be very slow
            os.kill(eng.pid, signal.SIGKILL)

        threading.Thread(target=killer, daemon=True).start()
        recs = run_load_sync(
            eng.base_url,
            prompts,
            8,
            concurrency=1,
            warmup=0,
            on_record=on_record,
            extra_body=eng.extra_body,
            timeout_s=300,
        )
        deadline = time.monotonic() + 10  # SIGKILL is sent; tearing down a big process takes a moment
        while eng.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not eng.alive()
    why = [(r.ok, r.reject_reason, r.error) for r in recs]
    assert recs[0].ok, why
    assert len(recs) == 4 and all(r.error and not r.ok for r in recs[2:]), why
    assert derive_metrics(recs, 32, 8).n_errors >= 2


def test_missing_model_gives_one_line_error(tmp_path):
    with pytest.raises(EngineStartError) as e:
        get_engine("llamacpp").start({"model_path": str(tmp_path / "nope.gguf"), "knobs": Knobs()})
    assert "model_path" in str(e.value) and "does not exist" in str(e.value) and "\n" not in str(e.value)


def test_corrupt_model_gives_one_line_error_from_the_worker(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf at all" * 10)
    with pytest.raises(EngineStartError) as e:
        get_engine("llamacpp", backend="wheel").start(
            {"model_path": str(bad), "knobs": Knobs(), "startup_timeout_s": 60}
        )
    print(f"\n{e.value}")
    assert str(e.value).startswith("llamacpp") and "\n" not in str(e.value)
    assert "expected 'GGUF'" in str(e.value)  # llama.cpp's own root cause, not xllamacpp's generic message


def repeating_prompt(base_url: str, P: int) -> str:
    """A prompt of exactly `P` server tokens that counts in a repeating cycle: greedy decoding goes
    on counting, so what an n-gram lookup drafts from the prompt is what the model then says."""
    cycle = "one two three four five six seven eight".split() * (P // 4 + 2)
    with httpx.Client(base_url=base_url, timeout=60) as client:
        count = TokenCounter(client)
        for k in range(1, len(cycle) + 1):
            text = "Keep counting: " + " ".join(cycle[:k])
            if count(text) == P:
                return text
    raise AssertionError(f"no repeating prompt of exactly {P} tokens")


def test_quantized_kv_and_ngram_speculation_arm():
    # a 2-token lookup with one hit drafts as soon as any bigram repeats: drafts are certain
    arm = launch(kv="q8_0", spec="ngram", spec_k=4, slots=1, extra={"ngram_size_n": 2, "ngram_min_hits": 1})
    with get_engine("llamacpp").start(arm) as eng:
        assert eng.describe()["launch"]["flash_attn"] is True
        prompts = [repeating_prompt(eng.base_url, 48)]
        recs = run_load_sync(
            eng.base_url, prompts, 24, concurrency=1, warmup=0, prompt_tokens=48, extra_body=eng.extra_body
        )
    m = derive_metrics(recs, 48, 24)
    assert m.n_ok == 1
    print(f"\nn-gram speculation: {m.spec_draft_accepted}/{m.spec_draft_n} drafted tokens accepted")
    # speculation ran: it drafted, and the model's counting accepted some of the drafts
    assert m.spec_draft_n is not None and m.spec_draft_n > 0
    assert m.spec_draft_accepted is not None and 0 < m.spec_draft_accepted <= m.spec_draft_n


def test_worker_does_not_outlive_a_killed_campaign():
    import subprocess
    import sys

    import psutil

    code = (
        "import sys, json; from pareto_atlas.measure.engines import get_engine; from pareto_atlas.spec.knobs import Knobs; "
        f"e = get_engine('llamacpp', backend='wheel').start({{'model_path': {str(GGUF)!r}, 'knobs': Knobs()}}); "
        "print(e.pid, flush=True); import time; time.sleep(600)"
    )
    campaign = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    worker = psutil.Process(int(campaign.stdout.readline()))
    try:
        assert worker.is_running()
        campaign.kill()  # kill -9: no cleanup code runs in the campaign
        campaign.wait()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and worker.is_running() and worker.status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.2)
        assert not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE
    finally:
        if worker.is_running():
            worker.kill()
