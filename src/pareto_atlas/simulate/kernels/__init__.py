"""All compiled code of the simulator: the coefficient layout, the step cost, the request-level loop,
its random draws, summaries and the sweep's parallel pass.

One package compiled as one unit: _cache gives every function here one stamp, so numba's on-disk
cache of a kernel is invalidated when any file it inlines changes (numba alone keys it to the
function's own file). Everything other modules use is importable from here.
"""

from __future__ import annotations

from pareto_atlas.simulate.kernels import _cache  # noqa: F401  (the locator, before anything compiles)
from pareto_atlas.simulate.kernels.layout import *  # noqa: F401,F403  (coefficient indices, policies)
from pareto_atlas.simulate.kernels.batch import run_batch  # noqa: F401
from pareto_atlas.simulate.kernels.loop import run_kernel  # noqa: F401
from pareto_atlas.simulate.kernels.stats import SUMMARY, summarize  # noqa: F401
from pareto_atlas.simulate.kernels.step import lone_prefill_s, prefill_pairs, step_time  # noqa: F401
