"""Direct references: a question that names a provision gets exactly that provision first."""
from __future__ import annotations

import re
from typing import Iterable

from core.text import PARAGRAPH_WORDS

_ARTICLE_WORD = r"(?:art(?:icle|ikel|ículo|iculo|icolo|igo|ykuł|ykul|ikla|iklis|ikkel|icolul|icle|\.)?s?|άρθρο|член|članak|člen|článok|článek|artikulu|cikk|pants|straipsnis)"
_REFERENCE = re.compile(
    r"(?<![\w])" + _ARTICLE_WORD + r"\s*\.?\s*(\d{1,2})\b(?:\s*\((\d{1,2})\)|\s*,?\s*(?:" + "|".join(PARAGRAPH_WORDS) + r")\.?\s*(\d{1,2})\b)?",
    re.IGNORECASE,
)
_BARE = re.compile(r"(?<![\w(])(\d{1,2})\((\d{1,2})\)")


def referenced_provisions(question: str, provision_ids: Iterable[str]) -> list[str]:
    """Provision ids the question names, in the order named. "Article 17" with paragraphs yields its
    paragraphs in order; a paragraph that does not exist falls back to its article."""
    ids = list(provision_ids)
    known = set(ids)
    found: list[str] = []

    def add(article: str, paragraph: str | None) -> None:
        article_n = int(article)
        exact = f"Art. {article_n}({int(paragraph)})" if paragraph else f"Art. {article_n}"
        if exact in known:
            candidates = [exact]
        else:
            candidates = [i for i in ids if i.startswith(f"Art. {article_n}(")]
        found.extend(c for c in candidates if c not in found)

    spans: list[tuple[int, int]] = []
    for match in _REFERENCE.finditer(question):
        add(match.group(1), match.group(2) or match.group(3))
        spans.append(match.span())
    for match in _BARE.finditer(question):
        if not any(start <= match.start() < end for start, end in spans):
            add(match.group(1), match.group(2))
    return found
