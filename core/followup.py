"""Follow-up questions in a thread ("and for processors?") searched together with what came before.

Heuristic (extractive mode; the LLM mode condenses the thread with the model instead): a question
that is short, starts like a continuation, or leans on a pronoun is searched as the previous user
question plus the new one. A self-contained question is searched on its own, so a thread can change
subject.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from core.models import Turn

_CONTINUATION = re.compile(
    r"^\s*(and|but|also|what about|how about|what if|same for|and if|or|then|so|why|for|in that case|"
    r"und|et|y|e|en|och|i|a|ja|ir|és|și)\b",
    re.IGNORECASE,
)
_PRONOUN = re.compile(r"\b(it|its|that|this|they|them|those|these|there|such)\b", re.IGNORECASE)
SHORT_WORDS = 6


def is_follow_up(question: str) -> bool:
    words = re.findall(r"\w+", question)
    return len(words) <= SHORT_WORDS or bool(_CONTINUATION.match(question)) or bool(_PRONOUN.search(question))


def contextualise(question: str, history: Sequence[Turn]) -> str:
    earlier = [t.text for t in history if t.role == "user" and t.text.strip()]
    if not earlier or not is_follow_up(question):
        return question
    return f"{earlier[-1]} {question}"
