"""measure.moe_routing replays a random-weight qwen3moe's greedy decode and records the experts each step
routes to: the first step's experts are the router's top-k on the prompt's last token, the counts of
distinct experts a group of sequences touches are the union of theirs, and a dense file is refused."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
from tiny_gguf import TINY_MOE as TINY

from pareto_atlas.measure.moe_routing import Routing, decode_routes
from pareto_atlas.measure.random_moe import build_random_gguf


@pytest.fixture(scope="module")
def files(tiny_tokenizer: Path, tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("moe")
    return {
        "moe": build_random_gguf(TINY, tokenizer=tiny_tokenizer, out_dir=d),
        "dense": build_random_gguf(TINY.dense_twin(), tokenizer=tiny_tokenizer, out_dir=d),
    }


def test_one_token_prompt_routes_by_the_router_on_its_embedding(files):
    # A one-token prompt's first step sees only itself: attention returns its own V, so layer 0's
    # router input is computable by hand; its top-2 must be what the replica records.
    r = gguf.GGUFReader(str(files["moe"]))
    w = {t.name: np.asarray(t.data) for t in r.tensors}
    tok = 7
    x = w["token_embd.weight"][tok]
    rms = lambda v: v / np.sqrt((v * v).mean() + 1e-6)  # noqa: E731 (norm weights are ones)
    v = (w["blk.0.attn_v.weight"] @ rms(x)).reshape(2, 8)
    x = x + w["blk.0.attn_output.weight"] @ np.repeat(v, 2, axis=0).reshape(-1)  # heads 0,1 -> kv 0; 2,3 -> kv 1
    want = set(np.argsort(-(w["blk.0.ffn_gate_inp.weight"] @ rms(x)))[:2].tolist())
    routes = decode_routes(files["moe"], [[tok]], 3)
    assert set(routes.experts[0, 0, 0].tolist()) == want
    assert routes.experts.shape == (1, 3, 2, 2) and routes.tokens.shape == (1, 3)
    assert ((routes.experts >= 0) & (routes.experts < 8)).all()
    assert all(len(set(routes.experts[0, t, li].tolist())) == 2 for t in range(3) for li in range(2))


def test_touched_is_the_union_of_the_sequences_experts():
    e = np.array(
        [
            [[[0, 1]], [[0, 1]]],  # sequence 0: experts 0,1 at both steps (one layer)
            [[[1, 2]], [[3, 4]]],  # sequence 1: 1,2 then 3,4
            [[[0, 1]], [[5, 6]]],
        ]
    )
    r = Routing(experts=e, tokens=np.zeros((3, 2), int), n_experts=8)
    assert r.touched((0,)).tolist() == [[2], [2]]
    assert r.touched((0, 1)).tolist() == [[3], [4]]
    assert r.touched((0, 1, 2)).tolist() == [[3], [6]]
    assert sorted(r.touched_by_batch(2).tolist()) == [3.0, 3.5, 3.5]  # (0,2): 2 then 4; (0,1) and (1,2): 3 then 4
    with pytest.raises(ValueError, match="batch: 4 must be in 1..3"):
        r.touched_by_batch(4)


def test_a_dense_file_is_refused_naming_its_architecture(files):
    with pytest.raises(ValueError, match="is 'qwen3'; allowed: qwen3moe"):
        decode_routes(files["dense"], [[1, 2]], 2)
