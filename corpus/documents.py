"""Uploaded PDFs → citable page chunks: pure ingestion (bytes in, value out), refusing what cannot be read.

Chunks never cross a page boundary, so every quote has exactly one page to cite. A chunk starts at
each heading (a few short lines set larger than the body text, or wholly bold) and holds at most about
`MAX_CHUNK_CHARS` characters of body text, split between paragraphs, else between sentences.

The PDF is parsed in a child process, never in the bot: a small file can make the parser use gigabytes
(a 1.2 MB page of one million text operators takes PyMuPDF to 1.4 GB) or spin for minutes. The child
runs under a hard address-space limit and a wall-clock timeout, at a lower CPU priority, and stops at the
first page with more characters than any real page holds, or as soon as the document has more text or
passages than allowed; whatever it hits comes back as a `DocumentRejected` with a one-line reason. The
bot itself never imports PyMuPDF, and what it receives is bounded by the caps.

The child's code and the parent's limits live in one module on purpose: what the child may do and what the
parent enforces must change together.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections import Counter
from collections.abc import Iterator
from itertools import groupby
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pymupdf

log = logging.getLogger(__name__)

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


# Defaults of the limits the settings can change (GDPRBOT_MAX_UPLOAD_CHARS, GDPRBOT_MAX_UPLOAD_PASSAGES,
# GDPRBOT_UPLOAD_PARSE_TIMEOUT_S, GDPRBOT_UPLOAD_PARSE_MEMORY_MB), chosen so that any ordinary document within
# the page limit passes: 500 pages of dense text hold about 2.5 M characters and 3,000 passages, and a
# generated 500-page policy (1.4 M characters, 1,552 passages) is read in 1.5 s within 150 MB.
DEFAULT_MAX_CHARS = 3_000_000
DEFAULT_MAX_PASSAGES = 5_000
DEFAULT_PARSE_TIMEOUT_S = 30.0
DEFAULT_PARSE_MEMORY_MB = 1024
# A page of 4-point text holds about 40,000 characters; the million-operator bomb has 1,000,000 on one page.
MAX_PAGE_CHARS = 100_000

# At most this many readers at once, so that a burst of uploads cannot take the machine's memory either.
_READERS = threading.BoundedSemaphore(2)
_PACKAGE_ROOT = Path(__file__).resolve().parent.parent
# The child imports this module from this source tree (not from whichever copy is installed).
_CHILD = "import sys; sys.path.insert(0, sys.argv[1]); from corpus.documents import _child_main; _child_main()"
_CHILD_FILE_LIMIT = 16 * 2**20  # what the child may write to its error log: MuPDF warnings are chatty
_READER_NICENESS = 10
_CHILD_ENV = frozenset({"PATH", "HOME", "LANG", "TMPDIR", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME",
                        "VIRTUAL_ENV", "SYSTEMROOT"})


class _Refusal(Exception):
    """Raised in the child: `code` and `detail` say why, the parent words the reply."""

    def __init__(self, code: str, **detail: Any):
        super().__init__(code)
        self.code = code
        self.detail = detail


def ingest_pdf(data: bytes, filename: str, *, max_bytes: int, max_pages: int, max_chars: int = DEFAULT_MAX_CHARS,
               max_passages: int = DEFAULT_MAX_PASSAGES, timeout_s: float = DEFAULT_PARSE_TIMEOUT_S,
               memory_mb: int = DEFAULT_PARSE_MEMORY_MB) -> IngestedDocument:
    """The PDF's chunks, read in a child process limited to `memory_mb` MB of address space and `timeout_s`
    seconds. Raises DocumentRejected, with the reason to show, for anything it will not index."""
    if len(data) > max_bytes:
        raise DocumentRejected(too_large(filename, max_bytes))
    # By content, not by name: a renamed image or Word file must not reach the parser.
    if b"%PDF-" not in data[:1024]:
        raise DocumentRejected(f"{filename} is not a PDF file.")
    limits = {"max_pages": max_pages, "max_chars": max_chars, "max_passages": max_passages,
              "timeout_s": timeout_s, "memory_mb": memory_mb}
    result = _read_in_child(data, filename, limits)
    if "refused" in result:
        raise DocumentRejected(_reason(filename, result["refused"], result.get("detail", {}), limits))
    chunks = tuple(DocumentChunk(**c) for c in result["chunks"])
    return IngestedDocument(hashlib.sha256(data).hexdigest(), filename, result["page_count"], chunks)


def _reason(filename: str, code: str, detail: dict, limits: dict) -> str:
    """The one line the user is shown for a refusal from the child."""
    if code == "password":
        return f"{filename} is password-protected; upload a copy without a password."
    if code == "no_pages":
        return f"{filename} is damaged and could not be read (no pages found)."
    if code == "pages":
        return f"{filename} has {detail['pages']} pages; the limit is {limits['max_pages']}."
    if code == "chars":
        return f"{filename} has more text than the {limits['max_chars']:,}-character limit."
    if code == "passages":
        return f"{filename} has more passages than the {limits['max_passages']:,}-passage limit."
    if code == "no_text":
        return (f"{filename} has no extractable text; it looks like a scanned document. Run OCR on it first, "
                "then upload it again.")
    if code == "page_chars":
        return f"{filename} is too complex to read safely (page {detail['page']} has over {MAX_PAGE_CHARS:,} characters)."
    if code == "memory":
        return (f"{filename} is too complex to read safely (reading it needs more than "
                f"{limits['memory_mb']:,} MB of memory).")
    if code == "timeout":
        return f"{filename} is too complex to read safely (reading it takes longer than {limits['timeout_s']:g} s)."
    if code == "crashed":
        return f"{filename} is too complex to read safely (the PDF reader stopped on it)."
    return f"{filename} is damaged and could not be read."


def _read_in_child(data: bytes, filename: str, limits: dict) -> dict:
    """Run the reader on `data`; its answer, or {"refused": code} when it timed out or died. The child is
    always gone when this returns or raises (killed if need be)."""
    timeout = limits["timeout_s"]
    with _READERS, tempfile.TemporaryFile() as errors:
        child = subprocess.Popen([sys.executable, "-c", _CHILD, str(_PACKAGE_ROOT), json.dumps(limits)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, env=_child_env())
        try:
            out, _ = child.communicate(data, timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            log.warning("Reading %s took longer than %g s; the reader was stopped", filename, timeout)
            return {"refused": "timeout"}
        finally:
            if child.poll() is None:  # interrupted: never leave the reader behind
                child.kill()
                child.wait()
        if child.returncode == 0:
            try:
                return json.loads(out)
            except ValueError:
                pass
        errors.seek(max(0, os.fstat(errors.fileno()).st_size - 2000))
        tail = errors.read().decode("utf-8", "replace").strip()
    if child.returncode in (-signal.SIGXCPU, -signal.SIGALRM):  # the child's own time limits
        return {"refused": "timeout"}
    if "reader could not start" in tail:
        # Not the document's fault: the memory limit is too small for PyMuPDF itself.
        raise RuntimeError(f"The PDF reader cannot start within GDPRBOT_UPLOAD_PARSE_MEMORY_MB="
                           f"{limits['memory_mb']}: {tail[-300:]}")
    log.warning("The PDF reader stopped on %s (exit status %s): %s", filename, child.returncode, tail[-500:])
    # At the address-space limit, an allocation can fail where nothing turns it into a MemoryError (glibc
    # aborts: "cannot allocate memory for thread-local data"); a SIGKILL we did not send is the OOM killer.
    if child.returncode == -signal.SIGKILL or re.search(r"memory|alloc", tail, re.IGNORECASE):
        return {"refused": "memory"}
    return {"refused": "crashed"}


def _child_env() -> dict[str, str]:
    """What the reader needs of the bot's environment, and nothing else: the file it reads is untrusted, and
    the bot's environment holds its tokens and keys."""
    return {k: v for k, v in os.environ.items() if k in _CHILD_ENV or k.startswith("LC_")}


def _child_main() -> None:
    """The reader process: limits from argv, the PDF on stdin, one JSON object on stdout."""
    import resource

    limits = json.loads(sys.argv[2])
    memory = limits["memory_mb"] * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    # Bounds on the child's own life, should the bot die before it: CPU seconds, and a wall-clock alarm.
    seconds = math.ceil(limits["timeout_s"]) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (_CHILD_FILE_LIMIT, _CHILD_FILE_LIMIT))
    signal.alarm(seconds + 1)
    # Reading competes with questions for the CPU (a bomb for the whole timeout): questions go first.
    os.nice(_READER_NICENESS)
    # The answer goes to the original stdout; anything else printed (PyMuPDF messages) goes to stderr.
    answer = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    # PyMuPDF 2 imports its layout and Markdown add-ons when they are installed: an ONNX model and its
    # runtime, 450 MB of address space and 0.2 s that reading text never uses.
    sys.modules.update({"pymupdf.layout": None, "pymupdf4llm": None})
    try:
        import pymupdf
    except Exception as exc:  # MemoryError, or ImportError when a library cannot be mapped
        print(f"reader could not start: {exc!r}", file=sys.stderr)
        sys.exit(3)
    data = sys.stdin.buffer.read()
    try:
        result: dict = _read(pymupdf, data, limits)
    except _Refusal as refusal:
        result = {"refused": refusal.code, "detail": refusal.detail}
    except MemoryError:
        result = {"refused": "memory"}
    json.dump(result, answer)
    answer.close()


def _read(pymupdf, data: bytes, limits: dict) -> dict:
    """In the child: the chunks of `data`, page by page, stopping at the first limit it exceeds."""
    def failed(exc: Exception) -> _Refusal:
        # MuPDF reports an allocation refused by the address-space limit as an error like any other
        # ("code=2: calloc (4104 x 1 bytes) failed").
        return _Refusal("memory" if re.search(r"alloc|out of memory", str(exc), re.IGNORECASE) else "damaged")

    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except (RuntimeError, ValueError, pymupdf.mupdf.FzErrorBase) as exc:
        raise failed(exc) from None
    with doc:
        if doc.needs_pass:
            raise _Refusal("password")
        if doc.page_count == 0:
            raise _Refusal("no_pages")
        if doc.page_count > limits["max_pages"]:
            raise _Refusal("pages", pages=doc.page_count)
        pages, chars = [], 0
        try:
            for page in doc:
                textpage = page.get_textpage(flags=pymupdf.TEXTFLAGS_TEXT)
                # Counted before the page is turned into Python objects, which can take 1 kB a character
                # (and PyMuPDF, short of memory there, does not fail but goes on slower and slower).
                page_chars = len(textpage.extractText())
                if page_chars > MAX_PAGE_CHARS:
                    raise _Refusal("page_chars", page=page.number + 1)
                chars += page_chars
                if chars > limits["max_chars"]:
                    raise _Refusal("chars")
                pages.append(_page_lines(page, pymupdf.TEXTFLAGS_TEXT, textpage))
                del textpage
        except (RuntimeError, ValueError, pymupdf.mupdf.FzErrorBase) as exc:
            raise failed(exc) from None
        page_count = doc.page_count
    chunks = []
    for chunk in _chunks(pages):
        if len(chunks) == limits["max_passages"]:
            raise _Refusal("passages")
        chunks.append(asdict(chunk))
    if not chunks:
        raise _Refusal("no_text")
    return {"page_count": page_count, "chunks": chunks}


def _page_lines(page: pymupdf.Page, flags: int, textpage: pymupdf.TextPage) -> _Page:
    blocks = []
    for raw in page.get_text("dict", flags=flags, textpage=textpage)["blocks"]:
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
