"""What every table of a study shares: frozen, no unknown fields; and the hardware cards a study may name."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from pareto_atlas.spec import bounds as B
from pareto_atlas.spec.cards import shipped_hardware


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def check_hardware(name: str) -> str:
    """A hardware card a study may measure on: this-cpu or a shipped card (spec/hardware.toml)."""
    known = ["this-cpu", *shipped_hardware()]
    if name not in known:
        raise ValueError(f"{name!r} is not a hardware card; allowed: {', '.join(known)}")
    return name


def known_hardware(names: list[str]) -> list[str]:
    known = ["this-cpu", *shipped_hardware()]
    bad = [h for h in names if h not in known]
    if bad:
        raise ValueError(f"{B.show(bad[0])} is not a hardware card; known: {', '.join(known)}")
    return names
