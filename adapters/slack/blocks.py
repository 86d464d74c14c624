"""Block Kit layout within Slack's limits: groups of blocks that must stay together (a citation's label and its
quote), split at line ends, never leaving a quote's continuation unquoted, and packed into as few messages as fit."""
from __future__ import annotations

import json
from dataclasses import dataclass

# Slack's hard limits: 3,000 characters per text object, 50 blocks per message, 12,000 characters of markdown blocks
# in all per message; and a whole message is refused (msg_blocks_too_long) from about 13,000 characters, measured
# (slackapi/bolt-js#2509). A message's blocks are kept within 12,000 characters of JSON, which is longer still.
MAX_TEXT_CHARS = 3000
MAX_BLOCKS = 50
MAX_MARKDOWN_CHARS = 12_000
MAX_MESSAGE_CHARS = 12_000
# Notifications and conversations.replies show the fallback text; it need not carry the whole answer.
MAX_FALLBACK_CHARS = 3000


@dataclass(frozen=True)
class SlackMessage:
    """One chat message: `text` is the notification / screen-reader fallback, always non-empty."""

    text: str
    blocks: tuple[dict, ...]


@dataclass(frozen=True)
class Group:
    """Blocks that must stay in the same message, and their part of its fallback text."""

    blocks: tuple[dict, ...]
    fallback: str


def pack(groups: list[Group], fallback: str) -> list[SlackMessage]:
    """Fill messages group by group; a group too big for any message is the only thing split, at blocks.
    `fallback` is the text of a message whose groups bring none."""
    fitting: list[Group] = []
    for group in groups:
        if _too_big(group.blocks):
            fitting += [Group((block,), group.fallback if i == 0 else "") for i, block in enumerate(group.blocks)]
        else:
            fitting.append(group)
    messages: list[list[Group]] = [[]]
    for group in fitting:
        current = messages[-1]
        if current and _too_big([b for g in current for b in g.blocks] + list(group.blocks)):
            messages.append([group])
        else:
            current.append(group)
    return [SlackMessage(clip("\n".join(g.fallback for g in gs if g.fallback) or fallback, MAX_FALLBACK_CHARS),
                         tuple(b for g in gs for b in g.blocks)) for gs in messages]


def chunks(text: str, limit: int = MAX_TEXT_CHARS) -> list[str]:
    """Split at line ends (else spaces) into pieces of at most `limit` characters.

    A quoted line (">…") cut in two keeps the ">" on its continuation, so it still renders as a quote.
    """
    text = text.strip("\n")
    if not text:
        return []
    pieces: list[str] = []
    current = ""
    for line in text.split("\n"):
        while len(line) > limit:
            cut = line.rfind(" ", 0, limit)
            cut = cut if cut > limit // 2 else limit
            head, line = line[:cut], line[cut:].lstrip(" ")
            if line and head.startswith(">"):
                line = ">" + line
            current = _flush(pieces, current, head, limit)
        current = _flush(pieces, current, line, limit)
    if current:
        pieces.append(current)
    return pieces


def _flush(pieces: list[str], current: str, line: str, limit: int) -> str:
    candidate = f"{current}\n{line}" if current else line
    if len(candidate) <= limit:
        return candidate
    pieces.append(current)
    return line


def quote(text: str) -> str:
    return "\n".join(">" + line for line in text.split("\n"))


def markdown_block(text: str) -> dict:
    """Standard markdown, which Slack renders as it renders an AI app's streamed text; `text` is already inert
    where it came from users, models or PDFs (`adapters.markdown.escape`)."""
    return {"type": "markdown", "text": text}


def section(text: str) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text, "verbatim": True}}


def context(text: str) -> dict:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": clip(text, MAX_TEXT_CHARS), "verbatim": True}]}


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _too_big(blocks) -> bool:
    markdown_chars = sum(len(b["text"]) for b in blocks if b["type"] == "markdown")
    return len(blocks) > MAX_BLOCKS or markdown_chars > MAX_MARKDOWN_CHARS or _size(blocks) > MAX_MESSAGE_CHARS


def _size(blocks) -> int:
    return len(json.dumps(list(blocks), ensure_ascii=False))


__all__ = ["Group", "MAX_BLOCKS", "MAX_FALLBACK_CHARS", "MAX_MARKDOWN_CHARS", "MAX_MESSAGE_CHARS", "MAX_TEXT_CHARS",
           "SlackMessage", "chunks", "clip", "context", "markdown_block", "pack", "quote", "section"]
