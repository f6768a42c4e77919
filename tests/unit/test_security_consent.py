"""A study from elsewhere cannot send a secret to a host, or run a program, unless the user says so
outside the study file (measure.consent, docs/security.md).

"Remote" is made testable with a local server: the check compares the host string of base_url, so
the tests name `remote.example` (a reserved name that never resolves for real) and map it to
127.0.0.1 in this process. The fake server counts every request that reaches it: without the check
the hostile study's requests would arrive there, so "nothing arrived" is a real observation.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pareto_atlas.cli import app
from pareto_atlas.measure.consent import (
    Consent,
    ConsentError,
    authorize,
    is_loopback,
    key_like,
)
from pareto_atlas.measure.fakeserver import FakeOpenAIServer
from pareto_atlas.spec.study import parse_study

REMOTE = "remote.example"
KEY = "PA_TEST_API_KEY"
SECRET = "sk-consent-test-51c0ffee"


@pytest.fixture(autouse=True)
def user(tmp_path: Path, monkeypatch) -> Path:
    """A user of our own: an empty config folder, a key-like variable holding a key, no proxies, and
    remote.example reaching this machine."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv(KEY, SECRET)
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    real = socket.getaddrinfo

    def resolve(host, *args, **kw):
        return real("127.0.0.1" if host in (REMOTE, REMOTE.encode()) else host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    return tmp_path / "config" / "pareto-atlas" / "config.toml"


def endpoint_study(path: Path, url: str, key_env: str | None, arm_options: str = "") -> Path:
    key = f'api_key_env = "{key_env}"\n' if key_env else ""
    path.write_text(
        f'name = "ep"\n[model]\nname = "m"\ncard = "llama-3.1-8b"\n[engine]\nname = "openai"\n'
        f'base_url = "{url}"\n{key}[workload]\nprompt_tokens = 24\noutput_tokens = 8\n'
        f'[load]\nrequests = 2\nwarmup = 0\n[[arms]]\nname = "a"\nweights = "BF16"\n{arm_options}'
    )
    return path


def measure(tmp_path: Path, study: Path, *flags: str):
    return CliRunner().invoke(app, ["measure", "--study", str(study), "--out", str(tmp_path / "out"), *flags])


def error_line(result) -> str:
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: "), result.output
    return lines[0]


# ----------------------------------------------------------------------------- the policy itself


def test_which_names_look_like_keys_and_which_hosts_are_loopback():
    assert all(
        map(
            key_like,
            [
                "OPENAI_API_KEY",
                "VLLM_API_KEY",
                "MY_APIKEY",
                "TOGETHER_API_TOKEN",
                "HF_TOKEN",
                "HUGGING_FACE_HUB_TOKEN",
                KEY,
            ],
        )
    )
    assert not any(
        map(
            key_like,
            [
                "HOME",
                "PATH",
                "USER",
                "SHELL",
                "AWS_SECRET_ACCESS_KEY",
                "AWS_SESSION_TOKEN",
                "GITHUB_TOKEN",
                "GH_TOKEN",
                "GITHUB_API_TOKEN",
                "NPM_TOKEN",
                "SSH_AUTH_SOCK",
                "openai_api_key",
                "API_KEY_FILE",
                "_API_KEY"[1:],
            ],
        )
    )
    assert all(map(is_loopback, ["localhost", "127.0.0.1", "127.9.8.7", "::1", "[::1]"]))
    assert not any(
        map(
            is_loopback,
            [
                REMOTE,
                "localhost.example",
                "localhost.",
                "2130706433",
                "0x7f.0.0.1",
                "10.0.0.1",
                "0.0.0.0",
                "127.0.0.1.nip.io",
                "",
            ],
        )
    )
    assert Consent.from_user(["API.Example.com", "https://b.example/v1", "[::1]"]).endpoint_hosts == {
        "api.example.com",
        "b.example",
        "::1",
    }
    with pytest.raises(ConsentError, match="--endpoint-host: 'api.example.com:443' is not a host name without a port"):
        Consent.from_user(["api.example.com:443"])  # it would match no base_url's host, silently


# --------------------------------------------------------------------- a key to a host: refused


def test_a_remote_base_url_with_api_key_env_home_sends_nothing_and_exits_with_one_line(tmp_path: Path):
    with FakeOpenAIServer() as srv:
        study = endpoint_study(tmp_path / "hostile.toml", f"http://{REMOTE}:{srv.port}/v1", "HOME")
        r = measure(tmp_path, study)
        # even with the host allowed, HOME is not a key's name
        allowed_host = measure(tmp_path, study, "--endpoint-host", REMOTE)
        arrived = srv.requests
    assert r.exit_code == 2 and allowed_host.exit_code == 2
    line = error_line(r)
    assert "engine.api_key_env: 'HOME' is not allowed to be sent as a key" in line and "--allow-key-env HOME" in line
    assert error_line(allowed_host) == line
    assert arrived == 0


def test_a_key_like_variable_still_goes_to_no_remote_host_the_user_did_not_name(tmp_path: Path):
    with FakeOpenAIServer() as srv:
        study = endpoint_study(tmp_path / "hostile.toml", f"http://{REMOTE}:{srv.port}", KEY)
        r = measure(tmp_path, study)
        other = measure(tmp_path, study, "--endpoint-host", "api.elsewhere.example")
        arrived = srv.requests
    assert r.exit_code == 2 and other.exit_code == 2 and arrived == 0
    line = error_line(r)
    assert f"engine.base_url: host '{REMOTE}' may not receive ${KEY} (engine.api_key_env)" in line
    assert "--endpoint-host HOST" in line and SECRET not in r.output


def test_an_arm_cannot_move_the_key_to_another_host_either(tmp_path: Path):
    with FakeOpenAIServer() as srv:
        study = endpoint_study(
            tmp_path / "arm.toml",
            srv.base_url,
            KEY,
            arm_options=f'engine_options = {{ base_url = "http://{REMOTE}:{srv.port}" }}\n',
        )
        r = measure(tmp_path, study)
        arrived = srv.requests
    assert r.exit_code == 2 and arrived == 0
    assert f"arms.a.engine_options.base_url: host '{REMOTE}'" in error_line(r)


def test_the_quality_campaign_refuses_before_any_request(tmp_path: Path):
    from pareto_atlas.quality.campaign import run_quality_campaign
    from pareto_atlas.store import Store

    with FakeOpenAIServer() as srv:
        study = parse_study(endpoint_study(tmp_path / "q.toml", f"http://{REMOTE}:{srv.port}", KEY).read_text())
        with Store(tmp_path / "s.duckdb") as store, pytest.raises(ConsentError, match="engine.base_url"):
            run_quality_campaign(study, store)
        arrived = srv.requests
    assert arrived == 0


# ------------------------------------------------------------------- a key to a host: allowed


def test_the_host_named_on_the_command_line_gets_the_key_and_the_run_says_so_first(tmp_path: Path):
    with FakeOpenAIServer() as srv:
        study = endpoint_study(tmp_path / "ok.toml", f"http://{REMOTE}:{srv.port}/v1", KEY)
        r = measure(tmp_path, study, "--endpoint-host", REMOTE)
        arrived = srv.requests
    assert r.exit_code == 0, r.output
    assert arrived > 0
    said = r.output.index(f"openai: ${KEY} goes as the bearer token to {REMOTE} (a host you allowed")
    assert said < r.output.index("[1/1]") and SECRET not in r.output


def test_the_users_config_allows_a_host_and_a_key_name(tmp_path: Path, user: Path, monkeypatch):
    monkeypatch.setenv("MY_SECRET", SECRET)
    user.parent.mkdir(parents=True)
    user.write_text(f'endpoint_hosts = ["{REMOTE.upper()}"]\nkey_envs = ["MY_SECRET"]\n')
    with FakeOpenAIServer() as srv:
        r = measure(tmp_path, endpoint_study(tmp_path / "cfg.toml", f"http://{REMOTE}:{srv.port}", "MY_SECRET"))
        arrived = srv.requests
    assert r.exit_code == 0, r.output
    assert arrived > 0
    user.write_text('endpoint_hosts = "everything"\n')
    r = measure(tmp_path, endpoint_study(tmp_path / "cfg.toml", "http://127.0.0.1:9", KEY))
    assert r.exit_code == 2 and "config.toml: endpoint_hosts must be a list of strings" in error_line(r)


def test_loopback_needs_no_flag_and_a_keyless_endpoint_sends_no_key(tmp_path: Path):
    with FakeOpenAIServer() as srv:
        study = parse_study(endpoint_study(tmp_path / "lo.toml", srv.base_url, KEY).read_text())
        said = f"openai: ${KEY} goes as the bearer token to 127.0.0.1 (loopback; engine.api_key_env -> engine.base_url)"
        assert authorize(study, Consent()) == (said,)
        keyless = parse_study(endpoint_study(tmp_path / "nokey.toml", f"http://{REMOTE}:{srv.port}", None).read_text())
        assert authorize(keyless, Consent()) == ()


# ------------------------------------------------------------------------------------ programs


def vllm_study(tmp_path: Path, options: str, arm_options: str = "") -> Path:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir(exist_ok=True)
    (ckpt / "config.json").write_text(
        json.dumps(
            {
                "num_hidden_layers": 2,
                "hidden_size": 64,
                "num_attention_heads": 4,
                "intermediate_size": 128,
                "vocab_size": 500,
                "torch_dtype": "float32",
            }
        )
    )
    path = tmp_path / "prog.toml"
    path.write_text(
        f'name = "prog"\n[model]\nname = "m"\nhf_dir = "{ckpt}"\n[engine]\nname = "vllm"\n'
        f'options = {{ {options} }}\n[workload]\nprompt_tokens = 16\noutput_tokens = 4\n'
        f'[load]\nrequests = 2\nwarmup = 0\n[[arms]]\nname = "a"\n{arm_options}'
    )
    return path


def marking_program(tmp_path: Path, name: str = "server") -> tuple[Path, Path]:
    """A program that leaves a mark when it runs (and then fails, as no server)."""
    mark, prog = tmp_path / f"{name}.ran", tmp_path / name
    prog.write_text(f"#!/bin/sh\necho ran >> {mark}\nexit 3\n")
    prog.chmod(0o755)
    return prog, mark


def test_a_study_naming_a_binary_is_refused_without_the_flag_and_run_with_it(tmp_path: Path):
    prog, mark = marking_program(tmp_path)
    other, _ = marking_program(tmp_path, "other")
    study = vllm_study(tmp_path, f'binary = "{prog}", startup_timeout_s = 10')
    r = measure(tmp_path, study)
    assert r.exit_code == 2 and not mark.exists()
    line = error_line(r)
    assert f"engine.options.binary: '{prog}' is a program the study would run" in line
    assert "--allow-program PATH, or allowed_programs in " in line
    for command in ("build", "quality"):  # every command that starts the study's engine refuses alike
        other_cmd = CliRunner().invoke(app, [command, "--study", str(study), "--out", str(tmp_path / "out")])
        assert other_cmd.exit_code == 2 and error_line(other_cmd) == line and not mark.exists()
    wrong = measure(tmp_path, study, "--allow-program", str(other))
    assert wrong.exit_code == 2 and not mark.exists()
    link = tmp_path / "link-to-server"  # the same file by another name is the same program
    link.symlink_to(prog)
    r = measure(tmp_path, study, "--allow-program", str(link))
    assert mark.read_text() == "ran\n", r.output
    assert f"vllm: runs {prog} (engine.options.binary, a program you allowed)" in r.output


def test_an_arms_python_is_a_program_too_and_the_config_can_allow_it(tmp_path: Path, user: Path):
    prog, mark = marking_program(tmp_path, "python")
    study = vllm_study(tmp_path, "startup_timeout_s = 10", arm_options=f'engine_options = {{ python = "{prog}" }}\n')
    r = measure(tmp_path, study)
    assert r.exit_code == 2 and not mark.exists()
    assert f"arms.a.engine_options.python: '{prog}' is a program the study would run" in error_line(r)
    user.parent.mkdir(parents=True)
    user.write_text(f'allowed_programs = ["{prog}"]\n')
    measure(tmp_path, study)
    assert mark.exists()


def test_a_flag_naming_no_program_is_an_error_not_a_silent_nothing(tmp_path: Path):
    r = measure(tmp_path, vllm_study(tmp_path, 'binary = "vllm"'), "--allow-program", str(tmp_path / "nope"))
    assert r.exit_code == 2 and "--allow-program: " in error_line(r) and "is not a program on this host" in r.output
