"""A decode's KV read efficiency is fitted only where anchors at two contexts per sequence show it: at
one context the KV bytes grow with the batch exactly as the per-sequence overhead does (issue 31: H200's
vLLM fit on 512-token prompts read the KV at 45 % of its bandwidth)."""

from __future__ import annotations

import pandas as pd

from pareto_atlas.calibrate.published import KV_IDENTIFIED, card_frame, fit_card, kv_read_contexts
from pareto_atlas.calibrate.published_table import load_published
from pareto_atlas.simulate.params import default_params
from pareto_atlas.spec.cards import shipped_hardware, shipped_models

M = shipped_models()["llama-3.1-8b"]


def _frame(rows: list[tuple[int, int, int]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "prompt_tokens": p,
                "output_tokens": o,
                "concurrency": c,
                "slots": c,
                "rate_rps": float("nan"),
                "kv": "f16",
                "weights": "BF16",
            }
            for p, o, c in rows
        ]
    )


def test_kv_shows_where_it_is_a_share_of_the_step_and_two_contexts_identify_it():
    # 16 GB of BF16 weights; 576 tokens x 131 KB = 75 MB of KV a sequence: 1 sequence is 0.5 %, 100 are 32 %
    one = kv_read_contexts(_frame([(512, 128, 1), (512, 128, 100)]), [M, M])
    assert one == {"f16": {576}}  # the batch of 1 shows nothing; one context: not identified
    assert 75e6 / 16e9 < KV_IDENTIFIED < 100 * 75e6 / (100 * 75e6 + 16e9)
    two = kv_read_contexts(_frame([(512, 128, 100), (4000, 500, 32)]), [M, M])
    assert two == {"f16": {576, 4250}}
    rate = _frame([(4000, 500, 0)]).assign(rate_rps=5.0, slots=1024)
    assert kv_read_contexts(rate, [M]) == {"f16": set()}  # an open rate's batch is not known


def test_h200s_vllm_fit_keeps_the_default_kv_read_and_h100s_fits_its_own():
    rows = load_published().rows
    hw = shipped_hardware()["H200"]
    h200 = rows[(rows.gpu == "H200") & (rows.engine == "vllm")].reset_index(drop=True)
    frame, models = card_frame(h200, hw)
    p, _ = fit_card(frame, models, hw)
    assert "f16" not in p.eff_attn_by_kv and p.attn_eff("f16") == default_params(hw, "vllm").eff_attn
    h100 = rows[(rows.gpu == "H100-SXM") & (rows.engine == "vllm")].reset_index(drop=True)
    f2, m2 = card_frame(h100, shipped_hardware()["H100-SXM"])
    assert len(kv_read_contexts(f2, m2)["f16"]) >= 2
