"""Reply intents as the parts of a Teams message: markdown text with [n] markers, the citation entity, and an
Adaptive Card listing the sources.

Pure functions over plain JSON-able dicts, so the wire format is unit-testable without the Bot Framework SDK;
`adapters.teams.bot` turns a `TeamsMessage` into SDK objects. Text from users, models or PDFs never becomes
markup or a live link: it is escaped in markdown, and quotes in the card are plain text runs. Labels and URLs
come from the corpus.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from adapters import wording
from adapters.intents import (
    Answered,
    Declined,
    DocumentList,
    Help,
    Reply,
)
from adapters.markdown import escape, link
from adapters.replies import one_line_reply
from core.models import Citation, Statement

# Teams renders at most 20 citations per message and cuts abstracts at 160 characters and names at 80.
MAX_CITATIONS = 20
MAX_ABSTRACT_CHARS = 160
MAX_NAME_CHARS = 80


@dataclass(frozen=True)
class TeamsMessage:
    """One outgoing message: markdown text, entities, Adaptive Cards and channel data, as JSON."""

    text: str
    entities: tuple[dict[str, Any], ...] = ()
    cards: tuple[dict[str, Any], ...] = ()
    channel_data: dict[str, Any] | None = None


def render(reply: Reply, *, with_card: bool) -> TeamsMessage:
    """`reply` as a Teams message. `with_card` adds an answer's sources as an Adaptive Card, for clients that do
    not render the citation entity; it is added regardless when there are more citations than Teams renders."""
    if isinstance(reply, (Answered, Declined)):
        return render_answer(reply, with_card=with_card)
    return TeamsMessage(_reply_text(reply))


def _reply_text(reply: Reply) -> str:
    match reply:
        case Help():
            return "\n\n".join([f"**{wording.HELP_LEAD}** {wording.HELP_ABOUT}",
                                "\n".join(f"- {p}" for p in wording.HELP["teams"])])
        case DocumentList(records=()):
            return wording.NO_DOCUMENTS["teams"]
        case DocumentList(records=records):
            items = [f"- {wording.document_line(escape(r.filename), r.pages, r.passages, escape(r.uploader), r.uploaded_at[:10])}"
                     for r in records]
            return f"**{wording.DOCUMENTS_HEADER}** {wording.documents_header(len(records), 'teams')}\n\n" + "\n".join(items)
    return one_line_reply(reply, "teams", escape=escape)


def render_answer(reply: Answered | Declined, *, with_card: bool) -> TeamsMessage:
    """The answer with native citations and feedback buttons (see `render` for `with_card`)."""
    answer = reply.answer
    if isinstance(reply, Declined):
        text = _declined_text(reply)
    else:
        positions = {citation: n for n, citation in enumerate(answer.citations, start=1)}
        text = "\n\n".join(_statement_text(s, positions) for s in answer.statements)
    text = "\n\n".join([text, *(f"_{wording.NOTICES[n]}_" for n in answer.notices)])
    needs_card = with_card or len(answer.citations) > MAX_CITATIONS
    return TeamsMessage(
        text=text,
        entities=(citation_entity(answer.citations),),
        cards=(_sources_card(answer.citations),) if answer.citations and needs_card else (),
        channel_data={"feedbackLoopEnabled": True},
    )


def fallback_text(reply: Answered | Declined) -> str:
    """The answer as markdown alone, each quote under its linked label: for when Teams refuses the full message
    (it answers 400 to a whole activity over one field it rejects)."""
    if isinstance(reply, Declined):
        return _declined_text(reply)
    lines = []
    for statement in reply.answer.statements:
        lines += [] if statement.text is None else [escape(statement.text)]
        lines += [f"{link(c.label, c.url)}: “{escape(c.quote)}”" for c in statement.citations]
    return "\n\n".join([*lines, *(f"_{wording.NOTICES[n]}_" for n in reply.answer.notices)])


def _statement_text(statement: Statement, positions: dict[Citation, int]) -> str:
    if statement.text is None:  # the quotes speak for themselves
        return " ".join(f"“{escape(c.quote)}” [{positions[c]}]" for c in statement.citations)
    markers = "".join(f"[{positions[c]}]" for c in dict.fromkeys(statement.citations))
    return f"{escape(statement.text)} {markers}".rstrip()


def _declined_text(reply: Declined) -> str:
    lines = [f"**{wording.DECLINED_HEADER}.**", wording.declined(reply.reason, reply.missing)]
    if reply.related:
        lines.append(f"{wording.RELATED_HEADER} " + ", ".join(link(p.label, p.url) for p in reply.related))
    return "\n\n".join(lines)


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


def _claim(position: int, citation: Citation) -> dict[str, Any]:
    # The pop-up shows name and abstract as plain text, so they are not escaped.
    appearance: dict[str, Any] = {
        "@type": "DigitalDocument",
        "name": shorten(citation.label, MAX_NAME_CHARS),
        "abstract": shorten(citation.quote, MAX_ABSTRACT_CHARS),
        "keywords": [wording.REGULATION_KEYWORD if citation.kind == "regulation" else wording.DOCUMENT_KEYWORD],
    }
    if citation.url:
        appearance["url"] = citation.url
    return {"@type": "Claim", "position": position, "appearance": appearance}


def _sources_card(citations: tuple[Citation, ...]) -> dict[str, Any]:
    body: list[dict[str, Any]] = [{"type": "TextBlock", "text": wording.SOURCES_HEADER, "weight": "Bolder",
                                   "size": "Medium"}]
    numbered = list(enumerate(citations, start=1))
    for title, kind in ((wording.REGULATION_HEADER, "regulation"), (wording.DOCUMENTS_HEADER, "document")):
        group = [(position, c) for position, c in numbered if c.kind == kind]
        if not group:
            continue
        body.append({"type": "TextBlock", "text": title, "weight": "Bolder", "spacing": "Medium", "wrap": True})
        for position, citation in group:
            if citation.url:
                body.append({"type": "TextBlock", "text": f"[{position}] {link(citation.label, citation.url)}",
                             "wrap": True, "spacing": "Small"})
            else:  # a document's label: its file name, as a text run that is never read as markdown
                body.append({"type": "RichTextBlock", "spacing": "Small",
                             "inlines": [{"type": "TextRun", "text": f"[{position}] {citation.label}"}]})
            # A text run is never read as markdown: the quote cannot turn into a link or emphasis.
            body.append({"type": "RichTextBlock", "spacing": "None",
                         "inlines": [{"type": "TextRun", "text": f"“{citation.quote}”", "isSubtle": True}]})
    return {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": "1.2",
        "body": body,
    }


__all__ = ["MAX_ABSTRACT_CHARS", "MAX_CITATIONS", "TeamsMessage", "citation_entity", "escape", "fallback_text",
           "render", "render_answer", "shorten"]
