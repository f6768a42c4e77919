"""Convert a GGUF file into a Hugging Face directory (run as a script in vLLM's venv).

Imports nothing from pareto_atlas: it runs under `.venv-vllm/bin/python -I` (transformers, gguf,
accelerate and torch of vLLM's pins), started by `measure.hf_model`. Usage:

    python -I gguf_to_hf.py SOURCE.gguf OUT_DIR DTYPE SOURCE_SHA256

Writes OUT_DIR/conversion.json last, so a directory without it is an interrupted conversion.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path


def convert(gguf: Path, out: Path, dtype: str, sha256: str) -> dict:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.monotonic()
    torch_dtype = getattr(torch, dtype)
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch_dtype)
    # The weights are dequantized into torch tensors; transformers still marks the model as
    # GGUF-quantized and refuses to save it ("quantized with GGUF ... not serializable") unless told
    # it no longer is.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    record = {
        "source_file": gguf.name,
        "source_sha256": sha256,
        "dtype": dtype,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "seconds": round(time.monotonic() - t0, 1),
        "converted_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "params": int(sum(p.numel() for p in model.parameters())),
    }
    (out / "conversion.json").write_text(json.dumps(record, indent=1, sort_keys=True))
    return record


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit("usage: gguf_to_hf.py SOURCE.gguf OUT_DIR DTYPE SOURCE_SHA256")
    print(json.dumps(convert(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4])))
