"""Answers as Slack Block Kit messages: escaping, layout, and splitting within Slack's limits.

Pure functions only (no I/O), so every rule about what users see can be unit-tested.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from core.documents import DocumentRecord
from core.library import too_large
from core.models import Answer, Citation, Passage

SOURCE_LINE = "Source: Regulation (EU) 2016/679, consolidated text incl. 2018 corrigendum · not legal advice"
ABSTAIN_HEADER = "The Regulation doesn't cover this"
DOCUMENTS_HEADER = "From your organisation's documents"
FEEDBACK_UP = "feedback_up"
FEEDBACK_DOWN = "feedback_down"

# Slack's hard limits are 3,000 characters per text object and 50 blocks per message; a whole message
# is kept well under the ~12,000 characters Slack's clients render before truncating.
MAX_TEXT_CHARS = 3000
MAX_BLOCKS = 50
MAX_MESSAGE_CHARS = 8000
# Notifications and conversations.replies show the fallback text; it need not carry the whole answer.
MAX_FALLBACK_CHARS = 3000

HELP_TEXT = (
    "*I answer questions about the GDPR (Regulation (EU) 2016/679).* Every answer quotes the Regulation "
    "and links to EUR-Lex, or says plainly that the Regulation doesn't cover the question. Not legal advice.\n"
    "• Mention me in a channel with your question: I answer in the thread, and later mentions in that "
    "thread keep its context.\n"
    "• Send me a direct message.\n"
    "• `/gdpr <question>` answers in the channel; `/gdpr -p <question>` answers only you.\n"
    "• `/gdpr docs` (or a mention of me with `docs`) lists your organisation's documents, which answers "
    "in this workspace may quote.\n"
    "• Admins add a PDF by sending it to me in a direct message, or by sharing it in a channel with a mention "
    "of me. `/gdpr forget <file name>` (or a mention with `forget <file name>`) removes one.\n"
    "• `/gdpr help` shows this message."
)
UPLOADS_DISABLED = "Document uploads are not enabled on this bot."
FORGET_USAGE = "Which document? Use `forget <file name>`, e.g. `forget Retention policy.pdf`; `docs` lists them."


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
    """Make user or model text safe to echo as mrkdwn.

    Escaping `&`, `<` and `>` turns every `<!channel>`, `<@U…>` or `<url|label>` into literal text; the
    zero-width space keeps a bare "@here" from being parsed by clients that still link names.
    """
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _BROADCASTS.sub("@\u200b\\1", escaped)


_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|([^>]*))?>")
_CHANNEL = re.compile(r"<#(C[A-Z0-9]+)(?:\|([^>]*))?>")
_SPECIAL = re.compile(r"<!([a-z]+)(?:\^[^|>]*)?(?:\|([^>]*))?>")
_LINK = re.compile(r"<([^<>|]+)(?:\|([^<>]*))?>")


def to_plain(text: str, *, bot_user_id: str | None = None) -> str:
    """Slack's encoded message text → the plain text a person typed, without the bot's own mention."""

    def mention(m: re.Match[str]) -> str:
        if m.group(1) == bot_user_id:
            return ""
        return "@" + (m.group(2) or m.group(1))

    text = _MENTION.sub(mention, text)
    text = _CHANNEL.sub(lambda m: "#" + (m.group(2) or m.group(1)), text)
    text = _SPECIAL.sub(lambda m: m.group(2) or "@" + m.group(1), text)
    text = _LINK.sub(lambda m: m.group(2) or m.group(1), text)
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return re.sub(r"[ \t]+", " ", text).strip()


def render_text(text: str) -> SlackMessage:
    """A short reply we wrote ourselves (help, apology, rejection reason): `text` is trusted mrkdwn."""
    return SlackMessage(text=_clip(text, MAX_FALLBACK_CHARS), blocks=(_section(_clip(text, MAX_TEXT_CHARS)),))


def indexed_text(record: DocumentRecord) -> str:
    """The confirmation of an upload: "Indexed X.pdf: 3 pages, 5 passages"."""
    return f"Indexed {escape(record.filename)}: {_counts(record)}"


def forgotten_text(filename: str, removed: DocumentRecord | None) -> str:
    if removed is None:
        return f"No document named {escape(filename)}."
    return f"Removed {escape(removed.filename)}."


def too_large_text(filename: str, max_bytes: int) -> str:
    """Worded as the core words it, for a file refused before it is downloaded."""
    return escape(too_large(filename, max_bytes))


def download_failed_text(filename: str) -> str:
    return (f":warning: I couldn't download {escape(filename)} from Slack. Please share it again; if this keeps "
            "happening, the app may be missing the `files:read` scope.")


def render_document_list(records: list[DocumentRecord]) -> list[SlackMessage]:
    """The workspace's uploaded documents, newest last, split over messages like an answer."""
    if not records:
        return [render_text("No documents have been added in this workspace yet. Admins add a PDF by sending it "
                            "to me in a direct message, or by sharing it in a channel with a mention of me.")]
    header = f"*{DOCUMENTS_HEADER}* ({len(records)}), which answers in this workspace may quote:"
    lines = [header] + [
        f"• {escape(r.filename)}: {_counts(r)} · added by <@{escape(r.uploader)}> on {r.uploaded_at[:10]}"
        for r in records
    ]
    return _pack([_Group((_section(chunk),), chunk) for chunk in _chunks("\n".join(lines), MAX_TEXT_CHARS)])


def _counts(record: DocumentRecord) -> str:
    return f"{_plural(record.pages, 'page')}, {_plural(record.passages, 'passage')}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def render_answer(answer: Answer, *, asked_by: str | None = None, question: str | None = None) -> list[SlackMessage]:
    """The answer as one or more messages; `asked_by`/`question` repeat the question (slash commands hide it)."""
    groups: list[_Group] = []
    if asked_by and question:
        echo = f"*<@{asked_by}> asked:*\n{_quote(escape(question))}"
        groups.append(_Group((_section(_clip(echo, MAX_TEXT_CHARS)),), f"<@{asked_by}> asked: {escape(question)}"))
    groups += _abstention(answer) if answer.abstained else _statements(answer)
    groups += _citations(answer.citations)
    groups += _context_lines(answer)
    return _pack(groups)


def _statements(answer: Answer) -> list[_Group]:
    lines = []
    for statement in answer.statements:
        labels = [answer.citations[i].label for i in statement.citations if 0 <= i < len(answer.citations)]
        missing = [label for label in dict.fromkeys(labels) if label not in statement.text]
        suffix = f" [{'; '.join(missing)}]" if missing else ""
        lines.append(escape(statement.text + suffix))
    return [_Group((_section(chunk),), chunk) for chunk in _chunks("\n".join(lines), MAX_TEXT_CHARS)]


def _abstention(answer: Answer) -> list[_Group]:
    header = f":grey_question: *{ABSTAIN_HEADER}*"
    # The core's own abstention sentence often repeats the header; showing it twice reads as a glitch.
    explanation = [s.text for s in answer.statements if _norm(s.text) != _norm(ABSTAIN_HEADER)]
    groups = [_Group((_section(header),), ABSTAIN_HEADER + ".")]
    for chunk in _chunks(escape("\n".join(explanation)), MAX_TEXT_CHARS):
        groups.append(_Group((_section(chunk),), chunk))
    return groups


def _citations(citations: tuple[Citation, ...]) -> list[_Group]:
    regulation = [c for c in citations if c.kind != "document"]
    documents = [c for c in citations if c.kind == "document"]
    groups = [_citation(c) for c in regulation]
    for i, citation in enumerate(documents):
        group = _citation(citation)
        if i == 0:  # the header travels with the first document so it never ends a message on its own
            group = _Group((_context(f":page_facing_up: *{DOCUMENTS_HEADER}*"),) + group.blocks, group.fallback)
        groups.append(group)
    return groups


def _citation(citation: Citation) -> _Group:
    label = f"*{_link(citation.url, citation.label)}*"
    quoted = _quote(escape(citation.quote))
    first, *rest = _chunks(f"{label}\n{quoted}", MAX_TEXT_CHARS)
    blocks = (_section(first),) + tuple(_section(chunk) for chunk in rest)
    return _Group(blocks, f"{escape(citation.label)}: “{escape(citation.quote)}”")


def _context_lines(answer: Answer) -> list[_Group]:
    groups = []
    if answer.abstained and answer.related:
        links = ", ".join(_link(p.url, p.label) for p in _unique(answer.related))
        groups.append(_Group((_context(f"Related provisions (not an answer): {links}"),), ""))
    if answer.notice:
        groups.append(_Group((_context(f":information_source: {escape(answer.notice)}"),), ""))
    footer = (_context(SOURCE_LINE), _feedback_buttons(answer.request_id))
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
    fallback = "\n".join(g.fallback for g in groups if g.fallback) or SOURCE_LINE
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


def _unique(passages: tuple[Passage, ...]) -> list[Passage]:
    return list({p.label: p for p in passages}.values())


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
             "text": {"type": "plain_text", "text": "👍 Helpful", "emoji": True}},
            {"type": "button", "action_id": FEEDBACK_DOWN, "value": request_id,
             "text": {"type": "plain_text", "text": "👎 Not helpful", "emoji": True}},
        ],
    }


def _size(blocks) -> int:
    return len(json.dumps(list(blocks), ensure_ascii=False))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _norm(text: str) -> str:
    return re.sub(r"[^a-z]", "", text.replace("’", "'").lower())


__all__ = [
    "ABSTAIN_HEADER", "DOCUMENTS_HEADER", "FEEDBACK_DOWN", "FEEDBACK_UP", "FORGET_USAGE", "HELP_TEXT", "MAX_BLOCKS",
    "MAX_MESSAGE_CHARS", "MAX_TEXT_CHARS", "SOURCE_LINE", "UPLOADS_DISABLED", "SlackMessage",
    "download_failed_text", "escape", "forgotten_text", "indexed_text", "render_answer", "render_document_list",
    "render_text", "to_plain", "too_large_text",
]
