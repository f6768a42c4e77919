"""A published claim's row in the claims table, and the three verdicts it can carry."""

from __future__ import annotations

from dataclasses import dataclass

AGREES, DIFFERS, CANNOT = "agrees", "differs", "cannot say"


@dataclass(frozen=True)
class ClaimRow:
    id: str
    where: str
    claim: str
    answer: str
    verdict: str
    evidence: str
