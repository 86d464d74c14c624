"""Turn an `Answer` into the parts of a Teams message: markdown text with [n] markers, the citation
entity, and an Adaptive Card listing the sources.

Pure functions over plain JSON-able dicts, so the wire format is unit-testable without the Bot
Framework SDK; `adapters.teams` converts a `Reply` into SDK objects.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from core.documents import DocumentRecord
from core.models import Answer, Citation, Passage

# Teams renders at most 20 citations per message and cuts abstracts at 160 characters and names at 80.
MAX_CITATIONS = 20
MAX_ABSTRACT_CHARS = 160
MAX_NAME_CHARS = 80

ABSTENTION = "The Regulation doesn't cover this."
RELATED_HEADER = "Related provisions (not an answer):"
USAGE_HINT = (
    "Ask me a question about the GDPR, e.g. \"When must a personal data breach be notified?\" "
    "Every answer quotes the provisions it rests on.\n\n"
    "Type `docs` to list your organisation's documents, which answers may quote. Admins add a PDF by sending it "
    "to me in a personal chat; `forget <file name>` removes one."
)
UPLOADS_DISABLED = "Document uploads are not enabled on this bot."
FORGET_USAGE = "Which document? Send `forget <file name>`, e.g. `forget Retention policy.pdf`; `docs` lists them."
REGULATION_GROUP = "GDPR (Regulation (EU) 2016/679)"
DOCUMENT_GROUP = "From your organisation's documents"
# Shown in the citation pop-up, where Teams allows at most 28 characters per keyword.
REGULATION_KEYWORD = "GDPR"
DOCUMENT_KEYWORD = "Organisation document"


@dataclass(frozen=True)
class Reply:
    """One outgoing message: markdown text, entities, Adaptive Cards and channel data, as JSON."""

    text: str
    entities: tuple[dict[str, Any], ...] = ()
    cards: tuple[dict[str, Any], ...] = ()
    channel_data: dict[str, Any] | None = None


def render_answer(answer: Answer, *, with_card: bool) -> Reply:
    """The answer as a Teams message with native citations and feedback buttons.

    `with_card` adds the sources as an Adaptive Card, for clients that do not render the citation
    entity; it is added regardless when there are more citations than Teams renders.
    """
    if answer.abstained:
        text = _abstention_text(answer)
    else:
        text = "\n\n".join(
            f"{statement.text} {_markers(statement.citations)}".rstrip() for statement in answer.statements
        )
    if answer.notice:
        text = f"{text}\n\n_{answer.notice}_"
    needs_card = with_card or len(answer.citations) > MAX_CITATIONS
    cards = (_sources_card(answer.citations),) if answer.citations and needs_card else ()
    return Reply(
        text=text,
        entities=(citation_entity(answer.citations),),
        cards=cards,
        channel_data={"feedbackLoopEnabled": True},
    )


def apology(reference: str, doing: str = "answering") -> str:
    return f"Sorry, something went wrong while {doing}. Please try again later (reference {reference})."


def indexed_text(record: DocumentRecord) -> str:
    """The confirmation of an upload: "Indexed X.pdf: 3 pages, 5 passages"."""
    return f"Indexed {record.filename}: {_counts(record)}"


def forgotten_text(filename: str, removed: DocumentRecord | None) -> str:
    return f"No document named {filename}." if removed is None else f"Removed {removed.filename}."


def download_failed_text(filename: str) -> str:
    return f"I couldn't download {filename} from Teams. Please send it again."


def document_list_text(records: list[DocumentRecord]) -> str:
    """The tenant's uploaded documents, newest last."""
    if not records:
        return "No documents have been added yet. Admins add a PDF by sending it to me in a personal chat."
    items = [f"- {r.filename}: {_counts(r)} · added by {r.uploader} on {r.uploaded_at[:10]}" for r in records]
    return f"**{DOCUMENT_GROUP}** ({len(records)}), which answers may quote:\n\n" + "\n".join(items)


def _counts(record: DocumentRecord) -> str:
    return f"{_plural(record.pages, 'page')}, {_plural(record.passages, 'passage')}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def citation_entity(citations: Iterable[Citation]) -> dict[str, Any]:
    """Teams' AI-generated-content entity with one Claim per citation (position = its [n] marker)."""
    claims = [_claim(position, citation) for position, citation in enumerate(citations, start=1)]
    entity: dict[str, Any] = {
        "type": "https://schema.org/Message",
        "@type": "Message",
        "@context": "https://schema.org",
        "@id": "",
        "additionalType": ["AIGeneratedContent"],
    }
    if claims:
        entity["citation"] = claims[:MAX_CITATIONS]
    return entity


def shorten(text: str, limit: int) -> str:
    """`text` with collapsed whitespace, cut at a word boundary with "…" so it fits in `limit` characters."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    boundary = cut.rfind(" ")
    if boundary > 0:
        cut = cut[:boundary]
    return cut.rstrip(" ,;:.") + "…"


def _markers(indexes: Iterable[int]) -> str:
    return "".join(f"[{index + 1}]" for index in indexes)


def _abstention_text(answer: Answer) -> str:
    # The core's own abstention sentence usually repeats the header; showing it twice reads as a glitch.
    explanation = [s.text for s in answer.statements if s.text.strip() and _norm(s.text) != _norm(ABSTENTION)]
    lines = [f"**{ABSTENTION}**", *explanation]
    if answer.related:
        lines.append(f"{RELATED_HEADER} " + ", ".join(_link(p.label, p.url) for p in _unique(answer.related)))
    return "\n\n".join(lines)


def _norm(text: str) -> str:
    return " ".join(text.split()).rstrip(".").casefold()


def _unique(passages: Iterable[Passage]) -> list[Passage]:
    seen: set[str] = set()
    unique = []
    for passage in passages:
        if passage.source_id not in seen:
            seen.add(passage.source_id)
            unique.append(passage)
    return unique


def _claim(position: int, citation: Citation) -> dict[str, Any]:
    appearance: dict[str, Any] = {
        "@type": "DigitalDocument",
        "name": shorten(citation.label, MAX_NAME_CHARS),
        "abstract": shorten(citation.quote, MAX_ABSTRACT_CHARS),
        "keywords": [REGULATION_KEYWORD if citation.kind == "regulation" else DOCUMENT_KEYWORD],
    }
    if citation.url:
        appearance["url"] = citation.url
    return {"@type": "Claim", "position": position, "appearance": appearance}


def _sources_card(citations: tuple[Citation, ...]) -> dict[str, Any]:
    body: list[dict[str, Any]] = [{"type": "TextBlock", "text": "Sources", "weight": "Bolder", "size": "Medium"}]
    numbered = list(enumerate(citations, start=1))
    for title, kind in ((REGULATION_GROUP, "regulation"), (DOCUMENT_GROUP, "document")):
        group = [(position, c) for position, c in numbered if c.kind == kind]
        if not group:
            continue
        body.append({"type": "TextBlock", "text": title, "weight": "Bolder", "spacing": "Medium", "wrap": True})
        for position, citation in group:
            body.append({"type": "TextBlock", "text": f"[{position}] {_link(citation.label, citation.url)}",
                         "wrap": True, "spacing": "Small"})
            body.append({"type": "TextBlock", "text": f"“{citation.quote}”", "wrap": True, "isSubtle": True,
                         "spacing": "None"})
    return {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": "1.2",
        "body": body,
    }


def _link(label: str, url: str) -> str:
    text = label.replace("[", "\\[").replace("]", "\\]")
    if not url:
        return text
    return f"[{text}]({url.replace('(', '%28').replace(')', '%29').replace(' ', '%20')})"


__all__ = [
    "ABSTENTION", "FORGET_USAGE", "MAX_ABSTRACT_CHARS", "MAX_CITATIONS", "RELATED_HEADER", "Reply",
    "UPLOADS_DISABLED", "USAGE_HINT", "apology", "citation_entity", "document_list_text", "download_failed_text",
    "forgotten_text", "indexed_text", "render_answer", "shorten",
]
