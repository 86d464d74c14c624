"""Real PDFs made with PyMuPDF for the upload tests: a text policy, a scan, an encrypted file, a PNG, and a
PDF bomb of a million content-stream operators (raw PDF bytes, shared with the upload benchmark)."""
from __future__ import annotations

import functools

import pymupdf

from evals.doc_benchmark import operator_bomb_pdf

INVOICES = "Customer invoices are kept for ten years in the finance archive."
PAGES = (
    "Records retention policy of Example Ltd. This policy explains how long the company keeps its business records.",
    f"{INVOICES} After ten years the finance team shreds them.",
    "Job applications of rejected candidates are deleted six months after the vacancy has been filled.",
)
# The Regulation answers it (storage limitation) and so does the policy (how long the company keeps them).
QUESTION = "How long may we keep the personal data in customer invoices in the finance archive?"
# Only the policy answers it: what the company does is not in the Regulation.
FACT_QUESTION = "How long are customer invoices kept in the finance archive?"


@functools.cache
def text_pdf() -> bytes:
    doc = pymupdf.open()
    for text in PAGES:
        doc.new_page().insert_textbox(pymupdf.Rect(72, 72, 522, 770), text, fontsize=11, fontname="helv")
    return doc.tobytes()


def one_page_pdf(text: str) -> bytes:
    """A one-page text PDF of `text`, e.g. a prompt injection."""
    doc = pymupdf.open()
    doc.new_page().insert_textbox(pymupdf.Rect(72, 72, 522, 770), text, fontsize=11, fontname="helv")
    return doc.tobytes()


def scanned_pdf() -> bytes:
    doc = pymupdf.open()
    doc.new_page().draw_rect(pymupdf.Rect(72, 72, 300, 200), color=(0, 0, 0), fill=(0.8, 0.8, 0.8))
    return doc.tobytes()


def encrypted_pdf() -> bytes:
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "Confidential salary bands.", fontsize=11)
    return doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="x", owner_pw="y")


def png_bytes() -> bytes:
    doc = pymupdf.open()
    page = doc.new_page(width=60, height=60)
    page.draw_rect(pymupdf.Rect(10, 10, 50, 50), fill=(0, 0, 1))
    return page.get_pixmap().tobytes("png")


def page_text(data: bytes, number: int) -> str:
    with pymupdf.open(stream=data, filetype="pdf") as doc:
        return " ".join(doc[number - 1].get_text().split())


@functools.cache
def operator_bomb() -> bytes:
    """One page, 1.2 MB, 1,000,000 operators: PyMuPDF takes 1.4 GB to extract its text."""
    return operator_bomb_pdf(1_000_000)


@functools.cache
def slow_bomb() -> bytes:
    """100 pages of 60,000 operators each (one stream, 90,000 characters a page): each page is within the
    per-page limit, and all of them take over half a minute to read."""
    return operator_bomb_pdf(60_000, pages=100)
