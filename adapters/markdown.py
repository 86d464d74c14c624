"""Standard markdown made inert: what users, models and PDFs wrote, shown as the characters they typed wherever a
platform reads markdown (Teams messages, Slack's markdown blocks). No emphasis, code, links, HTML, headings or lists
come out of it, and nothing that a client would turn into a link by itself."""
from __future__ import annotations

import re
from urllib.parse import urlsplit

_SYNTAX = re.compile(r"([\\`*_~\[\]()#|{}!])")
_SYNTAX_AND_HTML = re.compile(r"([\\`*_~\[\]()#|{}!<>&])")
_BULLET = re.compile(r"^(\s*)([-+])(?=\s)", re.MULTILINE)
_NUMBERED = re.compile(r"^(\s*\d+)\.(?=\s)", re.MULTILINE)
# Clients link bare URLs and addresses themselves; a zero-width space after the scheme, "www" or "@" keeps them text.
_AUTOLINK = re.compile(r"(?i)\b(?:https?|ftp|file)(?=://)|\bmailto(?=:)|\bwww(?=\.)|(?<=\w)@(?=\w)")


def escape(text: str, *, entities: bool = False) -> str:
    """`text` as inert markdown. With `entities`, `&`, `<` and `>` become `&amp;`, `&lt;` and `&gt;` (which markdown
    shows as those characters) instead of backslash escapes: for Slack, whose own `<…>` syntax outlives markdown."""
    if entities:
        text = _SYNTAX.sub(r"\\\1", text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))
    else:
        text = _SYNTAX_AND_HTML.sub(r"\\\1", text)
    text = _NUMBERED.sub(r"\1\\.", _BULLET.sub(r"\1\\\2", text))
    return _AUTOLINK.sub(lambda m: m.group(0) + "\u200b", text)


def link(label: str, url: str) -> str:
    """`[label](url)` for an http(s) URL from the corpus; without one (a document, whose label holds the file name
    its uploader chose) the label as inert text."""
    if urlsplit(url).scheme not in ("http", "https"):
        return escape(label)
    text = label.replace("[", "\\[").replace("]", "\\]")
    return f"[{text}]({url.replace('(', '%28').replace(')', '%29').replace(' ', '%20')})"


__all__ = ["escape", "link"]
