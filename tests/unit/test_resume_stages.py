"""Long runs survive a restart: quality, kld and simulate stopped midway resume without recomputing
what they saved (measurement's own resume is tested end to end in tests/e2e/test_build_tiny.py).

Quality runs against the OpenAI-compatible test server (the engine path is the real one; only the
server is a stand-in), kld against llama-perplexity's recorded outputs (the binary is not built in
the default suite), simulate on the real sweep."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from pareto_atlas.quality import kld as K
from pareto_atlas.quality import kld_stage as S
from pareto_atlas.spec.study import load_study, parse_study
from pareto_atlas.store import Store

QUIET = Console(file=open("/dev/null", "w"))


class Stop(KeyboardInterrupt):
    """Ctrl-C at a chosen moment."""


# -- quality -------------------------------------------------------------------------------------------
def _endpoint_quality_study(base_url: str, quality: str):
    """A one-arm quality study against an attached (fake) endpoint; `quality`: its [quality] lines."""
    return parse_study(f"""name = "q"
[model]
name = "smollm2-135m-instruct"
card = "smollm2-135m"
[engine]
name = "openai"
base_url = "{base_url}"
options = {{check = false}}
[[arms]]
name = "base"
weights = "Q4_1"
quality = true
[quality]
{quality}
""")


def test_quality_stopped_midway_resumes_asking_only_the_items_it_had_not_saved(tmp_path: Path, monkeypatch):
    from pareto_atlas.measure import campaign
    from pareto_atlas.measure.fakeserver import FakeBehaviour, FakeOpenAIServer
    from pareto_atlas.quality.campaign import run_quality_campaign

    monkeypatch.setattr(campaign, "served_model", lambda study, arm: (Path("fake.gguf"), "0" * 64, 1, 4.5))
    with FakeOpenAIServer(FakeBehaviour()) as srv, Store(tmp_path / "s.duckdb") as store:
        study = _endpoint_quality_study(srv.base_url, "n = 6\nmax_tokens = 16")
        seen = []

        def stop_after_two(ev: str, info: dict) -> None:
            if ev == "item":  # after the item's record was handed over to be saved
                seen.append(1)
                if len(seen) == 2:
                    raise Stop

        with pytest.raises(Stop):
            run_quality_campaign(study, store, on_progress=stop_after_two)
        saved = store.con.execute("SELECT count(*) FROM quality_items").fetchone()[0]
        assert saved >= 2 and store.quality_runs("q", status=None).empty
        asked = srv.requests
        run_quality_campaign(study, store)
        assert srv.requests - asked == 6 - saved  # only the missing items are generated
        run = store.quality_runs("q")
        assert len(run) == 1 and len(store.quality_items(run.qrun_id.iloc[0])) == 6
        asked = srv.requests
        run_quality_campaign(study, store)  # a finished arm: nothing is asked at all
        assert srv.requests == asked


# -- kld ---------------------------------------------------------------------------------------------
FIX = Path(__file__).resolve().parents[1] / "fixtures"


def test_kld_stopped_after_a_configuration_resumes_with_the_rest_only(tmp_path: Path, monkeypatch):
    base_out = (FIX / "llama_perplexity_kld_base.txt").read_text()
    arm_out = (FIX / "llama_perplexity_kld_q4_0.txt").read_text()
    calls: list[str] = []
    stop_at = {"n": 2}  # the second configuration's run is interrupted

    def run(argv, timeout_s=0):
        base = Path(argv[argv.index("--kl-divergence-base") + 1])
        if "--kl-divergence" not in argv:
            calls.append("base")
            base.write_bytes(b"_logits_")
            return base_out.replace(f"over {K.parse_base(base_out).chunks} chunks", "over 16 chunks"), 1.0
        calls.append("arm")
        if calls.count("arm") == stop_at["n"]:
            raise Stop
        return arm_out, 1.0

    monkeypatch.setattr(K, "llama_perplexity", lambda: Path("/x/llama-perplexity"))
    monkeypatch.setattr(K, "run_perplexity", run)
    monkeypatch.setattr(S, "variant_file", lambda model, w: (tmp_path / f"{w}.gguf", f"sha-{w}"))
    study, arms = load_study("default"), ["q4_0", "kv-q4_0", "q8_0"]
    with Store(tmp_path / "s.duckdb") as store:
        with pytest.raises(Stop):
            S.kld_study(study, store, QUIET, arms=arms, tokens=4080, workdir=tmp_path / "w")
        assert calls == ["base", "arm", "arm"]
        assert sorted(store.kld_points(study.name).role) == ["arm", "base"]  # the finished one is kept
        stop_at["n"] = 0
        rows = S.kld_study(study, store, QUIET, arms=arms, tokens=4080, workdir=tmp_path / "w")
    # the baseline's logits were kept beside its stored row: the rerun runs the two missing arms only
    assert calls == ["base", "arm", "arm", "arm", "arm"]
    assert [r["arm"] for r in rows] == [study.baseline.name, *arms]


# -- simulate ----------------------------------------------------------------------------------------
def _small_space():
    from pareto_atlas.simulate.space import Load, Space, Workload, default_knobs
    from pareto_atlas.spec.cards import shipped_hardware, shipped_models

    hw = shipped_hardware()
    return Space(
        shipped_models()["smollm2-135m"],
        (hw["L4"], hw["H100-SXM"]),
        tuple(default_knobs("gpu")[:24]),
        (Workload("p128-n32", 128, 32),),
        (Load(concurrency=1), Load(concurrency=4)),
    )


def test_simulate_stopped_midway_resumes_from_its_saved_shards_and_equals_an_unbroken_sweep(tmp_path: Path):
    from pareto_atlas.simulate.resume import resumable_sweep
    from pareto_atlas.simulate.sweep import sweep

    space, ran = _small_space(), []

    def run(sp, seed):
        ran.append(seed)
        return sweep(sp, {}, n_requests=20, seed=seed)

    def stop_after_three(i: int, n: int, kept: bool) -> None:
        if i == 2:
            raise Stop

    with Store(tmp_path / "s.duckdb") as store:
        with pytest.raises(Stop):
            resumable_sweep(store, "s", space, {}, 20, run, on_shard=stop_after_three)
        assert len(ran) == 3
        kept: list[bool] = []
        pts = resumable_sweep(store, "s", space, {}, 20, run, on_shard=lambda i, n, k: kept.append(k))
        n = len(kept)
        assert kept[:3] == [True] * 3 and not any(kept[3:]) and len(ran) == 3 + n - 3
        again = resumable_sweep(store, "s", space, {}, 20, run)  # all saved: nothing simulated
        assert len(ran) == n
    whole = sweep(space, {}, n_requests=20, seed=0)
    pd.testing.assert_frame_equal(pts, whole)
    pd.testing.assert_frame_equal(again, whole)


def test_a_changed_sweep_is_not_resumed_from_another_ones_shards(tmp_path: Path):
    from dataclasses import replace

    from pareto_atlas.simulate.resume import resumable_sweep
    from pareto_atlas.simulate.sweep import sweep

    space, ran = _small_space(), []

    def run(sp, seed):
        ran.append(seed)
        return sweep(sp, {}, n_requests=20, seed=seed)

    with Store(tmp_path / "s.duckdb") as store:
        resumable_sweep(store, "s", space, {}, 20, run)
        first = len(ran)
        other = replace(space, workloads=(space.workloads[0].__class__("p256-n32", 256, 32),))
        resumable_sweep(store, "s", other, {}, 20, run)
        assert len(ran) == 2 * first  # every shard simulated anew
        # only the latest sweep's shards are kept
        assert store.con.execute("SELECT count(DISTINCT sweep_key) FROM sim_shards").fetchone()[0] == 1


def test_the_simulate_stage_stopped_midway_keeps_its_shards_and_the_rerun_stores_the_whole_sweep(
    tmp_path: Path, monkeypatch
):
    from pareto_atlas.simulate.stage import simulate_study

    text = load_study_text("tiny")
    text = text[: text.index("[[targets]]")] + text[text.index("[[regimes]]") :]  # the measured model only
    study = parse_study(
        text.replace('hardware = ["this-cpu", "L4", "H100-SXM"]', 'hardware = ["L4"]\nmax_configs = 300')
    )
    computed: list[int] = []
    calls = {"n": 0}
    orig_put = Store.put_sim_shard

    def put_then_maybe_stop(self, key, st, i, n, blob):
        orig_put(self, key, st, i, n, blob)
        computed.append(i)
        if len(computed) == 2 and calls["n"] == 0:
            calls["n"] = 1
            raise Stop  # Ctrl-C right after the second shard was saved

    monkeypatch.setattr(Store, "put_sim_shard", put_then_maybe_stop)
    with Store(tmp_path / "s.duckdb") as store:
        with pytest.raises(Stop):
            simulate_study(study, store, QUIET)
        assert store.sim_points(study="tiny").empty and computed == [0, 1]
        simulate_study(study, store, QUIET)
        n = store.con.execute("SELECT max(n_shards) FROM sim_shards").fetchone()[0]
        assert computed == [0, 1] + list(range(2, n))  # the saved two were not simulated again
        assert len(store.sim_points(study="tiny")) > 0


def load_study_text(name: str) -> str:
    from importlib import resources

    from pareto_atlas.spec.study import BUILTIN

    return resources.files("pareto_atlas.spec").joinpath(BUILTIN[name]).read_text()


def test_a_run_of_items_sized_by_the_tokenizer_stores_the_items_it_scored_as_its_n(tmp_path: Path, monkeypatch):
    """Retrieval (and RULER) items are per cell: the run's n is how many were scored, not [quality] n."""
    from pareto_atlas.measure import campaign
    from pareto_atlas.measure.fakeserver import FakeBehaviour, FakeOpenAIServer
    from pareto_atlas.quality.campaign import run_quality_campaign

    monkeypatch.setattr(campaign, "served_model", lambda study, arm: (Path("fake.gguf"), "0" * 64, 1, 4.5))
    with FakeOpenAIServer(FakeBehaviour()) as srv, Store(tmp_path / "s.duckdb") as store:
        study = _endpoint_quality_study(
            srv.base_url,
            "task = \"retrieval\"\nn = 20\nmax_tokens = 16\nretrieval_lengths = [64]\nretrieval_per_cell = 1",
        )
        run_quality_campaign(study, store)
        run = store.quality_runs("q")
        assert len(run) == 1 and int(run.n.iloc[0]) == len(store.quality_items(run.qrun_id.iloc[0])) == 3
