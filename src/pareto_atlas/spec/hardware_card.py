"""A hardware card: the machine numbers of one GPU or CPU (bandwidth, compute, memory, links, price) that the
simulator derives from; the shipped ones are read by spec.cards.shipped_hardware."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

LINKS = ("nvlink", "pcie", "xgmi", "none")


@dataclass(frozen=True)
class HardwareCard:
    name: str
    kind: str  # "gpu" or "cpu"
    mem_bw_gbs: float  # peak memory bandwidth, GB/s
    tflops: dict = field(default_factory=dict)  # dense peak TFLOP/s by compute dtype: fp32, fp16, fp8, int8
    mem_gib: float = 0.0
    price_per_hour: float = 0.0
    price_date: str = ""
    price_source: str = ""
    link_gbs: float = 0.0  # bandwidth between two devices of a node, GB/s per direction
    source: str = "spec-sheet"  # "spec-sheet" or "measured:<date>"
    # The node: how many devices one holds, what joins them, and the latency of one hop over it (a
    # tensor-parallel worker lives inside one node; replicas and disaggregated pools may span nodes).
    gpus_per_node: int = 1
    link: str = "none"  # "nvlink", "pcie", "xgmi" or "none"
    link_latency_us: float = 0.0  # one hop of a collective over the link, microseconds
    # The GPU's architecture (generation), e.g. "hopper": cards of one run the same kernels, so a weight
    # format's kernel efficiency fitted on one carries to the others (calibrate.published_formats).
    arch: str = ""

    def __post_init__(self) -> None:
        if self.link not in LINKS:
            raise ValueError(f"hardware {self.name}.link: {self.link!r} is not one of {', '.join(LINKS)}")
        if isinstance(self.gpus_per_node, bool) or not isinstance(self.gpus_per_node, int) or self.gpus_per_node < 1:
            raise ValueError(f"hardware {self.name}.gpus_per_node: {self.gpus_per_node!r} must be an integer >= 1")
        if self.kind == "cpu" and self.gpus_per_node != 1:
            raise ValueError(
                f"hardware {self.name}.gpus_per_node: a CPU card is one device ({self.gpus_per_node} given)"
            )
        if self.link_gbs < 0 or self.link_latency_us < 0:
            raise ValueError(f"hardware {self.name}.link_gbs / link_latency_us: must be >= 0")
        if self.gpus_per_node > 1 and (self.link == "none" or self.link_gbs <= 0):
            raise ValueError(
                f"hardware {self.name}.link: a node of {self.gpus_per_node} devices needs a link and link_gbs > 0"
            )

    def peak_flops(self, dtype: str) -> float:
        """FLOP/s for a compute dtype, falling back to the widest dtype the card lists."""
        for d in (dtype, "fp16", "fp32"):
            if d in self.tflops:
                return self.tflops[d] * 1e12
        raise ValueError(f"hardware {self.name}: no FLOP/s figure for {dtype!r}; card lists {sorted(self.tflops)}")

    def with_price(self, price_per_hour: float, date: str, source: str = "user override") -> "HardwareCard":
        if price_per_hour <= 0:
            raise ValueError(f"price for {self.name}: {price_per_hour} must be > 0 $/hour")
        return replace(self, price_per_hour=price_per_hour, price_date=date, price_source=source)
