"""Reply intents as Slack Block Kit messages: escaping, layout, and splitting within Slack's limits.

Pure functions only (no I/O), so every rule about what users see can be unit-tested. Everything that comes
from users, models or PDFs is escaped; the bot's own sentences come from `adapters.wording`.
"""
from __future__ import annotations

import re
from urllib.parse import urlsplit

from adapters import markdown, wording
from adapters.intents import (
    Answered,
    Declined,
    DocumentList,
    Help,
    Reply,
)
from adapters.replies import one_line_reply
from adapters.slack.blocks import (
    MAX_FALLBACK_CHARS,
    MAX_TEXT_CHARS,
    Group,
    SlackMessage,
    chunks,
    clip,
    context,
    markdown_block,
    pack,
    quote,
    section,
)
from core.models import Citation

FEEDBACK = "feedback"
# Answers posted before the feedback_buttons element had a button of each kind; their clicks still count.
FEEDBACK_UP = "feedback_up"
FEEDBACK_DOWN = "feedback_down"
HELPFUL = "helpful"
NOT_HELPFUL = "not-helpful"

_BROADCASTS = re.compile(r"@(channel|here|everyone)\b", re.IGNORECASE)


def escape(text: str) -> str:
    """Make user, model or document text safe to echo as mrkdwn.

    Escaping `&`, `<` and `>` turns every `<!channel>`, `<@U…>` or `<url|label>` into literal text; the
    zero-width space keeps a bare "@here" from being parsed by clients that still link names.
    """
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _BROADCASTS.sub("@\u200b\\1", escaped)


def escape_markdown(text: str) -> str:
    """Make user, model or document text safe in a markdown block: no markup or links, and Slack's `<…>` forms as
    entities (markdown shows them as the characters), so no mention or broadcast either."""
    return _BROADCASTS.sub("@\u200b\\1", markdown.escape(text, entities=True))


def feedback_value(request_id: str, helpful: bool) -> str:
    return f"{HELPFUL if helpful else NOT_HELPFUL}:{request_id}"


def read_feedback(value: str) -> tuple[str, bool] | None:
    """(request id, helpful) from a feedback button's value; None for a value this bot never sent."""
    verdict, _, request_id = value.partition(":")
    if verdict not in (HELPFUL, NOT_HELPFUL) or not request_id:
        return None
    return request_id, verdict == HELPFUL


def render(reply: Reply, *, asked_by: str | None = None) -> list[SlackMessage]:
    """`reply` as one or more messages; `asked_by` (a user id) repeats the question above an answer, for slash
    commands, whose question nobody else sees."""
    match reply:
        case Answered() | Declined():
            return render_answer(reply, asked_by=asked_by)
        case DocumentList():
            return render_document_list(reply)
    return [render_text(_reply_text(reply))]


def _reply_text(reply: Reply) -> str:
    """The mrkdwn of a reply that is a single short message."""
    if isinstance(reply, Help):
        return _help_text()
    return one_line_reply(reply, "slack", escape=escape, code=lambda reference: f"`{reference}`",
                          warning=":warning: ")


def _help_text() -> str:
    return "\n".join([f"*{wording.HELP_LEAD}* {wording.HELP_ABOUT}", *(f"• {p}" for p in wording.HELP["slack"])])


def render_text(text: str) -> SlackMessage:
    """A short reply we wrote ourselves, dynamic parts already escaped: `text` is trusted mrkdwn."""
    return SlackMessage(text=clip(text, MAX_FALLBACK_CHARS), blocks=(section(clip(text, MAX_TEXT_CHARS)),))


def render_document_list(reply: DocumentList) -> list[SlackMessage]:
    """The workspace's uploaded documents, newest last, split over messages like an answer."""
    if not reply.records:
        return [render_text(wording.NO_DOCUMENTS["slack"])]
    lines = [f"*{wording.DOCUMENTS_HEADER}* {wording.documents_header(len(reply.records), 'slack')}"] + [
        "• " + wording.document_line(escape(r.filename), r.pages, r.passages, f"<@{escape(r.uploader)}>",
                                     r.uploaded_at[:10])
        for r in reply.records
    ]
    return pack([Group((section(chunk),), chunk) for chunk in chunks("\n".join(lines))], wording.SOURCE_LINE)


def render_answer(reply: Answered | Declined, *, asked_by: str | None = None) -> list[SlackMessage]:
    """The answer (or why it is declined) as one or more messages, the question repeated when `asked_by`."""
    answer = reply.answer
    groups: list[Group] = []
    if asked_by:
        who = f"<@{asked_by}>"
        echo = f"*{wording.asked(who)}*\n{quote(escape(answer.question))}"
        groups.append(Group((section(clip(echo, MAX_TEXT_CHARS)),),
                             f"{wording.asked(who)} {escape(answer.question)}"))
    if isinstance(reply, Declined):
        groups += _declined(reply)
    else:
        groups += _statements(reply)
        groups += _citations(answer.citations)
    groups += _context_lines(reply)
    return pack(groups, wording.SOURCE_LINE)


def _statements(reply: Answered) -> list[Group]:
    """The model's own sentences, a markdown block each, ending with links to the provisions they do not name."""
    groups = []
    for statement in reply.answer.statements:
        if statement.text is None:  # the quotes below speak for themselves
            continue
        unnamed = [c for c in {c.label: c for c in statement.citations}.values() if c.label not in statement.text]
        # A document's label holds the file name its uploader chose: Slack's own `<…>` forms must stay inert too.
        named = [markdown.link(c.label, c.url) if c.url else escape_markdown(c.label) for c in unnamed]
        links = f" ({'; '.join(named)})" if unnamed else ""
        labels = f" [{'; '.join(c.label for c in unnamed)}]" if unnamed else ""
        blocks = tuple(markdown_block(chunk) for chunk in chunks(escape_markdown(statement.text) + links))
        groups.append(Group(blocks, escape(statement.text + labels)))
    return groups


def _declined(reply: Declined) -> list[Group]:
    header = f":grey_question: *{wording.DECLINED_HEADER}*"
    groups = [Group((section(header),), wording.DECLINED_HEADER + ".")]
    for chunk in chunks(wording.declined(reply.reason, reply.missing)):
        groups.append(Group((section(chunk),), chunk))
    return groups


def _citations(citations: tuple[Citation, ...]) -> list[Group]:
    regulation = [c for c in citations if c.kind != "document"]
    documents = [c for c in citations if c.kind == "document"]
    groups = [_citation(c) for c in regulation]
    for i, citation in enumerate(documents):
        group = _citation(citation)
        if i == 0:  # the header travels with the first document so it never ends a message on its own
            group = Group((context(f":page_facing_up: *{wording.DOCUMENTS_HEADER}*"),) + group.blocks, group.fallback)
        groups.append(group)
    return groups


def _citation(citation: Citation) -> Group:
    """The provision linked to its paragraph on EUR-Lex (or the document and page), its heading, the quote."""
    label = f"*{_link(citation.url, citation.label)}*" + (f" · {escape(citation.title)}" if citation.title else "")
    quoted = quote(escape(citation.quote))
    first, *rest = chunks(f"{label}\n{quoted}")
    blocks = (section(first),) + tuple(section(chunk) for chunk in rest)
    return Group(blocks, f"{escape(citation.label)}: “{escape(citation.quote)}”")


def _context_lines(reply: Answered | Declined) -> list[Group]:
    groups = []
    if isinstance(reply, Declined) and reply.related:
        links = ", ".join(_link(p.url, p.label) for p in reply.related)
        groups.append(Group((context(f"{wording.RELATED_HEADER} {links}"),), ""))
    for notice in reply.answer.notices:
        groups.append(Group((context(f":information_source: {wording.NOTICES[notice]}"),), ""))
    footer = (context(wording.SOURCE_LINE), _feedback_buttons(reply.answer.request_id))
    groups.append(Group(footer, ""))
    return groups


def _link(url: str, label: str) -> str:
    """`<url|label>` for http(s) URLs; other schemes (and blanks) render as the bare label."""
    if urlsplit(url).scheme not in ("http", "https"):
        return escape(label)
    safe_url = url.replace("&", "&amp;").replace("<", "%3C").replace(">", "%3E").replace("|", "%7C")
    return f"<{safe_url}|{escape(label).replace('|', '¦')}>"


def _feedback_buttons(request_id: str) -> dict:
    """Slack's own 👍/👎 under an AI app's answer; a click's value names the answer and the verdict."""

    def button(helpful: bool, text: str, label: str) -> dict:
        return {"text": {"type": "plain_text", "text": text}, "accessibility_label": label,
                "value": feedback_value(request_id, helpful)}

    return {"type": "context_actions", "elements": [{
        "type": "feedback_buttons", "action_id": FEEDBACK,
        "positive_button": button(True, wording.FEEDBACK_HELPFUL, wording.FEEDBACK_HELPFUL_LABEL),
        "negative_button": button(False, wording.FEEDBACK_NOT_HELPFUL, wording.FEEDBACK_NOT_HELPFUL_LABEL),
    }]}


__all__ = ["FEEDBACK", "FEEDBACK_DOWN", "FEEDBACK_UP", "escape", "escape_markdown", "feedback_value", "read_feedback",
           "render", "render_answer", "render_document_list", "render_text"]
