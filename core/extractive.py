"""The extractive generator: answers made of the retrieved provisions' own words.

No network, no model: the top provision (and close runners-up) each contribute the sentence or point
that shares most with the question, quoted verbatim, in rank order.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from core.followup import contextualise
from core.models import Mode, Notice, Passage, Turn
from core.retrieval import Retrieval
from core.text import tokenize
from core.verify import Draft, DraftStatement
from core.vocabulary import expand

# Splits a provision into sentences and lettered/numbered points without losing any character.
_UNIT_BREAK = re.compile(r"(?<=[.;:])\s+(?=\(?[a-z0-9ivx]{1,4}\)\s|[A-ZÀ-Ý])")
MAX_QUOTE_CHARS = 420
MAX_DOCUMENT_QUOTES = 2


class ExtractiveGenerator:
    mode = Mode.EXTRACTIVE

    def __init__(self, max_provisions: int = 3, runner_up_ratio: float = 0.85):
        if max_provisions < 1:
            raise ValueError("max_provisions must be >= 1")
        if not 0 < runner_up_ratio <= 1:
            raise ValueError("runner_up_ratio must be in (0, 1]")
        self.max_provisions = max_provisions
        self.runner_up_ratio = runner_up_ratio

    def standalone_question(self, question: str, history: Sequence[Turn]) -> str:
        return contextualise(question, history)

    def generate(self, question: str, retrieval: Retrieval, history: Sequence[Turn] = ()) -> tuple[Draft, Notice | None]:
        chosen = self._choose(retrieval) + [p for p in retrieval.passages if p.kind == "document"][:MAX_DOCUMENT_QUOTES]
        terms = set(tokenize(f"{retrieval.query} {expand(retrieval.query) if retrieval.lang == 'en' else ''}",
                             retrieval.lang))
        # No sentence of our own: the quote, under its provision's label and heading, is the answer.
        statements = [DraftStatement(None, (p.source_id,), best_span(p.text, terms, p.lang)) for p in chosen]
        return Draft(tuple(statements)), None

    def _choose(self, retrieval: Retrieval) -> list[Passage]:
        passages = [p for p in retrieval.passages if p.kind == "regulation"]
        if not passages:
            return []
        if retrieval.referenced:
            named = [p for p in passages if p.source_id in retrieval.referenced]
            return named[: self.max_provisions]
        top = passages[0].score
        # Scores are fused z-scores (positive for anything relevant); a runner-up joins only when it is
        # nearly as strong as the first, so a clear answer stays one provision long.
        return [passages[0]] + [p for p in passages[1: self.max_provisions] if top > 0 and p.score >= self.runner_up_ratio * top]


def best_span(text: str, terms: set[str], lang: str) -> str:
    """The sentence/point of `text` sharing most terms with the question, extended with its
    neighbours while short; a verbatim substring of `text`."""
    if len(text) <= MAX_QUOTE_CHARS:
        return text
    units = _UNIT_BREAK.split(text)
    overlaps = [len(terms & set(tokenize(u, lang))) for u in units]
    best = max(range(len(units)), key=lambda i: (overlaps[i], -i))
    start, end = best, best + 1
    while end < len(units) and len(" ".join(units[start:end + 1])) <= MAX_QUOTE_CHARS and overlaps[end] > 0:
        end += 1
    span = " ".join(units[start:end])
    if len(span) > MAX_QUOTE_CHARS:
        span = span[:MAX_QUOTE_CHARS].rsplit(" ", 1)[0]
    # Units were split on whitespace that may have been a newline or double space: re-find the exact span.
    first_words = span.split(" ")
    pattern = r"\s+".join(re.escape(w) for w in first_words)
    match = re.search(pattern, text)
    return match.group(0) if match else units[best]
