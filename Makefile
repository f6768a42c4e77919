# The two commands of the README, and the slower targets.
.PHONY: atlas test test-slow bench

atlas:
	scripts/setup.sh && .venv/bin/pareto-atlas build

test:
	scripts/setup.sh test && .venv/bin/python -m pytest -q

test-slow:
	scripts/setup.sh slow && .venv/bin/python -m pytest -q -m slow

bench:
	scripts/setup.sh test && for b in benchmarks/bench_*.py; do .venv/bin/python $$b; done
