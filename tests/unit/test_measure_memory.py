"""Peak memory of a process tree, and the decode-bandwidth line."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from pareto_atlas.measure.memory import PeakMemorySampler, decode_bandwidth


def test_peak_rss_includes_children_and_survives_their_exit():
    # parent spawns a child that holds ~200 MB for a moment, then everything exits
    code = (
        "import subprocess, sys; subprocess.run([sys.executable, '-c', "
        "\"import time; b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); time.sleep(1.0)\"])"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    with PeakMemorySampler(proc.pid, interval_s=0.02, gpu=False) as mem:
        proc.wait(timeout=30)
        time.sleep(0.1)
    assert mem.peak_rss_bytes > 200 * 2**20
    assert mem.peak_gpu_bytes is None and mem.samples > 5


def test_decode_bandwidth_line():
    bw = decode_bandwidth(weight_bytes=100e6, tpot_s=0.02, limit_gbs=10.0)
    assert bw.achieved_gbs == pytest.approx(5.0) and bw.fraction == pytest.approx(0.5)
    assert bw.line().startswith("decode came to 50% of the machine's memory bandwidth (5.0 of 10.0 GB/s")
    with pytest.raises(ValueError, match="tpot_s"):
        decode_bandwidth(1, 0, 1)


def test_no_pid_measures_nothing_rather_than_this_process():
    with PeakMemorySampler(None) as mem:
        pass
    assert mem.peak_rss_bytes == 0 and mem.peak_gpu_bytes is None
