"""Worker process: serve one arm with the xllamacpp wheel until killed.

    python -m pareto_atlas.measure.engines.llamacpp_worker '<json params from llamacpp.worker_params>'

Prints exactly one JSON line on stdout: {"address", "version", "build_info"} once serving, or
{"error"} when the server could not be built; llama.cpp's own log goes to stderr.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def build_params(params: dict):
    import xllamacpp as x

    p = x.CommonParams()
    p.model.path = params["model_path"]
    p.n_ctx = int(params["n_ctx"])
    p.n_parallel = int(params["slots"])
    p.cpuparams.n_threads = int(params["threads"])
    p.cpuparams_batch.n_threads = int(params["threads"])
    p.cont_batching = bool(params["cont_batching"])
    if params.get("n_batch"):
        p.n_batch = p.n_ubatch = int(params["n_batch"])
    # no request may be served from another's prefix: prompt cache, slot reuse and the
    # host-RAM prompt cache all off
    p.cache_prompt = False
    p.n_cache_reuse = 0
    p.cache_ram_mib = 0
    p.cache_idle_slots = False
    if params["flash_attn"]:
        p.flash_attn_type = x.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_ENABLED
        kv = getattr(x.ggml_type, f"GGML_TYPE_{params['kv'].upper()}")
        p.cache_type_k = kv
        p.cache_type_v = kv
    spec = params.get("spec", "none")
    if spec == "ngram":
        p.speculative.types = [x.common_speculative_type.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE]
        p.speculative.ngram_simple.size_m = int(params["spec_k"])
        p.speculative.draft.n_max = int(params["spec_k"])
        if params.get("ngram_size_n"):
            p.speculative.ngram_simple.size_n = int(params["ngram_size_n"])
        if params.get("ngram_min_hits"):
            p.speculative.ngram_simple.min_hits = int(params["ngram_min_hits"])
    elif spec == "draft":
        p.speculative.types = [x.common_speculative_type.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE]
        p.speculative.draft.mparams.path = params["draft_model_path"]
        p.speculative.draft.n_max = int(params["spec_k"])
        p.speculative.draft.cpuparams.n_threads = int(params["threads"])
        p.speculative.draft.cpuparams_batch.n_threads = int(params["threads"])
        if params.get("draft_n_min") is not None:
            p.speculative.draft.n_min = int(params["draft_n_min"])
        if params.get("draft_p_min") is not None:
            p.speculative.draft.p_min = float(params["draft_p_min"])
    return p


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        params = json.loads(argv[1])
        import xllamacpp as x

        server = x.Server(build_params(params))
        ready = {
            "address": server.listening_address,
            "version": x.__version__,
            "build_info": dict(getattr(x, "BUILD_INFO", {}) or {}),
        }
    except Exception as e:  # noqa: BLE001 - any failure to build the server is reported, one line
        print(json.dumps({"error": " ".join(f"{type(e).__name__}: {e}".split())}), flush=True)
        return 1
    print(json.dumps(ready), flush=True)
    parent = os.getppid()
    # The worker has its own session (so a kill of the campaign's terminal group spares it);
    # it must not outlive the campaign, so it leaves as soon as its parent is gone (kill -9 too).
    while os.getppid() == parent:  # the server runs on its own threads
        time.sleep(1.0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
