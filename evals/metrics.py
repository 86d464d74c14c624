"""The evaluation sets and the ranking metrics over provision ids.

The team's own sets are in `evals/data/` (see its README); the outside set, written by other people, is
`../shared/evalsets/` beside the repository and is reported on its own, never tuned on.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).parent / "data"
OUTSIDE = Path(__file__).resolve().parent.parent.parent / "shared" / "evalsets"
# Retrieval sets by name: what `python -m evals.run_eval retrieval` reports, one row each.
RETRIEVAL_SETS = {
    "en": DATA / "retrieval_en.jsonl",
    "situational": DATA / "retrieval_situational.jsonl",
    "languages": DATA / "retrieval_languages.jsonl",
    "outside": OUTSIDE / "goreason-gdpr.jsonl",
}
ABSTENTION_SET = DATA / "abstention.jsonl"
ABSTENTION_TRAINING = DATA / "abstention_train.jsonl"  # training material only: every row is in the train split
SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    lang: str
    expected: tuple[str, ...]
    split: str | None = None  # "train" | "dev" | "test"; None in sets that are not split (the outside set)
    style: str | None = None  # "legal" | "lay" | "situational"
    answerable: bool | None = None  # given in abstention sets; elsewhere: has an expected provision
    category: str | None = None
    kind: str | None = None

    @property
    def is_answerable(self) -> bool:
        return bool(self.expected) if self.answerable is None else self.answerable


def load_questions(path: Path) -> list[Question]:
    questions = []
    with open(path, encoding="utf-8") as handle:
        for n, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                questions.append(Question(row["id"], row["question"], row["lang"], tuple(row["expected"]),
                                          row.get("split"), row.get("style"), row.get("answerable"),
                                          row.get("category"), row.get("kind")))
            except (ValueError, KeyError, TypeError) as exc:
                raise SystemExit(f"{path}:{n}: not a question record ({exc})") from None
    return questions


def in_split(questions: Iterable[Question], split: str | None) -> list[Question]:
    """`split` None or "all": every question."""
    return [q for q in questions if split in (None, "all") or q.split == split]


def rank_of(expected: Sequence[str], ranked: Sequence[str]) -> int | None:
    """1-based rank of the first acceptable id, or None when absent."""
    for position, pid in enumerate(ranked, 1):
        if pid in expected:
            return position
    return None


def summarise(ranks: Sequence[int | None], k: int) -> dict:
    n = len(ranks)
    if n == 0:
        return {"n": 0, "hit_at_1": 0.0, "recall_at_k": 0.0, "mrr": 0.0}
    return {
        "n": n,
        "hit_at_1": sum(1 for r in ranks if r == 1) / n,
        "recall_at_k": sum(1 for r in ranks if r is not None and r <= k) / n,
        "mrr": sum(1.0 / r for r in ranks if r is not None) / n,
    }


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (the p95 of 20 values is the 19th smallest)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]
