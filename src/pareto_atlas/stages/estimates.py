"""The build's time estimates, in one place."""

from __future__ import annotations

# Estimates, not figures: only the ETA a first build prints before any stage has run reads them (later
# builds use the times the last one recorded in <out>/build_times.json), and no result rests on them.
# Seconds a stage takes per unit of its work (an anchor, a quality item at 4 slots, a KL configuration,
# an eviction pass; else the whole stage) on a 2-core machine, rounded up from the project's own builds.
FIRST_GUESS_S = {
    "measure": 30.0,
    "quality": 5.5,
    "kld": 25.0,
    "evict": 40.0,
    "calibrate": 30.0,
    "simulate": 20.0,
    "atlas": 2.0,
    "report": 15.0,
}
# building llama-perplexity the first time (the quality stage's ETA, and the message when the build starts)
TOOLS_BUILD_S = 420.0
