"""Reply intents as Slack Block Kit messages: escaping, layout, and splitting within Slack's limits.

Pure functions only (no I/O), so every rule about what users see can be unit-tested. Everything that comes
from users, models or PDFs is escaped; the bot's own sentences come from `adapters.wording`.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from adapters import wording
from adapters.intents import (
    AdminsOnly,
    Answered,
    Declined,
    DocumentList,
    Failed,
    FeedbackNotFound,
    FeedbackRecorded,
    FileNameMissing,
    Forgotten,
    Help,
    Indexed,
    NoSuchDocument,
    NotDownloaded,
    Rejected,
    Reply,
    UploadRefused,
    UploadsDisabled,
)
from core.models import Citation

FEEDBACK_UP = "feedback_up"
FEEDBACK_DOWN = "feedback_down"

# Slack's hard limits are 3,000 characters per text object and 50 blocks per message; a whole message
# is kept well under the ~12,000 characters Slack's clients render before truncating.
MAX_TEXT_CHARS = 3000
MAX_BLOCKS = 50
MAX_MESSAGE_CHARS = 8000
# Notifications and conversations.replies show the fallback text; it need not carry the whole answer.
MAX_FALLBACK_CHARS = 3000


@dataclass(frozen=True)
class SlackMessage:
    """One chat message: `text` is the notification / screen-reader fallback, always non-empty."""

    text: str
    blocks: tuple[dict, ...]


@dataclass(frozen=True)
class _Group:
    """Blocks that must stay in the same message (a citation's label and its whole quote)."""

    blocks: tuple[dict, ...]
    fallback: str


_BROADCASTS = re.compile(r"@(channel|here|everyone)\b", re.IGNORECASE)


def escape(text: str) -> str:
    """Make user, model or document text safe to echo as mrkdwn.

    Escaping `&`, `<` and `>` turns every `<!channel>`, `<@U…>` or `<url|label>` into literal text; the
    zero-width space keeps a bare "@here" from being parsed by clients that still link names.
    """
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _BROADCASTS.sub("@\u200b\\1", escaped)


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
    match reply:
        case Help():
            return _help_text()
        case Rejected(reason=reason):
            return escape(wording.rejected(reason))
        case Failed(reference=reference, task=task, subject=subject):
            return ":warning: " + wording.apology(f"`{reference}`", task.value, escape(subject))
        case Forgotten(record=record):
            return wording.forgotten(escape(record.filename))
        case NoSuchDocument(filename=filename):
            return wording.no_such_document(escape(filename))
        case AdminsOnly(action=action):
            return wording.admins_only(action.value)
        case Indexed(record=record):
            return wording.indexed(escape(record.filename), record.pages, record.passages)
        case UploadRefused(reason=reason):
            return escape(reason)
        case NotDownloaded(filename=filename):
            return ":warning: " + wording.not_downloaded(escape(filename), "slack")
        case FileNameMissing():
            return wording.FILE_NAME_MISSING
        case UploadsDisabled():
            return wording.UPLOADS_DISABLED
        case FeedbackRecorded():
            return wording.FEEDBACK_RECORDED
        case FeedbackNotFound():
            return wording.FEEDBACK_NOT_FOUND
    raise TypeError(f"not a single-message reply: {reply!r}")


def _help_text() -> str:
    return "\n".join([f"*{wording.HELP_LEAD}* {wording.HELP_ABOUT}", *(f"• {p}" for p in wording.HELP["slack"])])


def render_text(text: str) -> SlackMessage:
    """A short reply we wrote ourselves, dynamic parts already escaped: `text` is trusted mrkdwn."""
    return SlackMessage(text=_clip(text, MAX_FALLBACK_CHARS), blocks=(_section(_clip(text, MAX_TEXT_CHARS)),))


def render_document_list(reply: DocumentList) -> list[SlackMessage]:
    """The workspace's uploaded documents, newest last, split over messages like an answer."""
    if not reply.records:
        return [render_text(wording.NO_DOCUMENTS["slack"])]
    lines = [f"*{wording.DOCUMENTS_HEADER}* {wording.documents_header(len(reply.records), 'slack')}"] + [
        "• " + wording.document_line(escape(r.filename), r.pages, r.passages, f"<@{escape(r.uploader)}>",
                                     r.uploaded_at[:10])
        for r in reply.records
    ]
    return _pack([_Group((_section(chunk),), chunk) for chunk in _chunks("\n".join(lines), MAX_TEXT_CHARS)])


def render_answer(reply: Answered | Declined, *, asked_by: str | None = None) -> list[SlackMessage]:
    """The answer (or why it is declined) as one or more messages, the question repeated when `asked_by`."""
    answer = reply.answer
    groups: list[_Group] = []
    if asked_by:
        who = f"<@{asked_by}>"
        echo = f"*{wording.asked(who)}*\n{_quote(escape(answer.question))}"
        groups.append(_Group((_section(_clip(echo, MAX_TEXT_CHARS)),),
                             f"{wording.asked(who)} {escape(answer.question)}"))
    if isinstance(reply, Declined):
        groups += _declined(reply)
    else:
        groups += _statements(reply)
        groups += _citations(answer.citations)
    groups += _context_lines(reply)
    return _pack(groups)


def _statements(reply: Answered) -> list[_Group]:
    lines = []
    for statement in reply.answer.statements:
        if statement.text is None:  # the quotes below speak for themselves
            continue
        labels = dict.fromkeys(c.label for c in statement.citations)
        missing = [label for label in labels if label not in statement.text]
        suffix = f" [{'; '.join(missing)}]" if missing else ""
        lines.append(escape(statement.text + suffix))
    return [_Group((_section(chunk),), chunk) for chunk in _chunks("\n".join(lines), MAX_TEXT_CHARS)]


def _declined(reply: Declined) -> list[_Group]:
    header = f":grey_question: *{wording.DECLINED_HEADER}*"
    groups = [_Group((_section(header),), wording.DECLINED_HEADER + ".")]
    for chunk in _chunks(wording.declined(reply.reason, reply.missing), MAX_TEXT_CHARS):
        groups.append(_Group((_section(chunk),), chunk))
    return groups


def _citations(citations: tuple[Citation, ...]) -> list[_Group]:
    regulation = [c for c in citations if c.kind != "document"]
    documents = [c for c in citations if c.kind == "document"]
    groups = [_citation(c) for c in regulation]
    for i, citation in enumerate(documents):
        group = _citation(citation)
        if i == 0:  # the header travels with the first document so it never ends a message on its own
            group = _Group((_context(f":page_facing_up: *{wording.DOCUMENTS_HEADER}*"),) + group.blocks, group.fallback)
        groups.append(group)
    return groups


def _citation(citation: Citation) -> _Group:
    label = f"*{_link(citation.url, citation.label)}*"
    quoted = _quote(escape(citation.quote))
    first, *rest = _chunks(f"{label}\n{quoted}", MAX_TEXT_CHARS)
    blocks = (_section(first),) + tuple(_section(chunk) for chunk in rest)
    return _Group(blocks, f"{escape(citation.label)}: “{escape(citation.quote)}”")


def _context_lines(reply: Answered | Declined) -> list[_Group]:
    groups = []
    if isinstance(reply, Declined) and reply.related:
        links = ", ".join(_link(p.url, p.label) for p in reply.related)
        groups.append(_Group((_context(f"{wording.RELATED_HEADER} {links}"),), ""))
    for notice in reply.answer.notices:
        groups.append(_Group((_context(f":information_source: {wording.NOTICES[notice]}"),), ""))
    footer = (_context(wording.SOURCE_LINE), _feedback_buttons(reply.answer.request_id))
    groups.append(_Group(footer, ""))
    return groups


def _pack(groups: list[_Group]) -> list[SlackMessage]:
    """Fill messages group by group; a group too big for any message is the only thing split, at blocks."""
    fitting: list[_Group] = []
    for group in groups:
        if len(group.blocks) > MAX_BLOCKS or _size(group.blocks) > MAX_MESSAGE_CHARS:
            fitting += [_Group((block,), group.fallback if i == 0 else "") for i, block in enumerate(group.blocks)]
        else:
            fitting.append(group)
    messages: list[list[_Group]] = [[]]
    for group in fitting:
        current = messages[-1]
        blocks = [b for g in current for b in g.blocks] + list(group.blocks)
        if current and (len(blocks) > MAX_BLOCKS or _size(blocks) > MAX_MESSAGE_CHARS):
            messages.append([group])
        else:
            current.append(group)
    return [_message(gs) for gs in messages]


def _message(groups: list[_Group]) -> SlackMessage:
    fallback = "\n".join(g.fallback for g in groups if g.fallback) or wording.SOURCE_LINE
    return SlackMessage(_clip(fallback, MAX_FALLBACK_CHARS), tuple(b for g in groups for b in g.blocks))


def _chunks(text: str, limit: int) -> list[str]:
    """Split at line ends (else spaces) into pieces of at most `limit` characters.

    A quoted line (">…") cut in two keeps the ">" on its continuation, so it still renders as a quote.
    """
    text = text.strip("\n")
    if not text:
        return []
    chunks: list[str] = []
    current = ""
    for line in text.split("\n"):
        while len(line) > limit:
            cut = line.rfind(" ", 0, limit)
            cut = cut if cut > limit // 2 else limit
            head, line = line[:cut], line[cut:].lstrip(" ")
            if line and head.startswith(">"):
                line = ">" + line
            current = _flush(chunks, current, head, limit)
        current = _flush(chunks, current, line, limit)
    if current:
        chunks.append(current)
    return chunks


def _flush(chunks: list[str], current: str, line: str, limit: int) -> str:
    candidate = f"{current}\n{line}" if current else line
    if len(candidate) <= limit:
        return candidate
    chunks.append(current)
    return line


def _quote(text: str) -> str:
    return "\n".join(">" + line for line in text.split("\n"))


def _link(url: str, label: str) -> str:
    """`<url|label>` for http(s) URLs; other schemes (and blanks) render as the bare label."""
    if urlsplit(url).scheme not in ("http", "https"):
        return escape(label)
    safe_url = url.replace("&", "&amp;").replace("<", "%3C").replace(">", "%3E").replace("|", "%7C")
    return f"<{safe_url}|{escape(label).replace('|', '¦')}>"


def _section(text: str) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text, "verbatim": True}}


def _context(text: str) -> dict:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": _clip(text, MAX_TEXT_CHARS), "verbatim": True}]}


def _feedback_buttons(request_id: str) -> dict:
    return {
        "type": "actions",
        "block_id": "feedback",
        "elements": [
            {"type": "button", "action_id": FEEDBACK_UP, "value": request_id,
             "text": {"type": "plain_text", "text": wording.FEEDBACK_HELPFUL, "emoji": True}},
            {"type": "button", "action_id": FEEDBACK_DOWN, "value": request_id,
             "text": {"type": "plain_text", "text": wording.FEEDBACK_NOT_HELPFUL, "emoji": True}},
        ],
    }


def _size(blocks) -> int:
    return len(json.dumps(list(blocks), ensure_ascii=False))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = [
    "FEEDBACK_DOWN", "FEEDBACK_UP", "MAX_BLOCKS", "MAX_MESSAGE_CHARS", "MAX_TEXT_CHARS", "SlackMessage", "escape",
    "render", "render_answer", "render_document_list", "render_text",
]
