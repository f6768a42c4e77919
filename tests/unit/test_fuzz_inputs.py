"""Every file and string the product reads, fuzzed: a mutated study (its TOML text and its values),
a published-table row, a trace (CSV and JSONL), a price string and a model config.json each load
cleanly or fail with one line of the project's own error type, never a traceback."""

from __future__ import annotations

import csv
import io
import json
import math
import tempfile
import tomllib
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pareto_atlas.calibrate.published_table import COLUMNS, PublishedTableError, load_published
from pareto_atlas.spec.bounds import PriceError, parse_prices
from pareto_atlas.spec.cards import CardError, ModelCard, model_card_from_hf_config, resolve_model_card
from pareto_atlas.spec.study import BUILTIN, Study, StudyError, parse_study, study_from_dict
from pareto_atlas.spec.trace import TraceError, load_trace

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TMP = Path(tempfile.mkdtemp(prefix="fuzz-inputs-"))


def one_line(e: BaseException) -> str:
    msg = str(e)
    assert msg and "\n" not in msg and "Traceback" not in msg, msg
    return msg


def builtin_text(name: str) -> str:
    return resources.files("pareto_atlas.spec").joinpath(BUILTIN[name]).read_text()


# values a hostile or careless file holds: huge, negative, non-finite, the wrong type
NASTY = st.one_of(
    st.integers(),
    st.integers(min_value=-2, max_value=2),
    st.just(99999999999),
    st.just(2**70),
    st.just(10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=20),
    st.just(""),
    st.just("../../etc/passwd"),
    st.just("a\nb"),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
TOML_VALUES = [
    "0",
    "-1",
    "99999999999",
    "1e308",
    "inf",
    "nan",
    "-inf",
    "true",
    "false",
    '""',
    '"x"',
    "[]",
    "[0]",
    "{}",
    "1.5",
    "2.0",
    '"../../x"',
    "[1, 99999999999]",
    "0.0001",
    "9" * 5000,
]


def _leaves(d, path=()):
    if isinstance(d, dict):
        for k, v in d.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(d, list) and d and all(isinstance(x, dict) for x in d):
        for i, v in enumerate(d):
            yield from _leaves(v, path + (i,))
    else:
        yield path


def _set(d, path, value):
    for p in path[:-1]:
        d = d[p]
    d[path[-1]] = value


# -- studies --------------------------------------------------------------------------------------------
@FUZZ
@given(name=st.sampled_from(["default", "tiny", "ladder"]), data=st.data())
def test_study_text_mutations_load_or_fail_in_one_line(name: str, data):
    lines = builtin_text(name).splitlines()
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(lines) - 1))
        op = data.draw(st.sampled_from(["value", "drop", "dup", "junk", "cut"]))
        if op == "value" and "=" in lines[i]:
            lines[i] = lines[i].split("=", 1)[0] + "= " + data.draw(st.sampled_from(TOML_VALUES))
        elif op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "junk":
            lines.insert(i, data.draw(st.text(max_size=30)))
        elif op == "cut":
            lines = lines[:i]
        if not lines:
            lines = [""]
    try:
        s = parse_study("\n".join(lines), "mutated.toml")
    except StudyError as e:
        assert one_line(e).startswith("mutated.toml: ")
    else:  # a study without arms is valid (it simulates on published evidence alone: the paper study)
        assert isinstance(s, Study) and s.baseline is not None


@FUZZ
@given(name=st.sampled_from(["default", "tiny", "ladder"]), data=st.data(), value=st.one_of(NASTY, st.just(10**5000)))
def test_study_value_mutations_load_or_fail_in_one_line_naming_the_field(name: str, data, value):
    raw = tomllib.loads(builtin_text(name))
    path = data.draw(st.sampled_from(list(_leaves(raw))))
    _set(raw, path, value)
    try:
        study_from_dict(raw, "mutated.toml")
    except StudyError as e:
        msg = one_line(e)
        # the field is named, by its own key or (for a whole arm or a cross-field rule) its table
        assert any(str(p) in msg for p in path), (path, msg)


@pytest.mark.parametrize(
    "patch, field",
    [
        ("concurrency = 99999999999", "arms.0.concurrency: 99999999999"),
        ("think", "load.think_ms: 99999999999"),
        ("chat", "model.chat: 0"),
    ],
)
def test_the_mutations_that_were_accepted_are_rejected_in_one_line(patch: str, field: str):
    text = builtin_text("tiny")
    if patch == "think":
        text = text.replace("[load]\n", "[load]\nthink_ms = 99999999999\n")
    elif patch == "chat":
        text = text.replace('card = "smollm2-135m"\n', 'card = "smollm2-135m"\nchat = 0\n')
    else:
        text = text.replace('weights = "Q4_1"\nquality = true\n', f'weights = "Q4_1"\nquality = true\n{patch}\n', 1)
    with pytest.raises(StudyError) as e:
        parse_study(text, "s.toml")
    msg = one_line(e.value)
    assert msg.startswith(f"s.toml: {field} is not allowed"), msg
    assert ("one host" in msg) if "concurrency" in field else True


# -- what a study asks of the user: a key to a host, a program to run (measure.consent) --------------------
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "LOCALHOST", "[::1]", "127.8.9.10"]
OTHER_HOSTS = [
    "remote.example",
    "localhost.example",
    "localhost.",
    "127.0.0.1.nip.io",
    "2130706433",
    "0x7f.0.0.1",
    "[::ffff:127.0.0.1]",
    "10.0.0.1",
    "0.0.0.0",
    "127.0.0.1@remote.example",
    "remote.example\\@127.0.0.1",
    "u:p@127.0.0.1",
]
KEY_ENVS = [
    "OPENAI_API_KEY",
    "HF_TOKEN",
    "X_API_KEY",
    "HOME",
    "PATH",
    "AWS_SECRET_ACCESS_KEY",
    "GITHUB_TOKEN",
    "GITHUB_API_TOKEN",
    "openai_api_key",
    "",
]


def _endpoint_raw(url: str, env, in_arm: bool) -> dict:
    engine = {"name": "openai", "base_url": "http://127.0.0.1:9"}
    arm = {"name": "a", "weights": "BF16"}
    (arm.setdefault("engine_options", {}) if in_arm else engine).update(base_url=url, api_key_env=env)
    return {
        "name": "ep",
        "model": {"name": "m", "card": "llama-3.1-8b"},
        "engine": engine,
        "workload": {"prompt_tokens": 24, "output_tokens": 8},
        "load": {"requests": 2, "warmup": 0},
        "arms": [arm],
    }


@FUZZ
@given(
    host=st.one_of(st.sampled_from(LOOPBACK_HOSTS + OTHER_HOSTS), st.text(max_size=20)),
    port=st.sampled_from(["", ":8000", ":0", ":99999"]),
    path=st.sampled_from(["", "/v1", "/a/b?c#d"]),
    env=st.one_of(st.sampled_from(KEY_ENVS), st.text(max_size=20), st.integers(), st.booleans()),
    in_arm=st.booleans(),
)
def test_a_key_goes_only_to_loopback_from_a_key_like_name_or_the_study_is_refused_in_one_line(
    host, port, path, env, in_arm
):
    from pareto_atlas.measure.consent import Consent, ConsentError, authorize, key_like

    try:
        study = study_from_dict(_endpoint_raw(f"http://{host}{port}{path}", env, in_arm), "ep.toml")
    except StudyError as e:
        one_line(e)
        return
    where = "arms.a.engine_options." if in_arm else "engine."
    try:
        said = authorize(study, Consent())
    except ConsentError as e:
        msg = one_line(e)
        assert msg.startswith((f"{where}base_url: ", f"{where}api_key_env: ")), msg
        return
    if env:  # a key is sent: only to a loopback host, only from a key-like name
        assert host in LOOPBACK_HOSTS and (env in ("OPENAI_API_KEY", "HF_TOKEN", "X_API_KEY") or key_like(env))
        assert len(said) == 1 and f"${env} goes as the bearer token to " in said[0]


PROGRAMS = [
    "/bin/sh",
    "sh",
    "python3",
    "vllm",
    "llama-server",
    "../../bin/sh",
    "/nonexistent/x",
    "",
    "a\nb",
    "a\x00b",
    "/bin/\x00sh",
]


@FUZZ
@given(
    key=st.sampled_from(["binary", "python"]),
    in_arm=st.booleans(),
    value=st.one_of(st.sampled_from(PROGRAMS), st.text(max_size=30), st.integers(), st.booleans(), st.floats()),
)
def test_a_program_a_study_names_runs_only_when_the_user_names_that_program(key, in_arm, value):
    from pareto_atlas.measure.consent import Consent, ConsentError, authorize, resolve_program

    arm = {"name": "a", "weights": "FP8"} | ({"engine_options": {key: value}} if in_arm else {})
    raw = {
        "name": "p",
        "model": {"name": "m", "hf_dir": "org/elsewhere"},
        "engine": {"name": "vllm"} | ({} if in_arm else {"options": {key: value}}),
        "arms": [arm],
    }
    try:
        study = study_from_dict(raw, "p.toml")
    except StudyError as e:
        one_line(e)
        return
    if not value:  # empty or false: the engine's own default runs, nothing the study named
        assert authorize(study, Consent()) == ()
        return
    with pytest.raises(ConsentError) as e:
        authorize(study, Consent())
    assert one_line(e.value).startswith(f"arms.a.engine_options.{key}: " if in_arm else f"engine.options.{key}: ")
    found = resolve_program(str(value))
    if found is not None:  # the user names that very program: it may run, and the run says which
        assert authorize(study, Consent(programs=frozenset({found}))) == (
            f"vllm: runs {found} ({'arms.a.engine_options' if in_arm else 'engine.options'}.{key}, a program you allowed)",
        )


# -- the published speed table --------------------------------------------------------------------------
def _shipped_rows() -> list[dict]:
    text = resources.files("pareto_atlas.spec").joinpath("published_anchors.csv").read_text()
    return list(csv.DictReader(io.StringIO(text)))


ROWS = _shipped_rows()


@FUZZ
@given(data=st.data())
def test_published_rows_load_or_fail_in_one_line_naming_file_and_line(data):
    row = dict(data.draw(st.sampled_from(ROWS)))
    for _ in range(data.draw(st.integers(1, 3))):
        col = data.draw(st.sampled_from(list(COLUMNS)))
        row[col] = data.draw(
            st.one_of(
                st.sampled_from(
                    ["", "0", "-1", "nan", "inf", "1e400", "99999999999", "batch", "rate", "p99", "-", "x"]
                ),
                st.text(max_size=12),
            )
        )
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(COLUMNS))
    w.writeheader()
    w.writerow(row)
    text = buf.getvalue()
    if data.draw(st.booleans()):  # damage the file itself too
        cut = data.draw(st.integers(0, len(text)))
        text = text[:cut] + data.draw(st.text(max_size=8)) + text[cut:]
    p = TMP / "published.csv"
    p.write_text(text)
    try:
        t = load_published([p], shipped=False)
    except PublishedTableError as e:
        assert one_line(e).startswith(str(p)) or "no published anchors" in str(e)
    else:
        for c in ("prompt_tokens", "output_tokens", "load_value"):
            assert all(0 < float(v) <= 1_048_576 for v in t.rows[c])


# -- traces ---------------------------------------------------------------------------------------------
CELL = st.one_of(
    st.integers(-5, 10**7),
    st.floats(allow_nan=True, allow_infinity=True),
    st.just(99999999999),
    st.text(max_size=6),
    st.none(),
    st.booleans(),
)


@FUZZ
@given(kind=st.sampled_from(["csv", "jsonl"]), data=st.data())
def test_traces_load_or_fail_in_one_line(kind: str, data):
    cols = data.draw(
        st.lists(
            st.sampled_from(
                ["arrival_s", "timestamp", "prompt_tokens", "input_len", "output_tokens", "output_len", "junk"]
            ),
            min_size=0,
            max_size=4,
        )
    )
    rows = data.draw(st.lists(st.dictionaries(st.sampled_from(cols or ["x"]), CELL), max_size=6))
    p = TMP / f"trace.{kind}"
    if kind == "jsonl":
        lines = [json.dumps(r) for r in rows]
        if data.draw(st.booleans()):
            lines.append(
                data.draw(
                    st.sampled_from(
                        [
                            "[1, 2]",
                            "5",
                            "{",
                            '"x"',
                            "null",
                            "{}",
                            '{"arrival_s": 0, "prompt_tokens": ' + "9" * 5000 + "}",
                        ]
                    )
                )
            )
        p.write_text("\n".join(lines))
    else:
        buf = io.StringIO()
        csv.writer(buf).writerows([cols] + [[r.get(c, "") for c in cols] for r in rows])
        text = buf.getvalue()
        if data.draw(st.booleans()):
            text += data.draw(st.text(max_size=20))
        p.write_text(text)
    try:
        out = load_trace(p)
    except TraceError as e:
        assert one_line(e).startswith(f"trace {p.name}")
    else:
        assert all(math.isfinite(r.arrival_s) and r.arrival_s >= 0 and r.prompt_tokens >= 1 for r in out)


# -- price strings ---------------------------------------------------------------------------------------
@FUZZ
@given(
    items=st.lists(
        st.one_of(
            st.text(max_size=20),
            st.builds(
                lambda h, v: f"{h}={v}",
                st.sampled_from(["A100-80G-PCIe", "L4", "", " "]),
                st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10**6), st.text(max_size=5)),
            ),
        ),
        max_size=4,
    )
)
def test_price_strings_parse_or_fail_in_one_line(items: list[str]):
    try:
        prices = parse_prices(items)
    except PriceError as e:
        assert one_line(e).startswith("--price ")
    else:
        assert all(math.isfinite(v) and 0 < v <= 10_000 for v in prices.values())


def test_study_prices_are_bounded_too():
    with pytest.raises(StudyError, match=r"prices.L4: nan is not allowed"):
        parse_study(builtin_text("tiny") + "\n[prices]\nL4 = nan\n", "s.toml")


# -- model config.json files -----------------------------------------------------------------------------
BASE_CONFIG = {
    "num_hidden_layers": 24,
    "hidden_size": 896,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "intermediate_size": 4864,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
    "model_type": "qwen2",
}


@FUZZ
@given(data=st.data())
def test_model_configs_load_or_fail_in_one_line(data):
    cfg = dict(BASE_CONFIG)
    for _ in range(data.draw(st.integers(1, 3))):
        key = data.draw(st.sampled_from(list(BASE_CONFIG) + ["head_dim", "text_config", "n_layer", "_name_or_path"]))
        if data.draw(st.integers(0, 4)) == 0:
            cfg.pop(key, None)
        else:
            cfg[key] = data.draw(NASTY)
    text = json.dumps(cfg)
    mode = data.draw(st.sampled_from(["ok", "cut", "bytes", "array", "bigint"]))
    p = TMP / "config.json"
    if mode == "cut":
        text = text[: data.draw(st.integers(0, len(text)))]
    if mode == "array":
        text = "[" + text + "]"
    if mode == "bigint":  # past Python's 4300-digit limit for integers read from text
        text = text.replace('"num_hidden_layers": ', '"num_hidden_layers": ' + "9" * 5000 + ", \"x\": ", 1)
    if mode == "bytes":
        p.write_bytes(text.encode()[:20] + data.draw(st.binary(max_size=8)) + text.encode()[20:])
    else:
        p.write_text(text)
    try:
        card = resolve_model_card(str(p), name="m")
    except CardError as e:
        one_line(e)
    else:
        assert isinstance(card, ModelCard) and card.n_params > 0 and card.n_heads % card.n_kv_heads == 0
        assert card.head_dim >= 8


def test_a_damaged_gguf_header_is_a_card_error(tmp_path: Path):
    p = tmp_path / "broken.gguf"
    p.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 64)
    with pytest.raises(CardError) as e:
        resolve_model_card(str(p))
    one_line(e.value)
    with pytest.raises(CardError):
        model_card_from_hf_config(tmp_path / "missing")
