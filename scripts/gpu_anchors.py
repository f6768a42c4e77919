"""Step-time anchors on a GPU in plain PyTorch eager (engine label `torch-eager`, not vLLM): the
Qwen2.5-7B and 0.5B architectures with random weights, built from our model cards, timed for a
512-token prefill and for decode steps at batch 1/8/32/64 with a growing KV cache, in bf16 and in
FP8 matmuls (torch._scaled_mm, per-tensor scales) where the card has FP8 units.

Prepared for a lent H200 (PyTorch + CUDA, transformers, no network, no model files); it never
downloads anything. The JSON it writes holds one record per (model, matmul dtype, phase, batch)
with seconds per step, the step's weight + KV bytes and FLOPs, and what fraction of the card's
bandwidth and FLOP/s that achieves: what the simulator's per-step cost model is calibrated on.

    python scripts/gpu_anchors.py --out gpu_anchors.json          # on the GPU, < 8 minutes
    python scripts/gpu_anchors.py --dry-run --out /tmp/dry.json   # same code, CPU, tiny model, seconds
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import tomllib
from pathlib import Path

import torch
import transformers
from transformers import Qwen2Config, Qwen2ForCausalLM
from transformers.cache_utils import DynamicCache

CARDS = Path(__file__).resolve().parents[1] / "src" / "pareto_atlas" / "spec" / "models.toml"
MODELS = ("qwen2.5-7b", "qwen2.5-0.5b")
BATCHES = (1, 8, 32, 64)
PREFILL_TOKENS = 512
DECODE_STEPS = 16        # timed decode steps per batch, the KV cache growing by one token each
TINY = {"n_layers": 2, "hidden": 64, "n_heads": 4, "n_kv_heads": 2, "head_dim": 16, "intermediate": 128,
        "vocab": 512, "tied_embeddings": True}


def qwen_config(card: dict) -> Qwen2Config:
    """A Qwen2 config from one of our model cards (spec/models.toml: the published config's fields)."""
    return Qwen2Config(vocab_size=card["vocab"], hidden_size=card["hidden"], intermediate_size=card["intermediate"],
                       num_hidden_layers=card["n_layers"], num_attention_heads=card["n_heads"],
                       num_key_value_heads=card["n_kv_heads"], tie_word_embeddings=card["tied_embeddings"],
                       max_position_embeddings=4096, use_cache=True)


def random_model(cfg: Qwen2Config, device: str, dtype: torch.dtype) -> Qwen2ForCausalLM:
    """Random weights of the right shapes, made on the device (a 7B model in seconds, no files)."""
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM(cfg).to(dtype)
    return model.eval()


class FP8Linear(torch.nn.Module):
    """y = x W^T with W and x in float8_e4m3fn (per-tensor scales), through torch._scaled_mm."""

    def __init__(self, lin: torch.nn.Linear):
        super().__init__()
        w = lin.weight.detach()
        self.w_scale = (w.abs().max().float() / 448.0).clamp(min=1e-12)
        # _scaled_mm wants its second operand column-major: keep W (out x in) and pass W.t()
        self.w8 = (w.float() / self.w_scale).to(torch.float8_e4m3fn)
        self.bias = lin.bias
        self.out_dtype = w.dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        m = x2.shape[0]
        pad = (-m) % 16                    # FP8 GEMMs want every dimension a multiple of 16
        if pad:
            x2 = torch.nn.functional.pad(x2, (0, 0, 0, pad))
        x_scale = (x2.abs().max().float() / 448.0).clamp(min=1e-12)
        x8 = (x2.float() / x_scale).to(torch.float8_e4m3fn)
        y = torch._scaled_mm(x8, self.w8.t(), scale_a=x_scale, scale_b=self.w_scale, out_dtype=self.out_dtype)
        y = y[:m]
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*shape[:-1], y.shape[-1])


def to_fp8(model: torch.nn.Module) -> int:
    """Swap every decoder linear (not the lm_head) for FP8Linear; returns how many were swapped."""
    n = 0
    for layer in model.model.layers:
        for parent in (layer.self_attn, layer.mlp):
            for name, child in list(parent.named_children()):
                if isinstance(child, torch.nn.Linear):
                    setattr(parent, name, FP8Linear(child))
                    n += 1
    return n


def fp8_available(device: str) -> bool:
    if device != "cuda" or not hasattr(torch, "_scaled_mm"):
        return False
    return torch.cuda.get_device_capability() >= (8, 9)      # Ada / Hopper FP8 tensor cores


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


@torch.inference_mode()
def time_model(model, cfg: Qwen2Config, device: str, batches: tuple[int, ...], prompt: int, steps: int,
               deadline: float) -> list[dict]:
    """Prefill of `prompt` tokens per sequence, then `steps` decode steps, per batch size."""
    out = []
    for b in batches:
        if time.monotonic() > deadline:
            out.append({"batch": b, "skipped": "time budget spent"})
            continue
        ids = torch.randint(0, cfg.vocab_size, (b, prompt), device=device)
        cache = DynamicCache()
        # logits of the last position only: a 64 x 512 prefill would otherwise make 10 GB of logits
        model(ids[:, :8], past_key_values=DynamicCache(), use_cache=True, logits_to_keep=1)     # warm-up
        sync(device)
        t0 = time.perf_counter()
        logits = model(ids, past_key_values=cache, use_cache=True, logits_to_keep=1).logits
        sync(device)
        prefill_s = time.perf_counter() - t0
        nxt = logits[:, -1:].argmax(-1)
        step_s = []
        for _ in range(steps):
            sync(device)
            t0 = time.perf_counter()
            nxt = model(nxt, past_key_values=cache, use_cache=True, logits_to_keep=1).logits[:, -1:].argmax(-1)
            sync(device)
            step_s.append(time.perf_counter() - t0)
        out.append({"batch": b, "prefill_tokens": prompt, "prefill_s": prefill_s,
                    "decode_step_s_median": statistics.median(step_s[1:] or step_s), "decode_step_s": step_s,
                    "decode_ctx_first": prompt, "decode_ctx_last": prompt + steps})
        del cache, ids, logits
        if device == "cuda":
            torch.cuda.empty_cache()
    return out


def step_cost(card: dict, n_params: int, wbytes: float, b: int, ctx: int) -> tuple[float, float]:
    """(bytes, FLOPs) of one decode step at batch b and context ctx: weights once, every sequence's KV."""
    kv = 2 * card["n_layers"] * card["n_kv_heads"] * (card["hidden"] // card["n_heads"]) * 2 * ctx * b
    flops = 2.0 * n_params * b + 4.0 * card["n_layers"] * card["hidden"] * ctx * b
    return n_params * wbytes + kv, flops


def run(args: argparse.Namespace) -> dict:
    device = "cpu" if args.dry_run else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu_anchors: no CUDA device; use --dry-run to check the code on a CPU")
    cards = tomllib.loads(CARDS.read_text())["models"]
    models = {"tiny": TINY} if args.dry_run else {m: cards[m] for m in MODELS}
    batches = (1, 2) if args.dry_run else BATCHES
    prompt, steps = (16, 3) if args.dry_run else (PREFILL_TOKENS, DECODE_STEPS)
    dtype = torch.float32 if args.dry_run else torch.bfloat16
    deadline = time.monotonic() + args.budget_s
    gpu = torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "cpu"
    records = []
    for name, card in models.items():
        cfg = qwen_config(card)
        paths = ["bf16"] + (["fp8"] if fp8_available(device) or args.dry_run else [])
        for path in paths:
            if time.monotonic() > deadline:
                break
            t0 = time.monotonic()
            model = random_model(cfg, device, dtype)
            n_params = sum(p.numel() for p in model.parameters())
            swapped = 0
            if path == "fp8":        # the dry run takes this path too: torch has _scaled_mm on CPUs
                swapped = to_fp8(model)
            built_s = time.monotonic() - t0
            for r in time_model(model, cfg, device, batches, prompt, steps, deadline):
                if "skipped" not in r:
                    wb = 1.0 if path == "fp8" else (4.0 if args.dry_run else 2.0)
                    bytes_, flops = step_cost(card, n_params, wb, r["batch"], prompt + steps // 2)
                    r |= {"step_bytes": bytes_, "step_flops": flops,
                          "achieved_gbs": bytes_ / r["decode_step_s_median"] / 1e9,
                          "achieved_tflops": flops / r["decode_step_s_median"] / 1e12}
                records.append({"model": name, "matmuls": path, "fp8_linears": swapped, "params": n_params,
                                "build_s": round(built_s, 2), **r})
                print(json.dumps({k: v for k, v in records[-1].items() if k != "decode_step_s"}), flush=True)
            del model
            if device == "cuda":
                torch.cuda.empty_cache()
    return {"engine": "torch-eager", "hardware": args.hardware, "device": gpu, "dry_run": args.dry_run,
            "torch": torch.__version__, "transformers": transformers.__version__,
            "cuda": torch.version.cuda, "weights": "random (shapes from spec/models.toml)",
            "timing": "wall clock around each forward, CUDA synchronized; decode medians skip the first step",
            "records": records}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="gpu_anchors.json")
    ap.add_argument("--hardware", default="H200", help="hardware card name the records are for")
    ap.add_argument("--dry-run", action="store_true", help="CPU, tiny model, seconds: checks the code path")
    ap.add_argument("--budget-s", type=float, default=420.0, help="stop starting new runs after this many seconds")
    args = ap.parse_args()
    t0 = time.monotonic()
    result = run(args)
    result["wall_s"] = round(time.monotonic() - t0, 1)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"gpu_anchors: {len(result['records'])} records in {result['wall_s']} s -> {args.out}")


if __name__ == "__main__":
    main()
