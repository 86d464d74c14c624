"""Verification: nothing reaches a user unless its citation was retrieved and its quote is in the text.

Generators (extractive or LLM) produce a `Draft`; `verify()` turns it into the parts of an `Answer`
using only stored metadata for labels and links.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.models import Citation, Passage, Statement
from core.references import ProvisionRef, find_references
from core.text import find_verbatim, fold

# A quote shorter than this proves nothing ("the", "data").
MIN_QUOTE_CHARS = 12


@dataclass(frozen=True)
class DraftStatement:
    text: str
    source_ids: tuple[str, ...]
    quote: str


@dataclass(frozen=True)
class Draft:
    statements: tuple[DraftStatement, ...]
    not_in_sources: bool = False


@dataclass(frozen=True)
class Verified:
    statements: tuple[Statement, ...]
    citations: tuple[Citation, ...]
    dropped: tuple[str, ...]  # why each dropped statement was dropped, for logs and evals


def verbatim_quote(quote: str, text: str) -> str | None:
    """The stored span the quote stands for, if the quote is long enough to prove anything."""
    # Models bracket quotes with quote marks or ellipses that are not part of the text; the text's own
    # quote marks (Art. 4's "‘controller’ means") are kept when the quote includes them.
    trimmed = fold(quote).strip(" …'\"").removeprefix("...").removesuffix("...").strip()
    if len(trimmed) < MIN_QUOTE_CHARS:
        return None
    return find_verbatim(quote.strip(), text) or find_verbatim(trimmed, text)


def _mentions(text: str) -> set[str]:
    """Provision labels a statement names in its own words, in any official language ("under Article 33(1)",
    "nach Art. 33 Abs. 1"); a point names its paragraph."""
    return {str(ProvisionRef(r.ref.article, r.ref.paragraph)) for r in find_references(text)}


def verify(draft: Draft, retrieved: Sequence[Passage]) -> Verified:
    by_id = {p.source_id: p for p in retrieved}
    citations: list[Citation] = []
    statements: list[Statement] = []
    dropped: list[str] = []
    for statement in draft.statements:
        sources = [by_id[s] for s in statement.source_ids if s in by_id]
        if not sources:
            dropped.append(f"cites nothing that was retrieved: {statement.source_ids}")
            continue
        supporting = [(p, q) for p in sources if (q := verbatim_quote(statement.quote, p.text))]
        if not supporting:
            dropped.append(f"quote not found in {[p.source_id for p in sources]}: {statement.quote[:80]!r}")
            continue
        named = _mentions(statement.text)
        cited_articles = {p.source_id for p, _ in supporting} | {p.source_id.split("(")[0] for p, _ in supporting}
        if named - cited_articles:
            dropped.append(f"names provisions it does not quote: {sorted(named - cited_articles)}")
            continue
        passage, quote = supporting[0]
        citation = Citation(passage.source_id, passage.label, quote, passage.url, passage.lang, passage.kind)
        if citation not in citations:
            citations.append(citation)
        statements.append(Statement(statement.text.strip(), (citations.index(citation),)))
    return Verified(tuple(statements), tuple(citations), tuple(dropped))
