"""Ranking metrics over provision ids."""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

DEFAULT_QUESTIONS = Path(__file__).parent / "data" / "questions.jsonl"


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    lang: str
    expected: tuple[str, ...]

    @property
    def answerable(self) -> bool:
        return bool(self.expected)


def load_questions(path: Path = DEFAULT_QUESTIONS) -> list[Question]:
    questions = []
    with open(path, encoding="utf-8") as handle:
        for n, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                questions.append(Question(row["id"], row["question"], row["lang"], tuple(row["expected"])))
            except (ValueError, KeyError) as exc:
                raise SystemExit(f"{path}:{n}: not a question record ({exc})") from None
    return questions


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
