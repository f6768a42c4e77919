"""Engine registry, flag mappings, process management (fake binaries), and secret hygiene."""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap

import pytest

from pareto_atlas.measure.engines import ArmLaunch, EngineStartError, get_engine
from pareto_atlas.measure.engines.llamacpp import llama_server_argv, worker_params
from pareto_atlas.measure.engines.vllm import vllm_argv
from pareto_atlas.measure.fakeserver import FakeOpenAIServer
from pareto_atlas.spec.knobs import Knobs


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_registry_error_lists_valid_names():
    with pytest.raises(ValueError, match="Unsupported engine: 'tgi'. Supported engines: llamacpp, vllm, openai"):
        get_engine("tgi")
    assert get_engine("vllm").name == "vllm"


def test_vllm_fp8_kv_awq_and_batching_flags():
    launch = ArmLaunch(
        model_path="Qwen/Qwen2.5-0.5B-AWQ",
        n_ctx=4096,
        knobs=Knobs(weights="AWQ4", kv="fp8", slots=64, batching="chunked", chunk_tokens=512),
        extra={"gpu_memory_utilization": 0.8, "seed": 7},
    )
    argv = vllm_argv(launch, 8123, "vllm")
    assert argv[:3] == ["vllm", "serve", "Qwen/Qwen2.5-0.5B-AWQ"]
    assert flag(argv, "--quantization") == "awq" and flag(argv, "--kv-cache-dtype") == "fp8"
    assert flag(argv, "--max-num-seqs") == "64" and flag(argv, "--max-num-batched-tokens") == "512"
    assert "--enable-chunked-prefill" in argv and "--no-enable-prefix-caching" in argv
    assert flag(argv, "--gpu-memory-utilization") == "0.8" and flag(argv, "--seed") == "7"
    assert flag(argv, "--max-model-len") == "4096" and flag(argv, "--port") == "8123"
    fp8 = vllm_argv(ArmLaunch(model_path="m", knobs=Knobs(weights="FP8")), 1)
    assert flag(fp8, "--quantization") == "fp8" and flag(fp8, "--kv-cache-dtype") == "auto"
    assert "--enable-chunked-prefill" not in fp8


def test_vllm_speculative_configs():
    ngram = vllm_argv(ArmLaunch(model_path="m", knobs=Knobs(spec="ngram", spec_k=5), extra={"prompt_lookup_max": 3}), 1)
    assert json.loads(flag(ngram, "--speculative-config")) == {
        "method": "ngram",
        "num_speculative_tokens": 5,
        "prompt_lookup_max": 3,
        "prompt_lookup_min": 1,
    }
    draft = vllm_argv(ArmLaunch(model_path="m", knobs=Knobs(spec="draft", spec_k=4), draft_model_path="d"), 1)
    assert json.loads(flag(draft, "--speculative-config")) == {"model": "d", "num_speculative_tokens": 4}


@pytest.mark.parametrize(
    "knobs,match",
    [
        (Knobs(weights="Q4_0"), "knobs.weights: 'Q4_0' is not served by vllm; allowed: F32, F16, BF16, FP8, AWQ4"),
        (Knobs(kv="q8_0"), "knobs.kv: 'q8_0' is not served by vllm; allowed: f16, fp8"),
        (Knobs(spec="draft", spec_k=3), "draft_model_path: required"),
        (Knobs(batching="static"), "knobs.batching: 'static'"),
    ],
)
def test_vllm_rejects_what_it_cannot_serve(knobs, match):
    with pytest.raises(ValueError, match=match):
        vllm_argv(ArmLaunch(model_path="m", knobs=knobs), 1)
    with pytest.raises(ValueError, match="launch.extra key 'gpu_mem'"):
        vllm_argv(ArmLaunch(model_path="m", extra={"gpu_mem": 1}), 1)


def test_llamacpp_params_and_native_argv():
    p = worker_params(ArmLaunch(model_path="/m.gguf", knobs=Knobs(kv="q8_0", slots=4, spec="ngram", spec_k=6)))
    assert p["flash_attn"] and p["kv"] == "q8_0" and p["slots"] == 4 and p["spec_k"] == 6
    assert p["n_ctx"] == 4 * 2048  # every slot gets the per-request context
    argv = llama_server_argv(p, "llama-server", 9000)
    assert flag(argv, "--parallel") == "4" and flag(argv, "-fa") == "on"
    assert flag(argv, "-ctk") == "q8_0" and flag(argv, "-ctv") == "q8_0"
    assert flag(argv, "--spec-type") == "ngram-simple" and "--no-cache-prompt" in argv
    d = worker_params(ArmLaunch(model_path="/m.gguf", knobs=Knobs(spec="draft", spec_k=4), draft_model_path="/d.gguf"))
    dargv = llama_server_argv(d, "llama-server", 9000)
    assert flag(dargv, "-md") == "/d.gguf" and flag(dargv, "--spec-type") == "draft-simple" and "-fa" not in dargv
    with pytest.raises(ValueError, match="knobs.kv: 'fp8' is not served by llamacpp"):
        worker_params(ArmLaunch(model_path="/m.gguf", knobs=Knobs(kv="fp8")))


def fake_binary(tmp_path, body: str) -> str:
    path = tmp_path / "vllm"
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_process_management_with_a_fake_vllm(tmp_path):
    binary = fake_binary(
        tmp_path,
        """
        import sys, json, http.server
        port = int(sys.argv[sys.argv.index("--port") + 1])
        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = json.dumps({"version": "0.0-fake"}).encode()
                self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
                self.wfile.write(body)
            def log_message(self, *a): pass
        http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
    """,
    )
    with get_engine("vllm", binary=binary).start({"model_path": "org/model", "startup_timeout_s": 20}) as eng:
        pid = eng.pid
        assert eng.alive() and eng.version == "vllm 0.0-fake" and eng.model == "model"
        assert "--max-num-seqs" in eng.describe()["argv"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_failed_start_gives_the_last_stderr_line(tmp_path):
    binary = fake_binary(
        tmp_path,
        """
        import sys
        print("loading...", file=sys.stderr)
        print("ValueError: Unknown quantization method: awq", file=sys.stderr)
        sys.exit(1)
    """,
    )
    with pytest.raises(EngineStartError) as e:
        get_engine("vllm", binary=binary).start({"model_path": "org/model", "startup_timeout_s": 20})
    assert "Unknown quantization method: awq" in str(e.value) and "\n" not in str(e.value)


def test_api_key_never_in_describe_repr_or_errors(monkeypatch):
    secret = "sk-test-7f3a9c1e5b2d4680"
    monkeypatch.setenv("MY_KEY", secret)
    with FakeOpenAIServer() as srv:
        eng = get_engine("openai").start(
            {"extra": {"base_url": srv.base_url + "/v1", "api_key_env": "MY_KEY", "check": False}}
        )
        assert eng.headers() == {"Authorization": f"Bearer {secret}"}
        assert secret not in json.dumps(eng.describe()) + repr(eng) + str(vars(eng))
        assert eng.describe()["api_key_env"] == "MY_KEY" and eng.base_url == srv.base_url
    from pareto_atlas.measure.loadgen import run_load_sync

    # an endpoint that echoes the key back in its error must not get it into our records
    recs = run_load_sync("http://127.0.0.1:9", ["a b"], 1, concurrency=1, warmup=0, timeout_s=1, headers=eng.headers())
    assert secret not in recs[0].error
    with pytest.raises(EngineStartError) as e:
        get_engine("openai").start({"extra": {"base_url": "http://127.0.0.1:9", "api_key_env": "MY_KEY"}})
    assert secret not in str(e.value) and "cannot reach" in str(e.value)
    with pytest.raises(EngineStartError, match="api_key_env names 'NOPE_KEY'"):
        get_engine("openai").start({"extra": {"base_url": "http://x", "api_key_env": "NOPE_KEY"}})


def test_redact_scrubs_bearer_tokens():
    from pareto_atlas.measure.contract import header_secrets, redact

    s = header_secrets({"Authorization": "Bearer sk-abcdef123456"})
    assert redact("Incorrect API key provided: sk-abcdef123456.", s) == "Incorrect API key provided: ***."


def test_missing_model_is_one_line():
    with pytest.raises(EngineStartError, match=r"^llamacpp: model_path '/no/such.gguf' does not exist$"):
        get_engine("llamacpp").start({"model_path": "/no/such.gguf"})


def test_native_llama_server_is_chosen_when_given(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    binary = fake_binary(
        tmp_path,
        """
        import sys, json, http.server
        argv = sys.argv
        port = int(argv[argv.index("--port") + 1])
        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = json.dumps({"status": "ok", "build_info": "b9999-fake", "argv": argv}).encode()
                self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
                self.wfile.write(body)
            def log_message(self, *a): pass
        http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
    """,
    )
    arm = {"model_path": str(model), "knobs": Knobs(kv="q4_0", slots=3), "startup_timeout_s": 20}
    with get_engine("llamacpp", binary=binary).start(arm) as eng:
        d = eng.describe()
        assert d["backend"] == "native" and eng.version == "llama-server b9999-fake"
        assert flag(d["argv"], "--parallel") == "3" and flag(d["argv"], "-ctk") == "q4_0"
        assert eng.extra_body == {"cache_prompt": False}
    with pytest.raises(ValueError, match="llamacpp backend: 'docker'"):
        get_engine("llamacpp", backend="docker")


def test_start_failure_reason_prefers_llamas_first_error_line(tmp_path):
    from pareto_atlas.measure.engines.base import last_line

    log = tmp_path / "log"
    log.write_text("0.00.001.000 I loading\n0.00.007.650 E gguf: invalid magic\n0.00.008.000 E exiting\nbye\n")
    assert last_line(log) == "gguf: invalid magic"
    log.write_text("Traceback (most recent call last):\n  File x\nValueError: bad flag\n")
    assert last_line(log) == "ValueError: bad flag"


def test_an_endpoint_arm_with_its_own_model_asks_for_that_model_and_counts_its_bytes():
    """An endpoint study of smollm2-135m with an arm serving llama-3.1-8b (`model = { served, card }`):
    the arm's requests named the study's served id and its bytes were smollm2's (269 MB a decode step
    for an 8B model); both are now the arm's own model's."""
    from pareto_atlas.measure.anchor_plan import served_model
    from pareto_atlas.measure.launch_options import launch_extra
    from pareto_atlas.measure.resolve import parse_study
    from pareto_atlas.spec.cards import shipped_models

    study = parse_study(
        'name = "two"\n[model]\nname = "small"\nserved = "org/small"\ncard = "smollm2-135m"\n'
        '[engine]\nname = "openai"\nbase_url = "http://127.0.0.1:9"\n'
        '[[arms]]\nname = "small"\nweights = "BF16"\n'
        '[[arms]]\nname = "big"\nweights = "BF16"\nmodel = { name = "big", served = "org/big", card = "llama-3.1-8b" }\n',
        "two",
    )
    small, big = study.arms
    assert launch_extra(study, small)["model"] == "org/small" and launch_extra(study, big)["model"] == "org/big"
    for arm, card in ((small, "smollm2-135m"), (big, "llama-3.1-8b")):
        served, sha, nbytes, bits = served_model(study, arm)
        assert (served, bits) == (f"org/{arm.name}", 16.0)
        assert nbytes == shipped_models()[card].matmul_params * 2
