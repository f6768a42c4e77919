"""quality.kld: llama-perplexity's KL-divergence output parsed from a real run, the chunk-clustered
intervals, the teacher-forced text, the command lines, the study's token budget, and the stage's
resume (a stored configuration is never re-run, the baseline's logits go once all are stored)."""

from __future__ import annotations

import hashlib
import io
import math
import re
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

from pareto_atlas.cli import app

from pareto_atlas.quality import gsm8k
from pareto_atlas.quality import kld as K
from pareto_atlas.quality import kld_stage as S
from pareto_atlas.spec.study import StudyError, load_study, parse_study
from pareto_atlas.store import Store

FIXTURES = Path(__file__).parents[1] / "fixtures"
ARM_OUT = (FIXTURES / "llama_perplexity_kld_q4_0.txt").read_text()
BASE_OUT = (FIXTURES / "llama_perplexity_kld_base.txt").read_text()


# -- the parser, on real output -----------------------------------------------------------------
def _final(label: str) -> tuple[float, float]:
    """A summary line's two numbers, read independently of the parser."""
    line = next(ln for ln in ARM_OUT.splitlines() if ln.startswith(label))
    a, b = re.findall(r"-?\d+\.\d+", line.split(":", 1)[1])[:2]
    return float(a), float(b)


def test_real_kld_output_parses_into_its_summary():
    out = K.parse_kld(ARM_OUT)
    chunk_lines = [ln for ln in ARM_OUT.splitlines() if re.match(r"^\s*\d+\s+\d", ln) and "±" in ln]
    assert out.chunks == len(chunk_lines) == len(out.running["kld"]) and out.ctx == K.KLD_CTX
    assert out.n_tokens == out.chunks * (K.KLD_CTX - 1 - K.KLD_CTX // 2)
    assert out.final["kld"] == _final("Mean    KLD")
    assert out.final["ln_ratio"] == _final("Mean ln(PPL(Q)/PPL(base))")
    top, top_se = _final("Same top p")
    assert out.final["top1"] == pytest.approx((top / 100, top_se / 100))
    assert out.tails["kld_median"] <= out.tails["kld_p99"] <= out.tails["kld_p999"] <= out.tails["kld_max"]
    # the last running figures are the summary's, to their printed precision
    assert out.running["kld"][-1] == pytest.approx(out.final["kld"][0], abs=1e-5)
    assert out.running["top1"][-1] == pytest.approx(out.final["top1"][0], abs=1e-5)


def test_chunk_figures_recovered_from_real_running_means_agree_with_the_summary():
    out = K.parse_kld(ARM_OUT)
    per = K.chunk_means(out.running["kld"])
    assert sum(per) / len(per) == pytest.approx(out.final["kld"][0], abs=2e-5)
    agree = K.chunk_fractions(out.running["top1"], out.per_chunk)
    counts = [a * out.per_chunk for a in agree]
    assert all(abs(c - round(c)) < 1e-9 and 0 <= c <= out.per_chunk for c in counts)
    assert sum(counts) == round(out.final["top1"][0] * out.n_tokens)


def test_real_kld_summary_has_honest_intervals():
    res = K.summarize(K.parse_kld(ARM_OUT))
    for e in (res.kld, res.top1, res.ln_ratio):
        assert e.lo <= e.value <= e.hi and e.se >= e.token_se
        assert e.hi - e.lo >= 2 * 1.96 * e.token_se - 1e-12  # never narrower than llama.cpp's own
    assert res.ppl_ratio[0] == pytest.approx(math.exp(res.ln_ratio.value))
    assert res.ppl / res.ppl_base == pytest.approx(res.ppl_ratio[0], rel=1e-3)


def test_a_kv_cache_that_fails_on_some_passages_gets_the_wide_interval_it_deserves():
    """Real KV q4_0 output: its damage comes in bursts, some chunks far worse than others, so the
    per-token figure (treating 4080 tokens as independent) is far too narrow."""
    res = K.summarize(K.parse_kld((FIXTURES / "llama_perplexity_kld_kvq4_0.txt").read_text()))
    assert res.kld.deff > 10 and res.kld.se > 3 * res.kld.token_se
    q4 = K.summarize(K.parse_kld(ARM_OUT))
    assert q4.kld.hi < res.kld.lo and res.top1.hi < q4.top1.lo  # still far apart


def test_a_share_of_zero_keeps_an_upper_bound():
    res = K.summarize(K.parse_kld((FIXTURES / "llama_perplexity_kld_random.txt").read_text()))
    assert res.top1.value == 0.0 and res.top1.token_se == 0.0
    assert res.top1.lo == 0.0 and 0.0 < res.top1.hi < 0.01
    assert res.kld.lo > 1.0 and res.ppl_ratio[1] > 1e3


def test_base_output_parses_and_broken_outputs_are_errors():
    base = K.parse_base(BASE_OUT)
    assert base.ctx == K.KLD_CTX and base.chunks >= 1 and base.ppl > 1
    with pytest.raises(K.KldError, match="no KL-divergence summary"):
        K.parse_kld(ARM_OUT.split("====== Perplexity statistics")[0])
    with pytest.raises(K.KldError, match="failed to open"):
        K.parse_kld("kl_divergence: failed to open /x/base.kld\n")
    with pytest.raises(K.KldError, match="no final estimate"):
        K.parse_base("perplexity: you need at least 1024 tokens to evaluate perplexity with a context of 512\n")


# -- the interval method ---------------------------------------------------------------------------
def test_chunk_means_invert_running_means_up_to_print_rounding():
    rng = np.random.default_rng(0)
    x = rng.gamma(0.5, 0.2, size=16)
    running = [round(float(np.mean(x[:k])), 5) for k in range(1, 17)]  # as llama.cpp prints them
    got = K.chunk_means(running)
    assert np.allclose(got, x, atol=(2 * 16 - 1) * 5e-6)


def test_chunk_fractions_recover_counts_from_rounded_percentages():
    counts = [250, 231, 255, 199, 240, 0, 128]
    running = [round(100 * sum(counts[:k]) / (255 * k), 3) / 100 for k in range(1, len(counts) + 1)]
    assert [round(f * 255) for f in K.chunk_fractions(running, 255)] == counts


def test_clustered_interval_is_never_narrower_than_per_token_and_reports_the_design_effect():
    wide = K.clustered(0.1, [0.05, 0.15, 0.08, 0.12], token_se=0.001)
    assert wide.se > wide.token_se and wide.deff > 100 and wide.lo < 0.05 < 0.15 < wide.hi
    tight = K.clustered(0.1, [0.1, 0.1, 0.1, 0.1], token_se=0.01)
    assert tight.se == 0.01 and tight.deff == 0
    clipped = K.clustered(0.01, [0.0, 0.02, 0.0, 0.02], token_se=0.001, bounds=(0.0, 1.0))
    assert clipped.lo == 0.0
    one = K.clustered(0.1, [0.1], token_se=0.01)
    assert math.isnan(one.deff) and one.hi - one.lo == pytest.approx(2 * 1.959964 * 0.01)


def test_clustered_intervals_cover_correlated_tokens_where_per_token_ones_do_not():
    """Tokens correlated within a chunk (a chunk effect plus AR(1) noise, as a stretch of text is):
    llama.cpp's per-token interval under-covers the true mean; the chunk-clustered one holds 95 %."""
    rng = np.random.default_rng(1)
    chunks, per, mu, sims = 16, 255, 0.1, 400
    hit_cluster = hit_token = 0
    for _ in range(sims):
        noise = np.empty((chunks, per))
        noise[:, 0] = rng.normal(size=chunks)
        for t in range(1, per):
            noise[:, t] = 0.8 * noise[:, t - 1] + 0.6 * rng.normal(size=chunks)
        x = mu + 0.03 * rng.normal(size=(chunks, 1)) + 0.05 * noise
        running = [round(float(x[:k].mean()), 5) for k in range(1, chunks + 1)]
        token_se = float(x.std(ddof=1) / math.sqrt(x.size))
        est = K.clustered(float(x.mean()), K.chunk_means(running), token_se)
        hit_cluster += est.lo <= mu <= est.hi
        hit_token += abs(float(x.mean()) - mu) <= 1.96 * token_se
    assert hit_cluster / sims >= 0.92
    assert hit_token / sims <= 0.6


# -- text, command lines, budget --------------------------------------------------------------
def test_kld_text_is_deterministic_gsm8k_long_enough_for_its_chunks():
    a, src = K.kld_text(4)
    assert a == K.kld_text(4)[0] and a.startswith("Question: ") and "\nAnswer: " in a
    assert len(a) >= 4 * K.KLD_CTX * K.CHARS_PER_TOKEN_BOUND and src.startswith("gsm8k ")
    assert len(K.kld_text(8)[0]) > len(a)


# The default budget's text (8 chunks) and a long one's, as every build before the train split was
# shipped with the package read them from GSM8K's train.jsonl: the same bytes, so KL figures do not move.
PINNED_TEXT = {
    8: (
        "08d93eaff731ab976780c29a1769b869609e59d0078e1a24150399cf2289bc98",
        "gsm8k train (17f347dc5147), first 44 of 7473 docs",
    ),
    16: (
        "8e747368616d9a7b619a8f440b026ec8ebea2c75cfc08c55ea504b998e699b24",
        "gsm8k train (17f347dc5147), first 88 of 7473 docs",
    ),
}


@pytest.mark.parametrize("chunks", sorted(PINNED_TEXT))
def test_kld_text_is_the_train_text_earlier_builds_scored_byte_for_byte(chunks, monkeypatch):
    monkeypatch.delenv(gsm8k.SHARED_DIR_ENV, raising=False)
    text, source = K.kld_text(chunks)
    assert (hashlib.sha256(text.encode()).hexdigest(), source) == PINNED_TEXT[chunks]


def test_kld_text_never_falls_back_to_another_split(tmp_path, monkeypatch):
    monkeypatch.setattr(gsm8k, "PACKAGED_DIR", tmp_path / "absent")
    monkeypatch.setenv(gsm8k.SHARED_DIR_ENV, str(tmp_path / "absent"))
    gsm8k._load.cache_clear()
    with pytest.raises(gsm8k.GsmDataError, match="train split not found"):
        K.kld_text(8)


def test_kld_text_covers_the_largest_budget_a_study_allows():
    text, source = K.kld_text(K.chunks_for(65280))
    assert len(text) >= 256 * K.KLD_CTX * K.CHARS_PER_TOKEN_BOUND and "first 1460 of 7473" in source


def test_command_lines_follow_the_arms_kv_cache_as_the_server_does(tmp_path):
    exe, m, b = Path("/x/llama-perplexity"), Path("/m.gguf"), tmp_path / "b.kld"
    base = K.base_argv(exe, m, "f16", tmp_path / "t.txt", b, 8, threads=2)
    assert base[:3] == [str(exe), "-m", str(m)] and "--kl-divergence-base" in base and "-fa" not in base
    assert base[base.index("--chunks") + 1] == "8" and base[base.index("-c") + 1] == str(K.KLD_CTX)
    arm = K.arm_argv(exe, m, "q4_0", b, threads=2)
    assert "--kl-divergence" in arm and arm[arm.index("--kl-divergence-base") + 1] == str(b)
    assert arm[arm.index("-fa") + 1] == "on" and arm[arm.index("-ctk") + 1] == arm[arm.index("-ctv") + 1] == "q4_0"
    with pytest.raises(ValueError, match="knobs.kv: 'fp8' is not served by llamacpp"):
        K.kv_args("fp8")


def test_chunks_cover_the_token_budget():
    assert K.chunks_for(255) == 1 and K.chunks_for(256) == 2 and K.chunks_for(4080) == 16


def test_study_token_budget_is_validated_in_one_line():
    s = "name = 'x'\n[model]\nname = 'm.gguf'\n[[arms]]\nname = 'a'\n[quality]\nkld_tokens = {}\n"
    assert parse_study(s.format(2040)).quality.kld_tokens == 2040
    for bad in (100, 10**6):
        with pytest.raises(StudyError, match=r"quality\.kld_tokens: .* between 255 .* and 65280"):
            parse_study(s.format(bad))
    with pytest.raises(StudyError, match=r"kld --tokens: .* between 255"):
        S.token_budget(load_study("default"), 3)


@pytest.mark.parametrize("name", ["default", "full"])
def test_one_run_per_token_changing_configuration_baseline_first(name):
    study = load_study(name)
    arms = S.kld_arms(study)
    keys = [(a.weights, a.kv) for a in arms]
    assert arms[0].name == study.baseline.name and len(keys) == len(set(keys))
    # slots and speculation inherit; an arm without a task score still gets its KL (the default's
    # guard rests on it)
    assert set(keys) == {(a.weights, a.kv) for a in study.arms}
    study = load_study("full")
    named = S.kld_arms(study, ["kv-q4_0-slots2", "kv-q4_0"])
    assert [a.name for a in named] == [study.baseline.name, "kv-q4_0-slots2"]


# -- the stage: resume and the baseline's logits ----------------------------------------------------
@pytest.fixture
def fake_tools(tmp_path, monkeypatch):
    """llama-perplexity replaced by the real outputs above; every call is recorded."""
    calls: list[list[str]] = []

    def run(argv, timeout_s=0):
        calls.append(argv)
        if "--kl-divergence" in argv:
            assert Path(argv[argv.index("--kl-divergence-base") + 1]).is_file()
            return ARM_OUT, 1.0
        Path(argv[argv.index("--kl-divergence-base") + 1]).write_bytes(b"_logits_")
        return BASE_OUT.replace(f"over {K.parse_base(BASE_OUT).chunks} chunks", "over 16 chunks"), 1.0

    monkeypatch.setattr(K, "llama_perplexity", lambda: Path("/x/llama-perplexity"))
    monkeypatch.setattr(K, "run_perplexity", run)
    monkeypatch.setattr(S, "variant_file", lambda model, w: (tmp_path / f"{w}.gguf", f"sha-{w}"))
    return calls


def test_stage_stores_each_configuration_once_and_drops_the_base_logits(tmp_path, fake_tools):
    study, console = load_study("default"), Console(file=io.StringIO(), width=300)
    with Store(tmp_path / "s.duckdb") as store:
        rows = S.kld_study(study, store, console, arms=["q4_0", "kv-q4_0"], tokens=4080, workdir=tmp_path / "w")
        assert [r["arm"] for r in rows] == [study.baseline.name, "q4_0", "kv-q4_0"]
        # the build says which split its text came from, on its output and in every stored row
        assert "of gsm8k train (17f347dc5147), first 88 of 7473 docs" in console.file.getvalue()
        assert {r["text_source"] for r in rows} == {"gsm8k train (17f347dc5147), first 88 of 7473 docs"}
        assert [r["role"] for r in rows] == ["base", "arm", "arm"] and rows[0]["kld"] == 0.0
        assert len(fake_tools) == 3 and not list((tmp_path / "w").glob("*.kld"))
        stored = store.kld_points(study.name)
        assert len(stored) == 3 and stored.output.str.len().min() > 0
        assert (stored[stored.role == "arm"].kld_lo < stored[stored.role == "arm"].kld).all()
        again = S.kld_study(study, store, console, arms=["q4_0", "kv-q4_0"], tokens=4080, workdir=tmp_path / "w")
        assert len(fake_tools) == 3 and [r["kld_id"] for r in again] == [r["kld_id"] for r in rows]
        # a new configuration needs the baseline's logits again; the stored ones are not re-run
        S.kld_study(study, store, console, arms=["q8_0"], tokens=4080, workdir=tmp_path / "w", keep_base=True)
        assert len(fake_tools) == 5 and len(list((tmp_path / "w").glob("*.kld"))) == 1


def test_stage_without_the_binary_says_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.setattr(K, "llama_perplexity", lambda: None)
    with Store(tmp_path / "s.duckdb") as store, pytest.raises(S.KldUnavailable, match="make llama-tools"):
        S.kld_study(load_study("default"), store, Console(file=open("/dev/null", "w")))


def test_an_interrupted_baseline_run_leaves_no_logits_and_no_rows(tmp_path, fake_tools, monkeypatch):
    def interrupted(argv, timeout_s=0):
        Path(argv[argv.index("--kl-divergence-base") + 1]).write_bytes(b"_logits_ half")
        raise KeyboardInterrupt

    monkeypatch.setattr(K, "run_perplexity", interrupted)
    with Store(tmp_path / "s.duckdb") as store, pytest.raises(KeyboardInterrupt):
        S.kld_study(
            load_study("default"), store, Console(file=open("/dev/null", "w")), arms=["q4_0"], workdir=tmp_path / "w"
        )
    with Store(tmp_path / "s.duckdb") as store:
        assert store.kld_points().empty and not list((tmp_path / "w").iterdir())


def test_cli_without_the_binary_is_one_line_naming_the_make_target(tmp_path, monkeypatch):
    monkeypatch.setenv("PARETO_ATLAS_LLAMA_PERPLEXITY", str(tmp_path / "missing"))
    r = CliRunner().invoke(
        app, ["quality", "tiny", "--kind", "kld", "--out", str(tmp_path), "--store", str(tmp_path / "s.duckdb")]
    )
    assert r.exit_code == 2, r.output
    err = " ".join(r.output.split())
    assert err.startswith("error: kld: llama-perplexity is not built; `make llama-tools` builds it")
    assert "Traceback" not in r.output


def test_cli_runs_the_stage_and_prints_the_table(tmp_path, fake_tools):
    r = CliRunner().invoke(
        app, ["quality", "default", "--kind", "kld", "--arm", "q4_0", "--tokens", "510", "--out", str(tmp_path)]
    )
    assert r.exit_code == 0, r.output
    assert "mean KLD [95 %]" in r.output and "q4_0" in r.output and "reference" in r.output
    with Store(tmp_path / "store.duckdb") as store:
        assert sorted(store.kld_points().arm) == ["q4_0", "q4km"]
