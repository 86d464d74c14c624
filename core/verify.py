"""Verification: nothing reaches a user unless its citation was retrieved and its quote is in the text.

Generators (extractive or LLM) produce a `Draft`; `Verifier.run()` keeps what cites a retrieved source with a
verbatim quote, names no provision it does not quote, and (for a model's own sentence) claims nothing the
quote does not support (core.claims): what cannot be checked keeps its quote and loses its wording. A sentence
resting on an uploaded document always loses its wording: the document is quoted, never restated.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.claims import unsupported
from core.models import Citation, Passage, Statement
from core.references import ProvisionRef, find_references
from core.text import find_verbatim, fold

# A quote shorter than this proves nothing ("the", "data").
MIN_QUOTE_CHARS = 12


@dataclass(frozen=True)
class DraftStatement:
    """What a generator proposes: its own sentence (None: the quote speaks for itself), the sources it cites
    and the words it quotes from them."""

    text: str | None
    source_ids: tuple[str, ...]
    quote: str


@dataclass(frozen=True)
class Draft:
    statements: tuple[DraftStatement, ...]
    not_in_sources: bool = False


@dataclass(frozen=True)
class Verified:
    statements: tuple[Statement, ...]
    dropped: tuple[str, ...]  # why each dropped statement was dropped, for logs and evals
    unchecked: tuple[str, ...] = ()  # why a statement's own wording was hidden (its quote is still shown)


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


class Verifier:
    """Turns a generator's Draft into verified statements, using only stored metadata for labels and links."""

    def __init__(self, actors: Callable[[str], Sequence[Sequence[str]]] = lambda lang: ()):
        """`actors(lang)`: the token sequences of the Regulation's actor terms in `lang` (see core.claims)."""
        self._actors = actors

    def run(self, draft: Draft, retrieved: Sequence[Passage]) -> Verified:
        by_id = {p.source_id: p for p in retrieved}
        statements: list[Statement] = []
        dropped: list[str] = []
        unchecked: list[str] = []
        for statement in draft.statements:
            sources = [by_id[s] for s in statement.source_ids if s in by_id]
            if not sources:
                dropped.append(f"cites nothing that was retrieved: {statement.source_ids}")
                continue
            supporting = [(p, q) for p in sources if (q := verbatim_quote(statement.quote, p.text))]
            if not supporting:
                dropped.append(f"quote not found in {[p.source_id for p in sources]}: {statement.quote[:80]!r}")
                continue
            text = statement.text.strip() if statement.text and statement.text.strip() else None
            named = _mentions(text or "")
            cited_articles = {p.source_id for p, _ in supporting} | {p.source_id.split("(")[0] for p, _ in supporting}
            if named - cited_articles:
                dropped.append(f"names provisions it does not quote: {sorted(named - cited_articles)}")
                continue
            passage, quote = supporting[0]
            citation = Citation(passage.source_id, passage.label, quote, passage.url, passage.lang, passage.kind,
                                passage.title)
            if text is not None and passage.kind == "document":
                # An uploaded document may carry instructions to the model; its words are shown as its quote only,
                # never restated as the bot's.
                unchecked.append(f"rests on a document, shown as its quote only: {text[:80]!r}")
                text = None
            if text is not None:
                problems = unsupported(text, quote, passage.lang, self._actors(passage.lang))
                if problems:
                    # The quote is verified and shown; the model's sentence, which says more than it, is not.
                    unchecked.append(f"{[f'{p.what} {p.detail}' for p in problems]} not in the quote: {text[:80]!r}")
                    text = None
            if any(s.text is None and s.citations == (citation,) for s in statements) and text is None:
                continue
            statements.append(Statement(text, (citation,)))
        return Verified(tuple(statements), tuple(dropped), tuple(unchecked))
