"""The experts a random-weight MoE's decode actually routes to: a numpy replica of llama.cpp's
`qwen3moe` forward pass (measure.random_moe's files) run greedily, as the server decodes under the
token contract (temperature 0), recording each token's top-k experts in every layer.

Why a replica: how many experts a step of B sequences reads is what bends an MoE's step time with B
(simulate.moe), and it depends on how the router spreads tokens, which llama.cpp does not report. A
random model decoded greedily is not a uniform router: a sequence soon repeats a token or a short
cycle, so its experts stay the same step after step, and B sequences touch the union of B fixed
draws. The count per step is then set by the prompts' draw, not averaged over 64 steps. The replica
gives those counts for many prompts, so the law's touched experts rest on the model's own routing.

The graph follows llama.cpp's qwen3moe: RMS norms (eps from the shape's file, 1e-6), Q/K per-head RMS
norms, NEOX rotary (base 1e6), grouped-query causal attention, softmax router with top-k and the k
weights renormalised, SwiGLU experts, the output tied to the embedding. Float differences against
llama.cpp can flip a near-tie, so the replica stands for the routing's statistics, not its tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np

EPS = 1e-6
ROPE_BASE = 1e6


@dataclass(frozen=True)
class Routing:
    """experts[s, t, l, j]: the j-th expert sequence s's decode step t ran in layer l (step 0 is the
    prompt's last token, as the first output token is computed from it)."""

    experts: np.ndarray  # int, [sequences, steps, layers, k]
    tokens: np.ndarray  # int, [sequences, steps]: each step's greedy output
    n_experts: int

    def touched(self, seqs: tuple[int, ...]) -> np.ndarray:
        """Distinct experts per layer at each step of these sequences decoding together: [steps, layers]."""
        e = self.experts[list(seqs)]  # [b, t, l, k]
        hot = np.zeros((e.shape[1], e.shape[2], self.n_experts), dtype=bool)
        for s in range(e.shape[0]):
            for j in range(e.shape[3]):
                np.put_along_axis(hot, e[s, :, :, j][..., None], True, axis=2)
        return hot.sum(axis=2)

    def touched_by_batch(self, batch: int, max_groups: int = 200, seed: int = 0) -> np.ndarray:
        """Mean distinct experts per layer per step for each group of `batch` sequences (all groups, or
        `max_groups` drawn at random): the spread is the prompts' draw."""
        n = self.experts.shape[0]
        if not 1 <= batch <= n:
            raise ValueError(f"batch: {batch} must be in 1..{n} (the sequences decoded)")
        groups = list(combinations(range(n), batch))
        if len(groups) > max_groups:
            rng = np.random.default_rng(seed)
            groups = [groups[i] for i in rng.choice(len(groups), max_groups, replace=False)]
        return np.array([self.touched(g).mean() for g in groups])


def _rms(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + EPS) * w


def _rope(x: np.ndarray, pos: int) -> np.ndarray:
    # NEOX: dimension i rotates with i + d/2 at angle pos * base^(-2i/d)
    d = x.shape[-1]
    theta = pos * ROPE_BASE ** (-np.arange(d // 2) * 2.0 / d)
    c, s = np.cos(theta), np.sin(theta)
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return np.concatenate([a * c - b * s, a * s + b * c], axis=-1)


def decode_routes(path: str | Path, prompts: list[list[int]], output_tokens: int) -> Routing:
    """Greedy decode of each prompt (token ids) for `output_tokens` tokens on the GGUF at `path`,
    recording the experts every decode step routes to."""
    import gguf

    r = gguf.GGUFReader(str(path))
    w = {t.name: np.asarray(t.data) for t in r.tensors}
    arch = str(bytes(r.fields["general.architecture"].parts[-1]), "utf-8")
    if arch != "qwen3moe":
        raise ValueError(f"decode_routes: {path} is {arch!r}; allowed: qwen3moe")
    n_layers = 1 + max(int(n.split(".")[1]) for n in w if n.startswith("blk."))
    n_exp, hidden = w["blk.0.ffn_gate_inp.weight"].shape
    k = int(r.fields["qwen3moe.expert_used_count"].parts[-1][0])
    hd = w["blk.0.attn_q_norm.weight"].shape[0]
    nh, nkv = w["blk.0.attn_q.weight"].shape[0] // hd, w["blk.0.attn_k.weight"].shape[0] // hd
    emb = w["token_embd.weight"]
    experts = np.zeros((len(prompts), output_tokens, n_layers, k), dtype=np.int16)
    tokens = np.zeros((len(prompts), output_tokens), dtype=np.int64)
    for si, prompt in enumerate(prompts):
        kc = [np.zeros((0, nkv, hd), np.float32) for _ in range(n_layers)]
        vc = [np.zeros((0, nkv, hd), np.float32) for _ in range(n_layers)]
        seq = list(prompt)
        for pos in range(len(prompt) + output_tokens - 1):
            x = emb[seq[pos]].astype(np.float32)
            step = pos - (len(prompt) - 1)  # >= 0: a decode step whose routing is recorded
            for li in range(n_layers):
                b = f"blk.{li}."
                h = _rms(x, w[b + "attn_norm.weight"])
                q = _rope(_rms((w[b + "attn_q.weight"] @ h).reshape(nh, hd), w[b + "attn_q_norm.weight"]), pos)
                kk = _rope(_rms((w[b + "attn_k.weight"] @ h).reshape(nkv, hd), w[b + "attn_k_norm.weight"]), pos)
                kc[li] = np.concatenate([kc[li], kk[None]])
                vc[li] = np.concatenate([vc[li], (w[b + "attn_v.weight"] @ h).reshape(nkv, hd)[None]])
                g = nh // nkv
                att = np.empty((nh, hd), np.float32)
                for hi in range(nh):
                    sc = kc[li][:, hi // g] @ q[hi] / np.sqrt(hd)
                    p = np.exp(sc - sc.max())
                    att[hi] = (p / p.sum()) @ vc[li][:, hi // g]
                x = x + w[b + "attn_output.weight"] @ att.reshape(-1)
                h = _rms(x, w[b + "ffn_norm.weight"])
                logits = w[b + "ffn_gate_inp.weight"] @ h
                top = np.argsort(-logits, kind="stable")[:k]
                p = np.exp(logits[top] - logits.max())
                p = p / p.sum()  # softmax over all then renormalised over the k: the same weights
                out = np.zeros(hidden, np.float32)
                for e, pe in zip(top, p):
                    gate = w[b + "ffn_gate_exps.weight"][e] @ h
                    up = w[b + "ffn_up_exps.weight"][e] @ h
                    out += pe * (w[b + "ffn_down_exps.weight"][e] @ (gate / (1 + np.exp(-gate)) * up))
                x = x + out
                if step >= 0:
                    experts[si, step, li] = top
            if step >= 0:
                nxt = int(np.argmax(emb @ _rms(x, w["output_norm.weight"])))
                tokens[si, step] = nxt
                if len(seq) == pos + 1:
                    seq.append(nxt)
    return Routing(experts=experts, tokens=tokens, n_experts=int(n_exp))
