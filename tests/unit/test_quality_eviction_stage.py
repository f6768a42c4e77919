"""The `evict` stage and subcommand without torch: options, the missing extra, and resuming from the store."""

from __future__ import annotations

import io
import sys
from types import SimpleNamespace

import pytest
from rich.console import Console
from typer.testing import CliRunner

from pareto_atlas.cli import app
from pareto_atlas.quality.eviction import experiment, model, stage
from pareto_atlas.quality.eviction.experiment import EvictionPoint
from pareto_atlas.quality.records import QualityRecord
from pareto_atlas.quality.stats import score_bools
from pareto_atlas.spec.study import load_study
from pareto_atlas.store import Store


def test_missing_extra_is_one_line_naming_it(tmp_path, monkeypatch):
    # None in sys.modules makes `import torch` fail even where torch is installed
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "transformers", None)
    r = CliRunner().invoke(
        app, ["quality", "tiny", "--kind", "evict", "--out", str(tmp_path), "--store", str(tmp_path / "s.duckdb")]
    )
    assert r.exit_code == 2, r.output
    err = " ".join(r.output.split())  # the console may wrap a long line; the message is one
    assert err.startswith("error: evict: KV eviction needs torch and transformers")
    assert "pip install 'pareto-atlas[eviction]'" in err and "Traceback" not in r.output


def test_bad_option_names_the_field_and_allowed_values(tmp_path):
    r = CliRunner().invoke(app, ["quality", "tiny", "--kind", "evict", "--policies", "h2o,lru", "--out", str(tmp_path)])
    assert r.exit_code == 2
    err = " ".join(r.output.split())
    assert "evict options: policies: 'lru' is not one of streaming, h2o, snapkv, pyramidkv, topk" in err


class FakeTok:
    def __call__(self, text, add_special_tokens=True):
        return SimpleNamespace(input_ids=text.split())


@pytest.fixture
def fake_engine(monkeypatch, tmp_path):
    """Everything torch would do, faked: which configs the sweep is asked to run is what we check."""
    calls = {"load": 0, "configs": []}
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(model, "require_torch", lambda: None)
    monkeypatch.setattr(stage, "source_file", lambda name: (gguf, "sha-m"))

    def load_dense(path):
        calls["load"] += 1
        return object(), FakeTok()

    def eviction_sweep(m, tok, items, configs, ppl_text=None, on_point=None):
        out = []
        for cfg in configs:
            calls["configs"].append(cfg.label())
            ok = [cfg.reference or i == 0 for i in range(len(items))]  # eviction loses all but the first
            recs = tuple(
                QualityRecord(
                    item_id=it.item_id,
                    task=it.task,
                    variant=it.variant,
                    prompt_sha256="x",
                    target=it.target,
                    output="",
                    extracted_strict="",
                    extracted_flexible="",
                    correct_strict=o,
                    correct_flexible=o,
                    latency_s=0.0,
                )
                for it, o in zip(items, ok)
            )
            p = EvictionPoint(
                label=cfg.label(),
                policy=cfg.policy,
                keep=1.0 if cfg.reference else cfg.keep,
                chunk=cfg.chunk,
                kv_keep=1.0 if cfg.reference else cfg.keep * 0.9,
                peak_kv_tokens=100,
                kv_bytes_per_token=9216,
                accuracy=score_bools(ok),
                ppl=4.0 if cfg.reference else 6.0,
                seconds=0.5,
                records=recs,
            )
            on_point(p)
            out.append(p)
        return out

    monkeypatch.setattr(model, "load_dense", load_dense)
    monkeypatch.setattr(experiment, "eviction_sweep", eviction_sweep)
    return calls


def test_points_are_stored_as_they_finish_and_a_rerun_runs_only_what_is_missing(tmp_path, fake_engine):
    study = load_study("tiny")
    out = io.StringIO()
    console = Console(file=out, width=200)
    with Store(tmp_path / "s.duckdb") as s:
        rows = stage.evict_study(study, s, console, policies=["streamingllm", "h2o"], keeps=[0.5])
        assert fake_engine["configs"] == ["full", "streaming@0.5", "h2o@0.5"]
        got = s.eviction_points(study.name)
        assert len(got) == 3 and set(got.policy) == {"none", "streaming", "h2o"}
        assert (got.ref_id == got[got.policy == "none"].evict_id.iloc[0]).all()
        h2o = got[got.policy == "h2o"].iloc[0]
        assert (h2o.n_items, h2o.correct, h2o.kv_keep, h2o.ppl, h2o.ppl_full) == (3, 1, 0.45, 6.0, 4.0)
        assert h2o.engine == "transformers-dense-gguf" and h2o.model == study.model.name and h2o.task == "retrieval"
        assert len(s.eviction_items(h2o.evict_id)) == 3 and len(rows) == 3
        assert "achieved kv_keep 0.450" in out.getvalue() and "ppl 6.000 vs full 4.000" in out.getvalue()

        # a second keep: only the two new points run; the stored reference gives their full-cache ppl
        stage.evict_study(study, s, console, policies=["streaming", "h2o"], keeps=[0.5, 0.25])
        assert fake_engine["configs"][3:] == ["streaming@0.25", "h2o@0.25"]
        assert len(s.eviction_points()) == 5 and (s.eviction_points().ppl_full == 4.0).all()

        # everything stored: the model is not even loaded
        loads = fake_engine["load"]
        stage.evict_study(study, s, console, policies=["h2o", "streaming"], keeps=[0.25, 0.5])
        assert fake_engine["load"] == loads and len(fake_engine["configs"]) == 5
        assert "stored earlier, kept" in out.getvalue()


def test_the_subcommand_measures_top_k_sparse_attention_as_a_policy(tmp_path, fake_engine):
    store = tmp_path / "s.duckdb"
    r = CliRunner().invoke(
        app,
        [
            "quality",
            "tiny",
            "--kind",
            "evict",
            "--policies",
            "sparse",
            "--keeps",
            "0.5,0.25",
            "--task",
            "retrieval",
            "--n",
            "1",
            "--store",
            str(store),
            "--out",
            str(tmp_path),
        ],
    )
    assert r.exit_code == 0, r.output
    assert fake_engine["configs"] == ["full", "topk@0.5", "topk@0.25"]
    assert "achieved attended 0.225" in r.output and "achieved kv_keep 1.000" in r.output
    with Store(store) as s:
        got = s.eviction_points("tiny").set_index("label")
    assert got.loc["topk@0.25", "policy"] == "topk" and got.loc["topk@0.25", "keep"] == 0.25
    assert got.loc["topk@0.5", "ref_id"] == got.loc["full", "evict_id"]


def test_top_k_achieved_share_is_averaged_over_decode_steps_not_items():
    def rec(keep: float, steps: int) -> QualityRecord:
        return QualityRecord(
            item_id="i",
            task="retrieval",
            variant="niah",
            prompt_sha256="x",
            target="1",
            output="1",
            extracted_strict="1",
            extracted_flexible="1",
            correct_strict=True,
            correct_flexible=True,
            latency_s=0.0,
            meta={"kv_keep": keep, "sparse_steps": steps},
        )

    # an answer given by the prefill alone (no decode step) read every key but weighs nothing
    assert experiment.achieved_keep([rec(0.25, 6), rec(0.5, 2), rec(1.0, 0)]) == (0.25 * 6 + 0.5 * 2) / 8
    assert experiment.achieved_keep([rec(0.4, 0), rec(0.6, 0)]) == 0.5  # eviction: the mean over items


def test_a_different_item_set_is_a_different_point(tmp_path):
    study = load_study("tiny")
    spec = stage.sweep_spec(study)
    a = stage.items_ident(study, spec)
    b = stage.items_ident(study, stage.sweep_spec(study, n=2))
    g = stage.items_ident(study, stage.sweep_spec(study, task="gsm8k"))
    assert a["task"] == "retrieval" and a["n"] == study.quality.retrieval_per_cell and b["n"] == 2
    assert g["task"] == "gsm8k" and g["n"] == study.quality.n
    ids = {stage.evict_id(study, "sha", it, "h2o", 0.5, 128) for it in (a, b, g)}
    assert len(ids) == 3 and stage.evict_id(study, "sha", a, "h2o", 0.5, 128) == stage.evict_id(
        study, "sha", a, "h2o", 0.5, 128
    )


def test_a_ruler_sweep_asks_its_own_lengths_and_a_prefilled_answer_is_continued():
    study = load_study("workloads")
    items = stage.items_ident(study, stage.sweep_spec(study))
    assert items["task"] == "ruler" and items["lengths"] == [2048] and study.quality.ruler_lengths == [2048, 4096]
    # another length is another item set, so another point
    other = stage.items_ident(study, stage.sweep_spec(study).with_overrides(lengths=[4096]))
    assert stage.evict_id(study, "x", items, "h2o", 0.25, 128) != stage.evict_id(study, "x", other, "h2o", 0.25, 128)

    calls = []

    class Tok:
        def apply_chat_template(self, msgs, tokenize, **kw):
            calls.append(kw)
            return "|".join(m["content"] for m in msgs)

    from pareto_atlas.quality.records import QualityItem

    pre = QualityItem(
        item_id="r/1", task="ruler", variant="ruler", target="[]", messages=(("user", "q"), ("assistant", "A:"))
    )
    plain = QualityItem(item_id="r/2", task="ruler", variant="ruler", target="[]", messages=(("user", "q"),))
    assert experiment.item_prompt(Tok(), pre).endswith("A:") and calls[-1] == {"continue_final_message": True}
    experiment.item_prompt(Tok(), plain)
    assert calls[-1] == {"add_generation_prompt": True}
