# The two commands of the README, and the slower targets.
.PHONY: atlas test test-slow bench ladder quantizer

atlas:
	scripts/setup.sh && .venv/bin/pareto-atlas build

test:
	scripts/setup.sh test && .venv/bin/python -m pytest -q

test-slow:
	scripts/setup.sh slow && scripts/build_llama_quantize.sh && .venv/bin/python -m pytest -q -m slow

# llama.cpp's own quantizer, for the K-quants below 4 bits (built once into the model cache)
quantizer:
	scripts/build_llama_quantize.sh

# the weight ladder below the source precision (Q4_K_M, Q4_0, Q3_K, Q2_K), speed and GSM8K
ladder:
	scripts/setup.sh && scripts/build_llama_quantize.sh && .venv/bin/pareto-atlas build --study ladder

bench:
	scripts/setup.sh test && for b in benchmarks/bench_*.py; do .venv/bin/python $$b; done
