"""Uploaded PDFs → citable page chunks: pure ingestion (bytes in, value out), refusing what cannot be read.

Chunks never cross a page boundary, so every quote has exactly one page to cite. A chunk starts at
each heading (a few short lines set larger than the body text, or wholly bold) and holds at most about
`MAX_CHUNK_CHARS` characters of body text, split between paragraphs, else between sentences.
"""
from __future__ import annotations

import hashlib
import re
import textwrap
from collections import Counter
from collections.abc import Iterator
from itertools import groupby
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pymupdf

MAX_CHUNK_CHARS = 1200
_MAX_HEADING_CHARS = 150
_HEADING_SIZE_RATIO = 1.15
_BOLD = 16  # span flag bit
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")
_SOFT_HYPHEN_BREAK = re.compile(r"(?<=[^\W\d_])-$")


class DocumentRejected(Exception):
    """The upload cannot be used; `reason` is shown to the user as is."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class DocumentChunk:
    chunk_id: str  # unique within the document, stable for the same file
    page_start: int  # 1-based
    page_end: int
    heading: str | None  # the section heading in force, possibly from an earlier page
    text: str  # the page text, verbatim but for whitespace and words rejoined at line-end hyphens


@dataclass(frozen=True)
class IngestedDocument:
    sha256: str
    filename: str
    page_count: int
    chunks: tuple[DocumentChunk, ...]


@dataclass(frozen=True)
class _Line:
    text: str
    size: float  # the dominant font size, by characters
    bold: bool  # every span bold


_Page = list[list[_Line]]  # the page's text blocks, each a list of lines


def too_large(filename: str, max_bytes: int) -> str:
    """The refusal for a file over the limit (settings give the limit in MB of 2**20 bytes)."""
    return f"{filename} is larger than the {max_bytes / 2**20:.3g} MB limit."


def ingest_pdf(data: bytes, filename: str, *, max_bytes: int, max_pages: int) -> IngestedDocument:
    if len(data) > max_bytes:
        raise DocumentRejected(too_large(filename, max_bytes))
    # By content, not by name: a renamed image or Word file must not reach the parser.
    if b"%PDF-" not in data[:1024]:
        raise DocumentRejected(f"{filename} is not a PDF file.")
    # Imported on the first upload: PyMuPDF costs over 100 MB of memory that answering questions never needs.
    import pymupdf

    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except (RuntimeError, ValueError, pymupdf.mupdf.FzErrorBase):
        raise DocumentRejected(f"{filename} is damaged and could not be read.") from None
    with doc:
        if doc.needs_pass:
            raise DocumentRejected(f"{filename} is password-protected; upload a copy without a password.")
        if doc.page_count == 0:
            raise DocumentRejected(f"{filename} is damaged and could not be read (no pages found).")
        if doc.page_count > max_pages:
            raise DocumentRejected(f"{filename} has {doc.page_count} pages; the limit is {max_pages}.")
        try:
            pages = [_page_lines(page, pymupdf.TEXTFLAGS_TEXT) for page in doc]
        except (RuntimeError, ValueError, pymupdf.mupdf.FzErrorBase):
            raise DocumentRejected(f"{filename} is damaged and could not be read.") from None
        page_count = doc.page_count
    chunks = tuple(_chunks(pages))
    if not chunks:
        raise DocumentRejected(
            f"{filename} has no extractable text; it looks like a scanned document. Run OCR on it first, then upload it again."
        )
    return IngestedDocument(hashlib.sha256(data).hexdigest(), filename, page_count, chunks)


def _page_lines(page: pymupdf.Page, flags: int) -> _Page:
    blocks = []
    for raw in page.get_text("dict", flags=flags)["blocks"]:
        lines = []
        for line in raw.get("lines", ()):
            text = " ".join("".join(span["text"] for span in line["spans"]).split())
            if not text:
                continue
            inked = [span for span in line["spans"] if span["text"].strip()]
            sizes: Counter[float] = Counter()
            for span in inked:
                sizes[round(span["size"] * 2) / 2] += len(span["text"])
            lines.append(_Line(text, sizes.most_common(1)[0][0], all(span["flags"] & _BOLD for span in inked)))
        if lines:
            blocks.append(lines)
    return blocks


def _join_lines(lines: list[str]) -> str:
    """A block's lines as one paragraph. A line ending in a hyphen before a lower-case word is taken as
    a word broken by justification ("employ-/ees" → "employees"), so the word can be quoted and searched;
    before anything else the hyphen is kept and the lines are joined without a space ("GDPR-/Compliant")."""
    text = lines[0]
    for line in lines[1:]:
        if _SOFT_HYPHEN_BREAK.search(text):
            text = text[:-1] + line if line[0].islower() else text + line
        else:
            text = f"{text} {line}"
    return text


def _body_size(pages: list[_Page]) -> float:
    sizes: Counter[float] = Counter()
    for blocks in pages:
        for block in blocks:
            for line in block:
                sizes[line.size] += len(line.text)
    return sizes.most_common(1)[0][0] if sizes else 0.0


def _paragraphs(block: list[_Line], body_size: float) -> Iterator[tuple[bool, str]]:
    """(is it a heading, text) of the runs of like-styled lines in a block: PyMuPDF often puts a
    heading set close above its paragraph in the same block."""
    for styled, run in groupby(block, key=lambda line: line.bold or line.size >= body_size * _HEADING_SIZE_RATIO):
        lines = [line.text for line in run]
        text = _join_lines(lines)
        # A long bold or large run is emphasised body text, not a heading.
        yield styled and len(lines) <= 3 and len(text) <= _MAX_HEADING_CHARS and any(c.isalpha() for c in text), text


def _pieces(text: str) -> list[str]:
    """A paragraph cut to chunk size: between sentences, or between words for a run-on sentence."""
    if len(text) <= MAX_CHUNK_CHARS:
        return [text]
    sentences = [part for s in _SENTENCE_END.split(text)
                 for part in textwrap.wrap(s, MAX_CHUNK_CHARS, break_on_hyphens=False)]
    pieces = [sentences[0]]
    for sentence in sentences[1:]:
        if len(pieces[-1]) + 1 + len(sentence) > MAX_CHUNK_CHARS:
            pieces.append(sentence)
        else:
            pieces[-1] += " " + sentence
    return pieces


def _chunks(pages: list[_Page]) -> Iterator[DocumentChunk]:
    body_size = _body_size(pages)
    heading: str | None = None
    for number, blocks in enumerate(pages, start=1):
        texts: list[tuple[str | None, str]] = []
        parts: list[str] = []
        parts_heading = heading
        body_chars = 0  # the headings a chunk opens with do not count, so none is left alone in a chunk
        for is_heading, paragraph in (p for block in blocks for p in _paragraphs(block, body_size)):
            for piece in [paragraph] if is_heading else _pieces(paragraph):
                if body_chars and (is_heading or body_chars + len(piece) > MAX_CHUNK_CHARS):
                    texts.append((parts_heading, "\n".join(parts)))
                    parts, body_chars = [], 0
                if is_heading:
                    heading = parts_heading = paragraph
                elif not parts:
                    parts_heading = heading
                parts.append(piece)
                body_chars += 0 if is_heading else len(piece)
        if parts:
            texts.append((parts_heading, "\n".join(parts)))
        for index, (chunk_heading, text) in enumerate(texts, start=1):
            yield DocumentChunk(f"p{number}c{index}", number, number, chunk_heading, text)
