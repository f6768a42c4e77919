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


def verdict_row(
    ref: dict, answer: str, verdict: str, evidence: str = "", *, part: str = "", claim: str | None = None
) -> ClaimRow:
    """The row of the paper's claim `ref` (its id, where the paper makes it, what it says) with this
    atlas's answer, verdict and evidence beside it. `part`: the claim's part the row is of (its id
    becomes "id:part"); `claim`: that part's own wording, in place of the claim's."""
    return ClaimRow(
        f"{ref['id']}:{part}" if part else ref["id"],
        ref["where"],
        ref["claim"] if claim is None else claim,
        answer,
        verdict,
        evidence,
    )
