"""Agreement of a lossy arm with the reference arm, item by item.

Accuracy alone hides damage where the reference is weak (a 0.5B model gets most GSM8K items
wrong either way); agreement does not: a faithful arm repeats the reference's greedy tokens,
right or wrong, and a damaged one diverges early. Both arms must have answered the same items
(same item ids; prompt hashes are checked and mismatches counted).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from .extract import normalize
from .records import QualityRecord
from .stats import Score, score_bools


@dataclass(frozen=True)
class ItemAgreement:
    item_id: str
    same_prompt: bool
    answer_agree: bool  # same strict answer after lm-eval normalisation ([invalid] == [invalid])
    flexible_agree: bool
    identical_output: bool
    first_divergence: int | None  # index of the first differing token (or char); None when identical
    prefix_frac: float  # identical prefix / length of the longer output; 1.0 when identical
    unit: str  # "token" when both sides carry token ids, else "char"
    ref_correct: bool
    arm_correct: bool


@dataclass(frozen=True)
class AgreementSummary:
    n: int
    answer_agreement: Score
    flexible_agreement: Score
    identical_outputs: Score
    mean_prefix_frac: float
    median_first_divergence: float  # over diverging items; NaN when none diverge
    unit: str  # "token", "char" or "mixed"
    n_prompt_mismatch: int
    n_missing: int  # ids present in only one of the two runs
    both_correct: int
    ref_only_correct: int
    arm_only_correct: int
    neither_correct: int
    items: tuple[ItemAgreement, ...]


def common_prefix(a: Sequence, b: Sequence) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def item_agreement(arm: QualityRecord, ref: QualityRecord) -> ItemAgreement:
    if arm.item_id != ref.item_id:
        raise ValueError(f"agreement: item ids differ ({arm.item_id} vs {ref.item_id})")
    if arm.token_ids is not None and ref.token_ids is not None:
        a, b, unit = arm.token_ids, ref.token_ids, "token"
    else:
        a, b, unit = arm.output, ref.output, "char"
    k = common_prefix(a, b)
    identical = len(a) == len(b) == k and arm.output == ref.output
    longest = max(len(a), len(b))
    return ItemAgreement(
        item_id=arm.item_id,
        same_prompt=arm.prompt_sha256 == ref.prompt_sha256,
        answer_agree=normalize(arm.extracted_strict) == normalize(ref.extracted_strict),
        flexible_agree=normalize(arm.extracted_flexible) == normalize(ref.extracted_flexible),
        identical_output=identical,
        first_divergence=None if identical else k,
        prefix_frac=1.0 if identical or longest == 0 else k / longest,
        unit=unit,
        ref_correct=ref.correct_strict,
        arm_correct=arm.correct_strict,
    )


def agreement(arm: Sequence[QualityRecord], reference: Sequence[QualityRecord]) -> AgreementSummary:
    """Per-item agreement of `arm` with `reference` over the item ids both answered."""
    ref_by_id = {r.item_id: r for r in reference}
    arm_by_id = {r.item_id: r for r in arm}
    common = [i for i in arm_by_id if i in ref_by_id]
    if not common:
        raise ValueError("agreement: the two runs share no item ids; run both arms on the same items")
    items = tuple(item_agreement(arm_by_id[i], ref_by_id[i]) for i in common)
    units = {it.unit for it in items}
    div = [it.first_divergence for it in items if it.first_divergence is not None]
    return AgreementSummary(
        n=len(items),
        answer_agreement=score_bools(it.answer_agree for it in items),
        flexible_agreement=score_bools(it.flexible_agree for it in items),
        identical_outputs=score_bools(it.identical_output for it in items),
        mean_prefix_frac=sum(it.prefix_frac for it in items) / len(items),
        median_first_divergence=float(statistics.median(div)) if div else math.nan,
        unit=units.pop() if len(units) == 1 else "mixed",
        n_prompt_mismatch=sum(not it.same_prompt for it in items),
        n_missing=len(set(arm_by_id) ^ set(ref_by_id)),
        both_correct=sum(it.ref_correct and it.arm_correct for it in items),
        ref_only_correct=sum(it.ref_correct and not it.arm_correct for it in items),
        arm_only_correct=sum(it.arm_correct and not it.ref_correct for it in items),
        neither_correct=sum(not (it.ref_correct or it.arm_correct) for it in items),
        items=items,
    )
