"""An anchor of a workload that shares keeps the tokens its prompts share as the server's tokenizer counted
them (contract.measure_shared_prefix), the points table carries the figure, and the prefix cache's held-out
benchmark replays it as the pattern's prefix; an anchor stored before it keeps the stated prefix, marked."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

from pareto_atlas.measure import campaign
from pareto_atlas.measure.fakeserver import FakeBehaviour, FakeOpenAIServer
from pareto_atlas.spec.sharing import Sharing, as_measured
from pareto_atlas.spec.study import parse_study
from pareto_atlas.store import Store
from pareto_atlas.store.points import measured_points

ROOT = Path(__file__).resolve().parents[2]
STUDY = """
name = "t"
[model]
name = "smollm2-135m-instruct"
card = "smollm2-135m"
[workload]
name = "w"
prompt_tokens = 40
output_tokens = 2
share = {{ prefix_tokens = 16, groups = 2 }}
[load]
requests = 5
warmup = 1
[[arms]]
name = "a"
[engine]
name = "openai"
base_url = "{url}"
options = {{check = false}}
"""


def _bench():
    spec = importlib.util.spec_from_file_location("bench_prefix_heldout", ROOT / "benchmarks/bench_prefix_heldout.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_anchor_keeps_the_counted_shared_prefix_and_the_benchmark_replays_it(tmp_path, monkeypatch):
    monkeypatch.setattr(campaign, "served_model", lambda study, arm: (Path("fake.gguf"), "0" * 64, 1, 4.5))
    # the fake's tokens are words and its usage adds a BOS /tokenize leaves out (as llama.cpp's): a group's
    # requests share the stated 16 tokens (BOS + 15 words) and the word "Request" after them
    with FakeOpenAIServer(FakeBehaviour(bos_tokens=1)) as srv, Store(tmp_path / "s.duckdb") as store:
        s = parse_study(STUDY.format(url=srv.base_url), "t.toml")
        summary = campaign.run_campaign(s, store)
        assert summary.measured == 1, summary.failures
        m = json.loads(store.anchors("t").iloc[0].metrics_json)
        df = measured_points(s, store)
    assert m["shared_prefix_tokens"] == 17 and m["shared_prefix_by_group"] == [17, 17]
    assert m["shared_prefix_stated"] == 16 and "share 17 leading tokens" in m["shared_prefix_line"]
    row = df.iloc[0]
    assert row.shared_prefix_tokens == 17
    wl = s.arms[0].workload(s.workload)
    share, line = _bench().anchor_sharing(row, wl)
    assert share == Sharing(prefix_tokens=17, groups=2) and "counted" in line and "stated 16" in line
    # a store written before the count: the stated prefix, and the line says so
    old = row.drop("shared_prefix_tokens")
    share, line = _bench().anchor_sharing(old, wl)
    assert share == Sharing(prefix_tokens=16, groups=2) and "as stated (not measured" in line
    share, _ = _bench().anchor_sharing(pd.Series({**old, "shared_prefix_tokens": float("nan")}), wl)
    assert share.prefix_tokens == 16


def test_a_counted_prefix_outside_the_prompt_is_refused_naming_the_field():
    for bad in (40, -1, 3.5):
        with pytest.raises(ValueError, match=r"shared_prefix_tokens: .* an integer in 0\.\.39"):
            as_measured(Sharing(prefix_tokens=16), bad, 40)
    assert as_measured(Sharing(prefix_tokens=16), 20.0, 40)[0].prefix_tokens == 20
