"""Peak memory of an engine during a run, and how close decode came to memory bandwidth.

CPU: resident set size of the engine process and all its children, sampled on a background
thread (the peak is the max of the samples, so a spike shorter than the interval can be
missed). GPU: used memory through NVML when a GPU and nvidia-ml-py are present.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import psutil


def _rss_tree(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total


class _NVML:
    """GPU memory used by the given pids (or the whole device when the driver hides pids)."""

    def __init__(self) -> None:
        import pynvml  # lazy: only where a GPU exists (package nvidia-ml-py)

        pynvml.nvmlInit()
        self.nv = pynvml
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]

    def used_bytes(self, pids: set[int]) -> int:
        total = 0
        for h in self.handles:
            procs = self.nv.nvmlDeviceGetComputeRunningProcesses(h)
            mine = [p.usedGpuMemory or 0 for p in procs if p.pid in pids]
            total += sum(mine) if mine else (0 if procs else self.nv.nvmlDeviceGetMemoryInfo(h).used)
        return total

    def close(self) -> None:
        try:
            self.nv.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down a driver we only read from
            pass


def open_nvml() -> _NVML | None:
    try:
        return _NVML()
    except Exception:  # noqa: BLE001 - no package, no driver, no GPU: all mean "no GPU memory"
        return None


class PeakMemorySampler:
    """`with PeakMemorySampler(pid) as mem: ...run...`; then `mem.peak_rss_bytes`, `mem.peak_gpu_bytes`."""

    def __init__(self, pid: int | None, interval_s: float = 0.05, gpu: bool = True):
        """`pid=None` (an attached endpoint we do not own) samples nothing: peaks stay 0/None
        rather than silently measuring this process (psutil's meaning of None)."""
        self.pid, self.interval_s = pid, interval_s
        self.peak_rss_bytes = 0
        self.peak_gpu_bytes: int | None = None
        self.samples = 0
        self._proc = psutil.Process(pid) if pid is not None else None
        self._nvml = open_nvml() if gpu and pid is not None else None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        if self._proc is None:
            return
        try:
            self.peak_rss_bytes = max(self.peak_rss_bytes, _rss_tree(self._proc))
            if self._nvml is not None:
                pids = {self.pid, *(c.pid for c in self._proc.children(recursive=True))}
                self.peak_gpu_bytes = max(self.peak_gpu_bytes or 0, self._nvml.used_bytes(pids))
        except psutil.NoSuchProcess:
            self._stop.set()  # the engine died: keep the peak seen so far
        self.samples += 1

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def start(self) -> "PeakMemorySampler":
        self.sample()
        self._thread = threading.Thread(target=self._loop, name=f"mem-{self.pid}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        if self._nvml is not None:
            self._nvml.close()

    def __enter__(self) -> "PeakMemorySampler":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def peak_gb(self) -> float:
        """The configuration's peak: GPU memory where measured, else host RSS."""
        return (self.peak_gpu_bytes if self.peak_gpu_bytes else self.peak_rss_bytes) / 1e9


@dataclass(frozen=True)
class BandwidthUse:
    bytes_per_step: float
    tpot_s: float
    achieved_gbs: float
    limit_gbs: float
    fraction: float
    devices: int = 1  # devices whose memory one step reads in parallel (a TP group's GPUs)

    def line(self) -> str:
        whose = (
            "the machine's memory bandwidth"
            if self.devices == 1
            else f"the memory bandwidth of the {self.devices} GPUs a tensor-parallel step reads"
        )
        return (
            f"decode came to {self.fraction:.0%} of {whose} "
            f"({self.achieved_gbs:.1f} of {self.limit_gbs:.1f} GB/s: {self.bytes_per_step / 1e6:.0f} MB "
            f"read per step in {self.tpot_s * 1e3:.2f} ms)"
        )


def decode_bandwidth(
    weight_bytes: float,
    tpot_s: float,
    limit_gbs: float,
    kv_bytes_per_step: float = 0.0,
    batch: int = 1,
    devices: int = 1,
) -> BandwidthUse:
    """A decode step reads every weight once (shared by the batch) plus each sequence's KV;
    achieved GB/s = bytes per step / step time, where step time = TPOT (one token per step).
    `limit_gbs` is one device's; `devices` read their shares at once (TP: each GPU its 1 / tp),
    so the limit is theirs together (pipeline stages and replicas do not read one step at once)."""
    if tpot_s <= 0 or limit_gbs <= 0 or devices < 1:
        raise ValueError(
            f"decode_bandwidth: tpot_s={tpot_s} and limit_gbs={limit_gbs} must be > 0, devices={devices} >= 1"
        )
    per_step = weight_bytes + kv_bytes_per_step * batch
    achieved = per_step / tpot_s / 1e9
    limit = limit_gbs * devices
    return BandwidthUse(per_step, tpot_s, achieved, limit, achieved / limit, devices)
