"""A workspace's uploaded documents: stored, listed, forgotten and searched, never seen by other workspaces.

Each workspace has its own Chroma collection (the vectors) and its own shelf (`core.storage`: the records,
chunks and their languages, in a JSON state file or in Postgres). The shelf is the record of what exists:
BM25 and `list` are built from it, and Chroma vectors it does not name are ignored and cleared away, so a
crash between the two stores never shows a half-added or half-forgotten document. A shared shelf (Postgres)
carries a version that every search compares, so an upload through one replica is searched by all of them
from their next question on.

A document is identified by its file name (case-insensitively, as users refer to it) and by its
content: uploading a file with the name or the SHA-256 of a stored one replaces that one.
"""
from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path

import chromadb
import numpy as np

from core.dense import Entry, VectorCollection, chunk_text
from core.embedding import Embedder
from core.language import detect_language
from core.lexical import LexicalIndex
from core.models import Passage
from core.retrieval import zscore
from core.storage.base import LibraryShelves, workspace_name
from core.storage.embedded import FileShelves
from corpus.documents import DocumentChunk, IngestedDocument

_KIND = "document"
# Dense hits beyond this depth get the lowest similarity seen: they would not make the top k anyway.
_DENSE_DEPTH = 100
_DENSE_WEIGHT = 1.0
_WORDS_WEIGHT = 1.0
_GRAMS_WEIGHT = 0.35
# On a shared shelf, vectors that no committed document names are cleared only once they are this old: younger
# ones may belong to an upload another replica is still embedding.
SHARED_UNCOMMITTED_GRACE_S = 3600.0


@dataclass(frozen=True)
class DocumentRecord:
    upload_id: str
    filename: str
    sha256: str
    pages: int
    passages: int
    uploader: str
    uploaded_at: str  # ISO 8601, UTC


@dataclass(frozen=True)
class _StoredChunk:
    chunk: DocumentChunk
    lang: str  # "" when the language could not be told

    @property
    def indexed_text(self) -> str:
        """What is embedded and BM25-indexed: the text under its section heading, which says what it is about."""
        heading = self.chunk.heading
        if heading and not self.chunk.text.startswith(heading):
            return f"{heading}\n{self.chunk.text}"
        return self.chunk.text


@dataclass(frozen=True)
class _Document:
    record: DocumentRecord
    generation: str  # names this upload's vectors in Chroma, distinct even when an upload id is reused
    chunks: tuple[_StoredChunk, ...]

    def to_json(self) -> dict:
        return {"record": asdict(self.record), "generation": self.generation,
                "chunks": [{**asdict(c.chunk), "lang": c.lang} for c in self.chunks]}

    @classmethod
    def from_json(cls, data: dict) -> _Document:
        chunks = tuple(_StoredChunk(DocumentChunk(**{k: v for k, v in c.items() if k != "lang"}), c["lang"])
                       for c in data["chunks"])
        return cls(DocumentRecord(**data["record"]), data["generation"], chunks)


@dataclass
class _Shelf:
    """One workspace's documents as last committed; replaced whole on every change, so a search
    holding it sees one consistent state."""

    documents: tuple[_Document, ...]
    version: int
    lexical: dict[str, LexicalIndex] = field(default_factory=dict)  # by query language, built on first use

    @cached_property
    def rows(self) -> list[tuple[_Document, _StoredChunk]]:
        return [(doc, chunk) for doc in self.documents for chunk in doc.chunks]


def _same_name(a: str, b: str) -> bool:
    return a.casefold() == b.casefold()


def _replaces(new: IngestedDocument, old: DocumentRecord) -> bool:
    return _same_name(new.filename, old.filename) or new.sha256 == old.sha256


def _entries(doc: _Document, embedder: Embedder) -> list[Entry]:
    # A chunk longer than the model's window is embedded in parts under one key (max-pooled at search).
    return [Entry(f"{doc.generation}:{c.chunk.chunk_id}", _KIND, part)
            for c in doc.chunks for part in chunk_text(c.indexed_text, embedder)]


def _label(filename: str, chunk: DocumentChunk) -> str:
    if chunk.page_start == chunk.page_end:
        return f"{filename}, p. {chunk.page_start}"
    return f"{filename}, pp. {chunk.page_start}–{chunk.page_end}"


class DocumentLibrary:
    def __init__(self, client: chromadb.ClientAPI, embedder: Embedder, shelves: LibraryShelves | Path):
        """`shelves`: where the documents are recorded; a directory is the embedded default (a JSON file per
        workspace)."""
        self._client = client
        self._embedder = embedder
        self._store = FileShelves(Path(shelves)) if isinstance(shelves, (str, Path)) else shelves
        self._shelves: dict[str, _Shelf] = {}
        self._collections: dict[str, VectorCollection] = {}
        self._lock = threading.Lock()

    def add(self, workspace: str, doc: IngestedDocument, *, uploader: str, upload_id: str | None = None) -> DocumentRecord:
        """Store `doc`, replacing any document of the same name or content. All or nothing: if embedding
        or storing fails, the workspace keeps exactly what it had."""
        record = DocumentRecord(
            upload_id=upload_id or uuid.uuid4().hex[:16], filename=doc.filename, sha256=doc.sha256,
            pages=doc.page_count, passages=len(doc.chunks), uploader=uploader,
            uploaded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )
        stored = _Document(record, uuid.uuid4().hex, tuple(_StoredChunk(c, detect_language(c.text, default=""))
                                                           for c in doc.chunks))

        def with_upload(documents: tuple[_Document, ...]) -> tuple[_Document, ...]:
            kept = tuple(d for d in documents if not _replaces(doc, d.record))
            if any(d.record.upload_id == record.upload_id for d in kept):
                raise ValueError(f"upload id {record.upload_id!r} is already used by another document")
            return (*kept, stored)

        collection = self._collection(workspace, self._shelf(workspace).documents)
        # Embedding is the slow part: done before the commit, under a generation no one else uses.
        try:
            collection.add(_entries(stored, self._embedder), extra=_vector_metadata(stored))
            replaced = self._commit(workspace, with_upload)
        except BaseException:
            collection.delete({"generation": stored.generation})
            raise
        for old in replaced:
            collection.delete({"generation": old.generation})
        return record

    def list(self, workspace: str) -> list[DocumentRecord]:
        return [d.record for d in self._shelf(workspace).documents]

    def forget(self, workspace: str, filename: str) -> DocumentRecord | None:
        """Remove the document of that name (case-insensitively); None if there is none."""
        shelf = self._shelf(workspace)
        if not any(_same_name(d.record.filename, filename) for d in shelf.documents):
            return None
        removed = self._commit(workspace, lambda documents: tuple(
            d for d in documents if not _same_name(d.record.filename, filename)))
        collection = self._collection(workspace, shelf.documents)
        for gone in removed:
            collection.delete({"generation": gone.generation})
        return removed[0].record if removed else None  # none: another replica removed it meanwhile

    def search(self, workspace: str, query: str, k: int = 5, min_similarity: float = -1.0) -> list[Passage]:
        """The workspace's best `k` chunks for `query`: cosine similarity and BM25 (words stemmed in the
        query's language, and character n-grams for any other), fused by z-score sum. Chunks whose
        cosine similarity to the query is below `min_similarity` are left out: z-scores rank, but only
        an absolute similarity says whether a chunk is about the question at all."""
        shelf = self._shelf(workspace)
        if not shelf.documents:
            return []
        lang = detect_language(query)
        with self._lock:
            lexical = self._lexical(shelf, lang)
        collection = self._collection(workspace, shelf.documents)
        rows = shelf.rows
        hits = collection.search(self._embedder.embed_one(query), _DENSE_DEPTH).get(_KIND, {})
        floor = min(hits.values(), default=0.0)
        dense = np.array([hits.get(f"{doc.generation}:{c.chunk.chunk_id}", floor) for doc, c in rows])
        scores = (_DENSE_WEIGHT * zscore(dense) + _WORDS_WEIGHT * zscore(lexical.word_scores(query))
                  + _GRAMS_WEIGHT * zscore(lexical.gram_scores(query)))
        passages = []
        ranked = [i for i in np.argsort(-scores, kind="stable") if dense[i] >= min_similarity]
        for i in ranked[:k]:
            doc, stored = rows[i]
            passages.append(Passage(
                source_id=f"doc:{doc.record.upload_id}:{stored.chunk.chunk_id}",
                label=_label(doc.record.filename, stored.chunk), text=stored.chunk.text, url="",
                lang=stored.lang, score=float(scores[i]), kind=_KIND, title=stored.chunk.heading or "",
            ))
        return passages

    def _shelf(self, workspace: str) -> _Shelf:
        """The workspace's documents as last committed by anyone: reloaded when the shelf's version moved."""
        version = self._store.version(workspace)
        with self._lock:
            shelf = self._shelves.get(workspace)
            if shelf is not None and shelf.version == version:
                return shelf
        version, documents = self._store.load(workspace)
        loaded = _Shelf(tuple(_Document.from_json(d) for d in documents), version)
        with self._lock:
            current = self._shelves.get(workspace)
            if current is None or current.version < version:
                self._shelves[workspace] = current = loaded
            return current

    def _commit(self, workspace: str, change: Callable[[tuple[_Document, ...]], tuple[_Document, ...]]
                ) -> list[_Document]:
        """Apply `change` to the workspace's latest documents, atomically, and publish the result; returns the
        documents it removed."""
        outcome: list[tuple[_Document, ...]] = []

        def apply(documents: list[dict]) -> list[dict]:
            before = tuple(_Document.from_json(d) for d in documents)
            after = change(before)
            outcome[:] = [before, after]
            return [d.to_json() for d in after]

        version = self._store.update(workspace, apply)
        before, after = outcome
        with self._lock:
            self._shelves[workspace] = _Shelf(after, version)
        kept = {d.generation for d in after}
        return [d for d in before if d.generation not in kept]

    def _collection(self, workspace: str, documents: Sequence[_Document]) -> VectorCollection:
        with self._lock:
            collection = self._collections.get(workspace)
            if collection is None:
                collection = VectorCollection(self._client, self._embedder, workspace_name(workspace))
                collection.open_or_create()
                self._reconcile(collection, documents)
                self._collections[workspace] = collection
            return collection

    def _reconcile(self, collection: VectorCollection, documents: Sequence[_Document]) -> None:
        """Bring Chroma in line with the shelf: clear vectors of uploads that were never committed
        or whose removal was interrupted, and re-embed everything if the collection was emptied (a new
        embedding model, a fresh Chroma server)."""
        if not documents:
            return
        if collection.size == 0:
            for doc in documents:
                collection.add(_entries(doc, self._embedder), extra=_vector_metadata(doc))
            return
        uncommitted: dict = {"generation": {"$nin": [d.generation for d in documents]}}
        if self._store.shared:
            uncommitted = {"$and": [uncommitted, {"added_at": {"$lt": int(time.time() - SHARED_UNCOMMITTED_GRACE_S)}}]}
        collection.delete(uncommitted)

    def _lexical(self, shelf: _Shelf, lang: str) -> LexicalIndex:
        """Under self._lock."""
        index = shelf.lexical.get(lang)
        if index is None:
            index = shelf.lexical[lang] = LexicalIndex.build([c.indexed_text for _, c in shelf.rows], lang)
        return index


def _vector_metadata(doc: _Document) -> dict[str, str | int]:
    return {"generation": doc.generation, "added_at": int(time.time())}
