"""A ready campaign for an isolated GPU host (no registry, no hub, a small upload): it checks what the
host's Python has and writes anchors for the host's hardware card that the project loads and calibrates.

- With vLLM (and the project's src/ with its dependencies importable): real anchors, measured by the
  project's own campaign code (exact token-count contract, streaming load generator) against vLLM
  serving a random-weight checkpoint built on the host from a model card (spec/models.toml) with a
  word-level tokenizer made on the spot: the speed of the model's shapes, nothing of its quality.
- Without it, torch alone (engine label `torch-eager`, not vLLM): the card's architecture with random
  weights in transformers, a prefill of a batch and decode steps on its growing KV cache, in bf16 and
  in FP8 matmuls (torch._scaled_mm) where the card has FP8 units, plus the GEMMs of its linear layers
  at each batch, each held against the card's bandwidth and FLOP/s. Each batch is written as a static-
  batching anchor: TTFT = the batch's prefill, TPOT = the median decode step.

    python scripts/gpu_anchors.py --hardware H200 --out gpu_anchors.json   # on the GPU host, < 8 minutes
    python scripts/gpu_anchors.py --hardware H100-SXM --tp 4 --out tp4.json # vLLM at TP4: the anchors record it
    python scripts/gpu_anchors.py --dry-run --out /tmp/dry.json            # this CPU, tiny model, seconds
    python scripts/gpu_anchors.py load gpu_anchors.json --study my.toml    # here: into the study's store,
    pareto-atlas calibrate --study my.toml                                 # then one fit for (H200, engine)

It never downloads anything. The study that loads the anchors names the same model card (`--model`).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import platform
import statistics
import sys
import time
import tomllib
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "src" / "pareto_atlas" / "spec"
FORMAT = "pareto-atlas-anchors/1"
BATCHES = (1, 8, 32, 64)
PREFILL_TOKENS = 512
DECODE_STEPS = 16  # timed decode steps per batch, the KV cache growing by one token each
TINY = {
    "n_layers": 2,
    "hidden": 64,
    "n_heads": 4,
    "n_kv_heads": 2,
    "head_dim": 16,
    "intermediate": 128,
    "vocab": 512,
    "tied_embeddings": True,
}
PROJECT_DEPS = ("pydantic", "httpx", "numpy", "scipy", "pandas", "duckdb", "rich")


def has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def probe_host() -> dict:
    """What this host's Python has (versions), and its GPUs as torch sees them."""
    out = {"python": platform.python_version(), "platform": platform.platform()}
    for m in ("torch", "transformers", "vllm", "tokenizers"):
        if has(m):
            try:
                out[m] = getattr(__import__(m), "__version__", "?")
            except Exception as e:  # noqa: BLE001 - a broken install is a fact to report, not a crash
                out[m] = f"broken: {type(e).__name__}: {str(e)[:120]}"
        else:
            out[m] = None
    if out["torch"] and not str(out["torch"]).startswith("broken"):
        import torch

        out["cuda"] = torch.version.cuda
        out["gpus"] = (
            [
                {
                    "name": torch.cuda.get_device_name(i),
                    "memory_gib": round(torch.cuda.get_device_properties(i).total_memory / 2**30, 1),
                }
                for i in range(torch.cuda.device_count())
            ]
            if torch.cuda.is_available()
            else []
        )
    sys.path.insert(0, str(ROOT / "src"))
    out["project_deps_missing"] = [m for m in PROJECT_DEPS if not has(m)]
    return out


def load_card(name: str) -> dict:
    return TINY if name == "tiny" else tomllib.loads((SPEC / "models.toml").read_text())["models"][name]


def card_peaks(hardware: str) -> dict:
    cards = tomllib.loads((SPEC / "hardware.toml").read_text())["hardware"]
    return cards.get(hardware, {})


def hf_config(card: dict, name: str):
    """A transformers config of the card's shapes (Qwen2 for qwen cards, Llama otherwise)."""
    from transformers import LlamaConfig, Qwen2Config

    cls = Qwen2Config if name.startswith("qwen") or name == "tiny" else LlamaConfig
    return cls(
        vocab_size=card["vocab"],
        hidden_size=card["hidden"],
        intermediate_size=card["intermediate"],
        num_hidden_layers=card["n_layers"],
        num_attention_heads=card["n_heads"],
        head_dim=card["head_dim"],
        num_key_value_heads=card["n_kv_heads"],
        tie_word_embeddings=card["tied_embeddings"],
        max_position_embeddings=4096,
        use_cache=True,
        bos_token_id=1,
        eos_token_id=2,
    )


def random_model(cfg, device: str, dtype):
    """Random weights of the right shapes, made on the device (a 7B model in seconds, no files)."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg).to(dtype)
    return model.eval()


# ---------------------------------------------------------------------------------- torch path


def to_fp8(model) -> int:
    """Swap every decoder linear (not the lm_head) for an FP8 one (torch._scaled_mm, per-tensor
    scales); returns how many were swapped."""
    import torch

    class FP8Linear(torch.nn.Module):
        def __init__(self, lin: torch.nn.Linear):
            super().__init__()
            w = lin.weight.detach()
            self.w_scale = (w.abs().max().float() / 448.0).clamp(min=1e-12)
            # _scaled_mm wants its second operand column-major: keep W (out x in) and pass W.t()
            self.w8 = (w.float() / self.w_scale).to(torch.float8_e4m3fn)
            self.bias, self.out_dtype = lin.bias, w.dtype

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            shape = x.shape
            x2 = x.reshape(-1, shape[-1])
            m = x2.shape[0]
            pad = (-m) % 16  # FP8 GEMMs want every dimension a multiple of 16
            if pad:
                x2 = torch.nn.functional.pad(x2, (0, 0, 0, pad))
            x_scale = (x2.abs().max().float() / 448.0).clamp(min=1e-12)
            x8 = (x2.float() / x_scale).to(torch.float8_e4m3fn)
            y = torch._scaled_mm(x8, self.w8.t(), scale_a=x_scale, scale_b=self.w_scale, out_dtype=self.out_dtype)[:m]
            y = y + self.bias if self.bias is not None else y
            return y.reshape(*shape[:-1], y.shape[-1])

    n = 0
    for layer in model.model.layers:
        for parent in (layer.self_attn, layer.mlp):
            for name, child in list(parent.named_children()):
                if isinstance(child, torch.nn.Linear):
                    setattr(parent, name, FP8Linear(child))
                    n += 1
    return n


def fp8_available(device: str) -> bool:
    import torch

    if device != "cuda" or not hasattr(torch, "_scaled_mm"):
        return False
    return torch.cuda.get_device_capability() >= (8, 9)  # Ada / Hopper FP8 tensor cores


def sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def time_model(
    model, vocab: int, device: str, batches: tuple[int, ...], prompt: int, steps: int, deadline: float
) -> list[dict]:
    """Prefill of `prompt` tokens per sequence, then `steps` decode steps, per batch size."""
    import torch
    from transformers.cache_utils import DynamicCache

    out = []
    with torch.inference_mode():
        for b in batches:
            if time.monotonic() > deadline:
                out.append({"batch": b, "skipped": "time budget spent"})
                continue
            ids = torch.randint(0, vocab, (b, prompt), device=device)
            cache = DynamicCache()
            # logits of the last position only: a 64 x 512 prefill would otherwise make 10 GB of logits
            model(ids[:, :8], past_key_values=DynamicCache(), use_cache=True, logits_to_keep=1)  # warm-up
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
            out.append(
                {
                    "batch": b,
                    "prefill_tokens": prompt,
                    "prefill_s": prefill_s,
                    "decode_step_s_median": statistics.median(step_s[1:] or step_s),
                    "decode_step_s": step_s,
                    "decode_ctx_first": prompt,
                    "decode_ctx_last": prompt + steps,
                }
            )
            del cache, ids, logits
            if device == "cuda":
                torch.cuda.empty_cache()
    return out


def time_gemms(card: dict, device: str, dtype, batches: tuple[int, ...], peaks: dict) -> list[dict]:
    """Each linear layer's GEMM (M = batch tokens) at the card's shapes: seconds and FLOP/s achieved."""
    import torch

    h, kv = card["hidden"], card["n_kv_heads"] * card["head_dim"]
    shapes = {
        "qkv": (h, card["n_heads"] * card["head_dim"] + 2 * kv),
        "o": (card["n_heads"] * card["head_dim"], h),
        "gate_up": (h, 2 * card["intermediate"]),
        "down": (card["intermediate"], h),
        "lm_head": (h, card["vocab"]),
    }
    out = []
    with torch.inference_mode():
        for name, (k, n) in shapes.items():
            w = torch.randn(n, k, device=device, dtype=dtype)
            for m in batches:
                x = torch.randn(m, k, device=device, dtype=dtype)
                x @ w.t()
                sync(device)
                reps, t0 = 5, time.perf_counter()
                for _ in range(reps):
                    x @ w.t()
                sync(device)
                s = (time.perf_counter() - t0) / reps
                flops = 2.0 * m * k * n
                peak = (peaks.get("tflops") or {}).get("fp16")
                out.append(
                    {
                        "gemm": name,
                        "m": m,
                        "k": k,
                        "n": n,
                        "s": s,
                        "achieved_tflops": flops / s / 1e12,
                        "of_peak": flops / s / 1e12 / peak if peak else None,
                    }
                )
            del w
    return out


def step_cost(card: dict, n_params: int, wbytes: float, b: int, ctx: int) -> tuple[float, float]:
    """(bytes, FLOPs) of one decode step at batch b and context ctx: weights once, every sequence's KV."""
    kv = 2 * card["n_layers"] * card["n_kv_heads"] * card["head_dim"] * 2 * ctx * b
    flops = 2.0 * n_params * b + 4.0 * card["n_layers"] * card["hidden"] * ctx * b
    return n_params * wbytes + kv, flops


def now() -> str:
    return datetime.now(timezone.utc).replace(tzinfo=None).isoformat(sep=" ")


def dist(values_ms: list[float]) -> dict:
    import numpy as np

    v = np.asarray(values_ms, dtype=float)
    p50, p90, p99 = np.percentile(v, [50, 90, 99], method="linear")
    return {
        "n": int(v.size),
        "mean": float(v.mean()),
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "p99_lo": float("nan"),
        "p99_hi": float("nan"),
    }


def torch_anchor(r: dict, model: str, card_name: str, hardware: str, matmuls: str, host: dict, steps: int) -> dict:
    """One timed batch as a static-batching anchor in the store's shape (no per-request records: every
    sequence of the batch shares the one prefill and the same decode steps)."""
    b, prompt = r["batch"], r["prefill_tokens"]
    knobs = {
        "weights": "FP8" if matmuls == "fp8" else "BF16",
        "kv": "f16",
        "kv_keep": 1.0,
        "eviction": "none",
        "spec": "none",
        "spec_k": 0,
        "spec_accept": 0.0,
        "batching": "static",
        "slots": b,
        "chunk_tokens": 0,
        "sparse_budget": 1.0,
    }
    workload = {
        "name": f"p{prompt}-n{steps + 1}",
        "prompt_tokens": prompt,
        "output_tokens": steps + 1,
        "api": "completions",
        "trace": None,
    }
    load = {
        "requests": b,
        "warmup": 0,
        "timeout_s": 120.0,
        "repeats": 1,
        "think_ms": 0,
        "concurrency": b,
        "rate_rps": None,
    }
    e2e_s = r["prefill_s"] + sum(r["decode_step_s"])
    metrics = {
        "n_measured": b,
        "n_ok": b,
        "n_rejected": 0,
        "n_errors": 0,
        "ttft": dist([r["prefill_s"] * 1e3]),
        "tpot": dist([s * 1e3 for s in r["decode_step_s"][1:] or r["decode_step_s"]]),
        "e2e": dist([e2e_s * 1e3]),
        "itl": dist([s * 1e3 for s in r["decode_step_s"]]),
        "throughput_tok_s": b * (steps + 1) / e2e_s,
        "duration_s": e2e_s,
        "error_share": 0.0,
        "errored": False,
        "basis": "torch eager step timings: TTFT = the batch's prefill, TPOT = its decode steps (the first "
        "left out of the median's tail), one static batch of b sequences",
    }
    ident = [hardware, "torch-eager", card_name, knobs, workload, load, host.get("gpus")]
    aid = hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:20]
    return {
        "row": {
            "anchor_id": aid,
            "study": "",
            "arm": f"torch-{matmuls}-b{b}",
            "repeat": 0,
            "campaign_id": None,
            "status": "ok",
            "reason": None,
            "knobs_json": json.dumps(knobs, sort_keys=True),
            "workload_json": json.dumps(workload, sort_keys=True),
            "load_json": json.dumps(load, sort_keys=True),
            "model": model,
            "model_file": f"random weights ({card_name} card)",
            "model_sha256": None,
            "engine": "torch-eager",
            "engine_version": f"torch {host.get('torch')}",
            "hardware": hardware,
            "hardware_json": json.dumps({"card": hardware, **host}, sort_keys=True, default=str),
            "provenance_json": json.dumps(
                {"script": "scripts/gpu_anchors.py", "weights_bpw": 8.0 if matmuls == "fp8" else 16.0}
            ),
            "metrics_json": json.dumps(metrics, sort_keys=True),
            "started_at": now(),
            "finished_at": now(),
        },
        "records": [],
    }


def run_torch(args: argparse.Namespace, host: dict) -> dict:
    import torch

    device = "cpu" if args.dry_run else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu_anchors: no CUDA device; use --dry-run to check the code on a CPU")
    card_name = "tiny" if args.dry_run else args.model
    card = load_card(card_name)
    batches = (1, 2) if args.dry_run else BATCHES
    prompt, steps = (16, 3) if args.dry_run else (PREFILL_TOKENS, DECODE_STEPS)
    dtype = torch.float32 if args.dry_run else torch.bfloat16
    deadline = time.monotonic() + args.budget_s
    peaks = card_peaks(args.hardware)
    cfg = hf_config(card, card_name)
    records, anchors = [], []
    for path in ["bf16"] + (["fp8"] if fp8_available(device) or args.dry_run else []):
        if time.monotonic() > deadline:
            break
        t0 = time.monotonic()
        model = random_model(cfg, device, dtype)
        n_params = sum(p.numel() for p in model.parameters())
        swapped = to_fp8(model) if path == "fp8" else 0  # the dry run takes this path too: CPUs have _scaled_mm
        built_s = time.monotonic() - t0
        for r in time_model(model, cfg.vocab_size, device, batches, prompt, steps, deadline):
            if "skipped" not in r:
                wb = 1.0 if path == "fp8" else (4.0 if args.dry_run else 2.0)
                bytes_, flops = step_cost(card, n_params, wb, r["batch"], prompt + steps // 2)
                r |= {
                    "step_bytes": bytes_,
                    "step_flops": flops,
                    "achieved_gbs": bytes_ / r["decode_step_s_median"] / 1e9,
                    "achieved_tflops": flops / r["decode_step_s_median"] / 1e12,
                    "of_bandwidth": bytes_ / r["decode_step_s_median"] / 1e9 / peaks["mem_bw_gbs"]
                    if peaks.get("mem_bw_gbs")
                    else None,
                }
                anchors.append(
                    torch_anchor(r, args.model_label or card_name, card_name, args.hardware, path, host, steps)
                )
            records.append(
                {
                    "model": card_name,
                    "matmuls": path,
                    "fp8_linears": swapped,
                    "params": n_params,
                    "build_s": round(built_s, 2),
                    **r,
                }
            )
            print(json.dumps({k: v for k, v in records[-1].items() if k != "decode_step_s"}), flush=True)
        del model
    gemms = time_gemms(card, device, dtype, batches, peaks) if time.monotonic() < deadline else []
    return {
        "engine": "torch-eager",
        "card": card_name,
        "card_fields": card,
        "records": records,
        "gemms": gemms,
        "anchors": anchors,
        "torch": torch.__version__,
        "timing": "wall clock around each forward, CUDA synchronized; decode medians skip the first step",
    }


# ---------------------------------------------------------------------------------- vLLM path


def build_checkpoint(card: dict, card_name: str, out: Path) -> tuple[Path, Path]:
    """A random-weight checkpoint of the card's shapes (bf16 safetensors) and, in a folder of its own,
    a word-level tokenizer over the vocabulary, made here: vLLM serves them like any model (`--tokenizer`),
    and its /tokenize counts our prompts. Apart, because beside a Llama or Qwen2 config transformers
    takes that model's own tokenizer class, which reads a word-level vocabulary as no tokens at all."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    weights, tokenizer = out / "model", out / "tokenizer"
    if (weights / "config.json").is_file() and (tokenizer / "tokenizer.json").is_file():
        return weights, tokenizer
    cfg = hf_config(card, card_name)
    model = random_model(cfg, "cuda" if torch.cuda.is_available() else "cpu", torch.bfloat16)
    model.save_pretrained(weights, safe_serialization=True)
    del model
    sys.path.insert(0, str(ROOT / "src"))
    from pareto_atlas.measure.contract import _WORDS  # the prompt builder's words: each one token

    words = list(dict.fromkeys(["<unk>", "<s>", "</s>", *_WORDS]))
    words += [f"w{i}" for i in range(card["vocab"] - len(words))]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>").save_pretrained(
        tokenizer
    )
    conf = tokenizer / "tokenizer_config.json"  # a class every transformers version knows
    conf.write_text(json.dumps({**json.loads(conf.read_text()), "tokenizer_class": "PreTrainedTokenizerFast"}))
    return weights, tokenizer


def parallel_knobs(args: argparse.Namespace) -> dict[str, int]:
    """The parallelism the campaign's arms state (only what differs from one GPU): knobs tp, pp, replicas."""
    return {k: v for k, v in (("tp", args.tp), ("pp", args.pp), ("replicas", args.replicas)) if v > 1}


def check_args(args: argparse.Namespace) -> None:
    """Refuse, in one line and before the host is probed, what no host could run: an unknown card, a
    parallel degree that is not one (tp a power of two), a tp that does not split the model's heads."""
    models = tomllib.loads((SPEC / "models.toml").read_text())["models"]
    cards = tomllib.loads((SPEC / "hardware.toml").read_text())["hardware"]
    if args.model not in models:
        sys.exit(f"gpu_anchors: --model {args.model!r}: not a card of spec/models.toml; allowed: {', '.join(models)}")
    if args.hardware not in cards and args.hardware != "this-cpu":
        sys.exit(
            f"gpu_anchors: --hardware {args.hardware!r}: not a card of spec/hardware.toml; allowed: {', '.join(cards)}"
        )
    for name in ("tp", "pp", "replicas"):
        v = getattr(args, name)
        if v < 1 or (name == "tp" and v & (v - 1)):
            sys.exit(
                f"gpu_anchors: --{name} {v}: allowed: an integer >= 1" + (", a power of two" if name == "tp" else "")
            )
    if args.tp * args.pp * args.replicas == 1:
        return
    # spec.layout's rule (stdlib only: this runs where the project's dependencies may be missing)
    sys.path.insert(0, str(ROOT / "src"))
    from pareto_atlas.spec.cards import inline_model_card, shipped_hardware, shipped_models
    from pareto_atlas.spec.knobs import Knobs
    from pareto_atlas.spec.layout import check_layout, check_model_layout

    model = inline_model_card(TINY, "tiny") if args.dry_run else shipped_models()[args.model]
    knobs = Knobs(tp=args.tp, pp=args.pp, replicas=args.replicas)
    hw = shipped_hardware().get(args.hardware)
    why = check_layout(model, hw, knobs) if hw is not None and hw.kind == "gpu" else check_model_layout(model, knobs)
    if why:
        sys.exit(f"gpu_anchors: --{why.removeprefix('knobs.').replace(' x ', '/--')}")


def check_parallel(args: argparse.Namespace, host: dict, use_vllm: bool) -> None:
    """Refuse, in one line, a parallelism this host or path cannot run."""
    for name in ("tp", "pp", "replicas"):
        v = getattr(args, name)
        if v < 1 or (name == "tp" and v & (v - 1)):
            sys.exit(
                f"gpu_anchors: --{name} {v}: allowed: an integer >= 1" + (", a power of two" if name == "tp" else "")
            )
    n = args.tp * args.pp * args.replicas
    if n == 1:
        return
    if not use_vllm:
        sys.exit(
            f"gpu_anchors: --tp/--pp/--replicas ({n} devices) need the vLLM path (--path vllm); the torch path "
            f"times one device"
        )
    gpus = len(host.get("gpus") or [])
    if gpus and n > gpus:
        sys.exit(
            f"gpu_anchors: tp {args.tp} x pp {args.pp} x replicas {args.replicas} = {n} GPUs; this host has {gpus}"
        )


def vllm_study_toml(args: argparse.Namespace, card_name: str, ckpt: Path, tokenizer: Path, gpu: bool) -> str:
    """The campaign as a study: vLLM on the random checkpoint, measured on this host's card. On a GPU
    bf16 at one and eight clients and FP8 (vLLM quantizes the bf16 weights at load); on vLLM's CPU
    build (a dry run) float32 in eager mode, as it runs there."""
    card = load_card(card_name)
    card_toml = (
        f'card = "{card_name}"'
        if card_name != "tiny"
        else "[model.card]\n"
        + "\n".join(f"{k} = {str(v).lower() if isinstance(v, bool) else v}" for k, v in card.items())
    )
    w = "BF16" if gpu else "F32"
    opts = f'python = "{sys.executable}", tokenizer = "{tokenizer}"' + ("" if gpu else ", enforce_eager = true")
    # the parallelism the arms state: vLLM is launched with it (measure.engines.vllm.parallel_argv) and
    # every anchor's knobs record it, so a TP4 anchor calibrates TP4
    par = "".join(f"{k} = {v}\n" for k, v in parallel_knobs(args).items())
    tag = "".join(f"-{k}{v}" for k, v in parallel_knobs(args).items())
    arms = (
        f'[[arms]]\nname = "{w.lower()}{tag}-c1"\nweights = "{w}"\n{par}'
        f'[[arms]]\nname = "{w.lower()}{tag}-c8"\nweights = "{w}"\nslots = 8\nconcurrency = 8\nrequests = 32\n{par}'
        + (f'[[arms]]\nname = "fp8{tag}-c1"\nweights = "FP8"\n{par}' if gpu else "")
    )
    P, N, n = (PREFILL_TOKENS, 64, 16) if gpu else (32, 8, 4)
    return (
        f'name = "gpu-anchors"\n[engine]\nname = "vllm"\nhardware = "{args.hardware}"\nn_ctx = 2048\n'
        f'options = {{{opts}}}\n[workload]\nprompt_tokens = {P}\noutput_tokens = {N}\n[load]\nrequests = {n}\n'
        f'{arms}[model]\nname = "{args.model_label or card_name}"\nhf_dir = "{ckpt}"\n{card_toml}\n'
    )


def run_vllm(args: argparse.Namespace, host: dict) -> dict:
    """Real anchors: the project's campaign code measuring vLLM on the random checkpoint."""
    sys.path.insert(0, str(ROOT / "src"))
    from pareto_atlas.measure.campaign import AnchorPlan, anchor_id, measure_anchor
    from pareto_atlas.measure.resolve import parse_study

    card_name = "tiny" if args.dry_run else args.model
    ckpt, tokenizer = build_checkpoint(load_card(card_name), card_name, Path(args.workdir) / f"random-{card_name}")
    study = parse_study(vllm_study_toml(args, card_name, ckpt, tokenizer, bool(host.get("gpus"))), "gpu-anchors")
    anchors = []
    for arm in study.arms:
        p = AnchorPlan(anchor_id(study, arm, 0), arm, 0)
        row, records = measure_anchor(study, p, lambda ev, info: None)
        row = {k: (v.isoformat(sep=" ") if hasattr(v, "isoformat") else v) for k, v in row.items()}
        print(json.dumps({"arm": arm.name, "status": row["status"], "reason": row["reason"]}), flush=True)
        anchors.append({"row": row, "records": records})
    return {
        "engine": "vllm",
        "card": card_name,
        "card_fields": load_card(card_name),
        "anchors": anchors,
        "checkpoint": str(ckpt),
    }


# ---------------------------------------------------------------------------------- back here


def load(path: Path, study_ref: str, out: Path | None) -> None:
    """Put a file's anchors into the study's store, after checking the study names the same model card."""
    sys.path.insert(0, str(ROOT / "src"))
    from rich.console import Console

    from pareto_atlas import stages
    from pareto_atlas.calibrate.stage import model_card

    data = json.loads(path.read_text())
    if data.get("format") != FORMAT:
        sys.exit(f"gpu_anchors load: {path} is not a {FORMAT} file (format {data.get('format')!r})")
    with stages.Context.open(study_ref, out, Console(stderr=True)) as ctx:
        card, want = model_card(ctx.study), data["card_fields"]
        have = {k: getattr(card, k) for k in want}
        if have != want:
            diff = sorted(k for k in want if have[k] != want[k])
            sys.exit(
                f"gpu_anchors load: the study's model card differs from the anchors' ({data['card']}) in "
                f"{', '.join(diff)}; name card = {data['card']!r} in [model]"
            )
        for a in data["anchors"]:
            ctx.store.put_anchor({**a["row"], "study": ctx.study.name}, a["records"])
        print(
            f"gpu_anchors: {len(data['anchors'])} anchors on {data['hardware']} ({data['engine']}) in "
            f"{ctx.store.path if hasattr(ctx.store, 'path') else 'the store'}; next: pareto-atlas calibrate "
            f"--study {study_ref}"
        )


def main() -> None:
    if sys.argv[1:2] == ["load"]:
        ap = argparse.ArgumentParser(prog="gpu_anchors.py load", description=load.__doc__)
        ap.add_argument("file", type=Path)
        ap.add_argument("--study", required=True)
        ap.add_argument("--out", type=Path, default=None)
        a = ap.parse_args(sys.argv[2:])
        return load(a.file, a.study, a.out)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="gpu_anchors.json")
    ap.add_argument("--hardware", default="H200", help="hardware card of this host (spec/hardware.toml)")
    ap.add_argument("--model", default="llama-3.1-8b", help="model card whose shapes are measured (spec/models.toml)")
    ap.add_argument("--model-label", default=None, help="the model name the anchors carry (default: the card's)")
    ap.add_argument(
        "--path",
        choices=("auto", "vllm", "torch"),
        default="auto",
        help="auto: vLLM where it and the project's dependencies import, else torch",
    )
    ap.add_argument("--workdir", default=".", help="where the random checkpoint is built (vLLM path)")
    ap.add_argument(
        "--tp", type=int, default=1, help="tensor-parallel degree the arms state (vLLM --tensor-parallel-size)"
    )
    ap.add_argument("--pp", type=int, default=1, help="pipeline stages the arms state (vLLM --pipeline-parallel-size)")
    ap.add_argument(
        "--replicas", type=int, default=1, help="data-parallel copies the arms state (vLLM --data-parallel-size)"
    )
    ap.add_argument("--dry-run", action="store_true", help="CPU, tiny model, seconds: checks the code path")
    ap.add_argument("--budget-s", type=float, default=420.0, help="stop starting new runs after this many seconds")
    args = ap.parse_args()
    if args.dry_run:
        args.hardware = "this-cpu"  # a CPU's timings are never written under a GPU's name
    check_args(args)
    t0 = time.monotonic()
    host = probe_host()
    print(json.dumps({"host": host}), flush=True)
    if not host["torch"]:
        sys.exit("gpu_anchors: this Python has no torch; both paths need it")
    vllm_ok = bool(host["vllm"]) and not host["project_deps_missing"]
    if args.path == "vllm" and not vllm_ok:
        sys.exit(
            f"gpu_anchors: the vLLM path needs vllm ({host['vllm'] or 'missing'}) and the project's "
            f"dependencies (missing: {', '.join(host['project_deps_missing']) or 'none'})"
        )
    # a dry run takes the torch path unless told otherwise (--path vllm: vLLM's CPU build, minutes)
    use_vllm = args.path == "vllm" or (args.path == "auto" and vllm_ok and not args.dry_run)
    check_parallel(args, host, use_vllm)
    result = run_vllm(args, host) if use_vllm else run_torch(args, host)
    result |= {
        "format": FORMAT,
        "hardware": args.hardware,
        "host": host,
        "dry_run": args.dry_run,
        "parallelism": parallel_knobs(args),
        "wall_s": round(time.monotonic() - t0, 1),
    }
    Path(args.out).write_text(json.dumps(result, indent=1, default=str))
    print(
        f"gpu_anchors: {len(result['anchors'])} anchors ({result['engine']}) for {args.hardware} in "
        f"{result['wall_s']} s -> {args.out}"
    )


if __name__ == "__main__":
    main()
