"""Where an arm measures: hardware cards in the study, a served model that nothing local describes
but its card, vLLM checkpoints read from the host's cache with their own quantization_config, and
errored requests as part of an anchor's verdict (printed, flagged, left out of calibration)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from pareto_atlas import stages
from pareto_atlas.measure.campaign import ERROR_SHARE_MAX, anchor_id, error_verdict, plan, run_campaign
from pareto_atlas.measure.fakeserver import FakeBehaviour, FakeOpenAIServer
from pareto_atlas.measure.hf_checkpoint import checkpoint_format, find_checkpoint
from pareto_atlas.measure.hostinfo import endpoint_description, gpus_from_smi
from pareto_atlas.measure.metrics import derive_metrics
from pareto_atlas.measure.records import RequestRecord
from pareto_atlas.measure.resolve import parse_study  # with the checks that read the host
from pareto_atlas.spec.study import StudyError
from pareto_atlas.store import Store

LLAMA_ID = "meta-llama/Llama-3.1-8B-Instruct"


def endpoint_study(
    url: str,
    *,
    hardware: str = "this-cpu",
    model: str = 'name = "m"\ncard = "llama-3.1-8b"',
    arms: str | None = None,
    extra: str = "",
) -> str:
    arms = (
        arms
        or '[[arms]]\nname = "a"\nweights = "BF16"\n[[arms]]\nname = "b"\nweights = "BF16"\nslots = 2\nconcurrency = 2\n'
    )
    return (
        f'name = "ep"\n{extra}\n[model]\n{model}\n[engine]\nname = "openai"\nbase_url = "{url}"\n'
        f'hardware = "{hardware}"\n[workload]\nprompt_tokens = 24\noutput_tokens = 8\n'
        f'[load]\nrequests = 4\nwarmup = 1\n{arms}'
    )


# ------------------------------------------------------------------ the study names the card


def test_a_study_names_its_hardware_card_and_an_arm_may_name_its_own():
    s = parse_study(
        endpoint_study(
            "http://x", hardware="H100-SXM", arms='[[arms]]\nname = "a"\n[[arms]]\nname = "b"\nhardware = "L4"\n'
        )
    )
    assert [s.hardware_of(a) for a in s.arms] == ["H100-SXM", "L4"]
    assert anchor_id(s, s.arms[0], 0) != anchor_id(
        parse_study(endpoint_study("http://x", hardware="H200")), s.arms[0], 0
    )
    with pytest.raises(
        StudyError, match=r"engine.hardware: 'H999' is not a hardware card; allowed: this-cpu, .*H100-SXM"
    ):
        parse_study(endpoint_study("http://x", hardware="H999"))
    with pytest.raises(StudyError, match=r"arms.0.hardware: 'gpu' is not a hardware card"):
        parse_study(endpoint_study("http://x", arms='[[arms]]\nname = "a"\nhardware = "gpu"\n'))


def test_an_endpoint_study_of_a_model_the_package_does_not_ship_needs_a_card_and_nothing_local(tmp_path: Path):
    with pytest.raises(StudyError) as e:
        parse_study(endpoint_study("http://x", model='name = "m"'))
    assert "model.card: engine 'openai' reads nothing local" in str(e.value) and "\n" not in str(e.value)
    cfg = tmp_path / "config.json"
    cfg.write_text(
        json.dumps(
            {
                "num_hidden_layers": 4,
                "hidden_size": 256,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "intermediate_size": 512,
                "vocab_size": 1000,
            }
        )
    )
    from pareto_atlas.calibrate.stage import model_card

    by_path = parse_study(endpoint_study("http://x", model='name = "m"\ncard = "config.json"'), base=tmp_path)
    assert model_card(by_path).n_layers == 4 and model_card(by_path).source.startswith("config:")
    inline = parse_study(
        endpoint_study(
            "http://x",
            model='name = "m"\n[model.card]\nn_layers = 2\nhidden = 64\n'
            'n_heads = 4\nn_kv_heads = 2\nhead_dim = 16\nintermediate = 128\nvocab = 500\n',
        )
    )
    assert model_card(inline).hidden == 64
    with pytest.raises(StudyError, match="model.card: model card: inline fields lack vocab"):
        parse_study(
            endpoint_study(
                "http://x",
                model='name = "m"\n[model.card]\nn_layers = 2\nhidden = 64\n'
                'n_heads = 4\nn_kv_heads = 2\nhead_dim = 16\nintermediate = 128\n',
            )
        )


# ------------------------------------------------------------------ what the host says of itself


def test_host_and_endpoint_describe_themselves():
    smi = "NVIDIA H100 80GB HBM3, 81559, 550.54.15\nNVIDIA H100 80GB HBM3, 81559, 550.54.15\n"
    assert gpus_from_smi(smi) == [{"name": "NVIDIA H100 80GB HBM3", "memory_gib": 79.6, "driver": "550.54.15"}] * 2
    with FakeOpenAIServer(FakeBehaviour(model_id=LLAMA_ID)) as srv:
        d = endpoint_description(srv.base_url)
    assert d["models"] == [{"id": LLAMA_ID, "owned_by": "fakeserver", "max_model_len": 4096}]
    assert d["version"] == {"version": "fakeserver 1"}


def test_an_engine_started_here_under_a_gpu_card_fails_its_anchor_on_a_host_without_one(tmp_path: Path, monkeypatch):
    from pareto_atlas.measure import campaign, hostinfo

    monkeypatch.setattr(hostinfo, "host_gpus", lambda: [])
    hostinfo.host_description.cache_clear()
    s = parse_study(
        'name = "t"\n[model]\nname = "smollm2-135m-instruct"\n[engine]\nhardware = "H100-SXM"\n[[arms]]\nname = "a"\n'
    )
    with Store(tmp_path / "s.duckdb") as st:
        summary = run_campaign(s, st)
    hostinfo.host_description.cache_clear()
    assert summary.failed == 1
    assert (
        summary.failures[0][1].startswith("hardware H100-SXM: this host") and "reports no GPU" in summary.failures[0][1]
    )
    assert campaign.ERROR_SHARE_MAX == ERROR_SHARE_MAX


# ------------------------------------------------------------------ errors in the verdict


def _rec(i: int, error: str | None = None, ttft: float = 0.01) -> RequestRecord:
    return RequestRecord(
        idx=i,
        warmup=False,
        send_ts=float(i),
        chunk_ts=() if error else (i + ttft, i + 0.02),
        first_token_ts=None if error else i + ttft,
        end_ts=i + 0.02,
        prompt_tokens=None if error else 8,
        completion_tokens=None if error else 2,
        error=error,
    )


def test_goodput_counts_errored_requests_as_failures_and_the_verdict_says_how_many():
    recs = [_rec(0), _rec(1, "HTTP 500: boom"), _rec(2), _rec(3, "HTTP 500: boom")]
    m = derive_metrics(recs, 8, 2, slo={"ttft_ms": 1000.0}).to_dict()
    clean = derive_metrics([_rec(0), _rec(1), _rec(2), _rec(3)], 8, 2, slo={"ttft_ms": 1000.0}).to_dict()
    assert m["goodput_rps"] == pytest.approx(clean["goodput_rps"] / 2)  # same window, half the requests met
    v = error_verdict(m)
    assert v["errored"] and v["error_share"] == 0.5
    assert v["error_line"].startswith("2 of 4 errored (HTTP 500); above 5%: flagged")
    assert error_verdict(derive_metrics([_rec(i) for i in range(40)] + [_rec(40, "timeout after 1 s")]).to_dict()) == {
        "error_share": 1 / 41,
        "errored": False,
        "error_line": "1 of 41 errored (timeout after 1 s)",
    }


def test_a_flaky_endpoint_is_printed_flagged_and_left_out_of_calibration(tmp_path: Path):
    """Two arms on an endpoint without /tokenize (prompts counted from the usage it returns), one on an
    endpoint answering every other request with HTTP 500: the flaky anchor says so on its line, is
    flagged, and the fit is made on the other two."""
    good = FakeOpenAIServer(FakeBehaviour(prefill_s=0.01, token_s=0.002, tokenize=False, model_id=LLAMA_ID)).start()
    flaky = FakeOpenAIServer(FakeBehaviour(prefill_s=0.01, token_s=0.002, fail_every=2, model_id=LLAMA_ID)).start()
    arms = (
        '[[arms]]\nname = "c1"\nweights = "BF16"\n[[arms]]\nname = "c2"\nweights = "BF16"\nslots = 2\n'
        'concurrency = 2\nrequests = 8\n'
        f'[[arms]]\nname = "flaky"\nweights = "BF16"\nengine_options = {{base_url = "{flaky.base_url}"}}\n'
    )
    study_file = tmp_path / "ep.toml"
    study_file.write_text(
        endpoint_study(good.base_url, model=f'name = "m"\nserved = "{LLAMA_ID}"\ncard = "llama-3.1-8b"', arms=arms)
    )
    console = Console(record=True, width=240)
    try:
        with stages.Context.open(str(study_file), tmp_path / "out", console) as ctx:
            stages.measure(ctx)
            stages.calibrate(ctx)
            anchors = ctx.store.anchors("ep")
            cal = ctx.store.calibrations("ep")
    finally:
        good.stop()
        flaky.stop()
    out = console.export_text()
    assert "flaky: ..... ok" in out and "2 of 4 errored (HTTP 500); above 5%: flagged" in out
    m = {a.arm: json.loads(a.metrics_json) for a in anchors.itertuples()}
    assert m["flaky"]["errored"] and m["flaky"]["n_errors"] == 2 and m["flaky"]["n_ok"] == 2
    assert not m["c1"]["errored"] and m["c1"]["n_errors"] == 0 and m["c1"]["n_rejected"] == 0  # exact P from usage
    assert "left out: flaky on this-cpu: 2 of 4 errored (HTTP 500)" in out
    assert list(cal.n_anchors) == [2] and list(cal.hardware) == ["this-cpu"]
    fitted = {r["arm"] for r in json.loads(cal.fidelity_json.iloc[0])["anchors"]}
    assert fitted == {"c1", "c2"}
    assert json.loads(cal.params_json.iloc[0])["provenance"].startswith("calibrated on 2 measured anchors (this-cpu)")
    hw = json.loads(anchors.set_index("arm").hardware_json["c1"])
    assert hw["card"] == "this-cpu" and hw["endpoint"]["models"][0]["id"] == LLAMA_ID and "client" in hw
    assert len(plan(ctx.study)) == 3


# ------------------------------------------------------------------ vLLM checkpoints


def _checkpoint(cache: Path, repo: str, quant: dict | None, dtype: str = "bfloat16") -> Path:
    snap = cache / ("models--" + repo.replace("/", "--")) / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (cache / ("models--" + repo.replace("/", "--")) / "refs").mkdir()
    (cache / ("models--" + repo.replace("/", "--")) / "refs" / "main").write_text("abc123")
    cfg = {
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "vocab_size": 500,
        "torch_dtype": dtype,
    } | ({"quantization_config": quant} if quant else {})
    (snap / "config.json").write_text(json.dumps(cfg))
    return snap


def vllm_study(ref: str, arms: str) -> str:
    return f'name = "v"\n[model]\nname = "m"\nhf_dir = "{ref}"\n[engine]\nname = "vllm"\n{arms}'


def test_a_vllm_checkpoint_in_the_hosts_cache_gives_its_arms_their_weight_format(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    snap = _checkpoint(tmp_path, "org/awq-model", {"quant_method": "awq", "bits": 4, "group_size": 128})
    _checkpoint(
        tmp_path,
        "org/fp8-model",
        {
            "quant_method": "compressed-tensors",
            "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"}}},
        },
    )
    _checkpoint(tmp_path, "org/gptq-model", {"quant_method": "gptq", "bits": 4})
    _checkpoint(tmp_path, "org/plain", None, dtype="float16")
    assert find_checkpoint("org/awq-model") == snap and find_checkpoint("org/missing") is None
    s = parse_study(vllm_study("org/awq-model", '[[arms]]\nname = "a"\n[[arms]]\nname = "b"\nweights = "AWQ4"\n'))
    assert [a.weights for a in s.arms] == ["AWQ4", "AWQ4"]
    assert parse_study(vllm_study("org/fp8-model", '[[arms]]\nname = "a"\n')).arms[0].weights == "FP8"
    assert parse_study(vllm_study("org/gptq-model", '[[arms]]\nname = "a"\n')).arms[0].weights == "AWQ4"
    plain = parse_study(vllm_study("org/plain", '[[arms]]\nname = "a"\n[[arms]]\nname = "q"\nweights = "FP8"\n'))
    assert [a.weights for a in plain.arms] == ["F16", "FP8"]  # FP8: vLLM quantizes float weights at load
    with pytest.raises(StudyError) as e:
        parse_study(vllm_study("org/awq-model", '[[arms]]\nname = "a"\nweights = "F16"\n'))
    assert str(e.value) == (
        "<study>: arms.a.weights: 'F16' disagrees with the checkpoint's quantization_config "
        "(awq 4-bit: AWQ4); leave weights out or type 'AWQ4'"
    )
    with pytest.raises(StudyError, match="arms.a.weights: the checkpoint 'org/elsewhere' is not on this host"):
        parse_study(vllm_study("org/elsewhere", '[[arms]]\nname = "a"\n'))
    assert parse_study(vllm_study("org/elsewhere", '[[arms]]\nname = "a"\nweights = "FP8"\n')).arms[0].weights == "FP8"
    assert checkpoint_format({"quantization_config": {"quant_method": "fp8"}}) == ("FP8", "fp8")


def test_vllm_leaves_a_quantized_checkpoints_method_to_its_config():
    from pareto_atlas.measure.engines.base import ArmLaunch
    from pareto_atlas.measure.engines.vllm import vllm_argv
    from pareto_atlas.spec.knobs import Knobs

    launch = ArmLaunch(model_path="/ckpt", knobs=Knobs(weights="AWQ4"))
    assert "--quantization" in vllm_argv(launch, 8000)
    assert "--quantization" not in vllm_argv(launch.with_extra(checkpoint_quantized=True), 8000)
