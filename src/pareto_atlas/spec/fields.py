"""One check shared by every frozen dataclass read back from a dict (the store, a launch, a study)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields


def check_fields(cls: type, d: Mapping, where: str) -> None:
    """Reject keys `cls` does not have, in one line naming the first and the allowed ones."""
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(d) - names)
    if unknown:
        raise ValueError(f"{where}: unknown field {unknown[0]!r}; allowed: {', '.join(sorted(names))}")
