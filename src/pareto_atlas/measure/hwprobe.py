"""A hardware card for this machine, measured at run time: read bandwidth, SGEMM rate, memory size;
measured once per store and kept there (`this_machine`)."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from pareto_atlas.spec.cards import HardwareCard
from pareto_atlas.spec.study import Study
from pareto_atlas.store.db import Store, dumps

THIS = "this-cpu"  # this machine's card name


def read_bandwidth_gbs(mb: int = 256, seconds: float = 1.0, threads: int | None = None) -> float:
    """Best-of memory read bandwidth with one reader per core at once (GB/s): what a decode step
    does with the weights. One thread alone reaches about half of it on this kind of machine,
    which made decode look faster than the memory."""
    threads = threads or os.cpu_count() or 1
    arrays = [np.ones(mb * 2**20 // 8) for _ in range(threads)]
    best = np.inf
    end = time.perf_counter() + seconds
    with ThreadPoolExecutor(threads) as pool:  # numpy releases the GIL inside the reduction
        list(pool.map(np.sum, arrays))
        while time.perf_counter() < end:
            t = time.perf_counter()
            list(pool.map(np.sum, arrays))
            best = min(best, time.perf_counter() - t)
    return sum(a.nbytes for a in arrays) / best / 1e9


def sgemm_gflops(n: int = 1024, seconds: float = 0.8) -> float:
    """Best-of float32 matrix-multiply rate through numpy's BLAS, all its threads (GFLOP/s)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = a @ b
    best = np.inf
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        np.matmul(a, b, out=c)
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best / 1e9


def mem_total_gib() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def measure_this_machine(
    price_per_hour: float = 0.0, price_date: str = "", price_source: str = "user", name: str = "this-cpu"
) -> HardwareCard:
    """Measure this machine's card (< 3 s). Bandwidth and FLOP/s are achieved figures, not spec sheets."""
    bw = read_bandwidth_gbs()
    gf = sgemm_gflops()
    today = dt.date.today().isoformat()
    return HardwareCard(
        name=name,
        kind="cpu",
        mem_bw_gbs=round(bw, 2),
        tflops={"fp32": round(gf / 1e3, 4)},
        mem_gib=round(mem_total_gib(), 2),
        price_per_hour=price_per_hour,
        price_date=price_date or (today if price_per_hour else ""),
        price_source=price_source,
        link_gbs=0.0,
        source=f"measured:{today}",
    )


def this_machine(study: Study, store: Store, *, reprobe: bool = False) -> HardwareCard:
    """This machine's card, measured once and kept in the store (bandwidth and FLOP/s achieved)."""
    card = None if reprobe else store.latest_probe(THIS)
    if card is None:
        hw = measure_this_machine(
            price_per_hour=study.cpu_price_per_hour,
            price_date=study.price_date,
            price_source="assumed 2-vCPU rental price (study cpu_price_per_hour)",
        )
        store.put_probe(hashlib.sha256(dumps(hw.__dict__).encode()).hexdigest()[:16], THIS, hw.__dict__)
        return hw
    card = {**card, "price_per_hour": study.cpu_price_per_hour}
    return HardwareCard(**card)
