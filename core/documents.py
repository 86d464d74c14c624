"""A workspace's uploaded documents: stored, listed, forgotten and searched, never seen by other workspaces.

Each workspace has its own Chroma collection (the vectors) and its own JSON state file (the chunks
and their metadata). The state file is the record of what exists: BM25 and `list` are built from it,
and Chroma vectors it does not name are ignored and cleared away, so a crash between the two stores
never shows a half-added or half-forgotten document.

A document is identified by its file name (case-insensitively, as users refer to it) and by its
content: uploading a file with the name or the SHA-256 of a stored one replaces that one.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import uuid
from collections.abc import Sequence
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
from corpus.documents import DocumentChunk, IngestedDocument

_KIND = "document"
# Dense hits beyond this depth get the lowest similarity seen: they would not make the top k anyway.
_DENSE_DEPTH = 100
_DENSE_WEIGHT = 1.0
_WORDS_WEIGHT = 1.0
_GRAMS_WEIGHT = 0.35


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
    def __init__(self, client: chromadb.ClientAPI, embedder: Embedder, state_dir: Path):
        self._client = client
        self._embedder = embedder
        self._state_dir = Path(state_dir)
        self._state_dir.mkdir(parents=True, exist_ok=True)
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
        with self._lock:
            collection = self._collection(workspace)
        # Embedding is the slow part: done outside the lock, under a generation no one else uses.
        try:
            collection.add(_entries(stored, self._embedder), extra={"generation": stored.generation})
            with self._lock:
                documents = self._shelf(workspace).documents
                replaced = [d for d in documents if _replaces(doc, d.record)]
                kept = tuple(d for d in documents if not _replaces(doc, d.record))
                if any(d.record.upload_id == record.upload_id for d in kept):
                    raise ValueError(f"upload id {record.upload_id!r} is already used by another document")
                self._commit(workspace, (*kept, stored))
        except BaseException:
            collection.delete({"generation": stored.generation})
            raise
        for old in replaced:
            collection.delete({"generation": old.generation})
        return record

    def list(self, workspace: str) -> list[DocumentRecord]:
        with self._lock:
            return [d.record for d in self._shelf(workspace).documents]

    def forget(self, workspace: str, filename: str) -> DocumentRecord | None:
        """Remove the document of that name (case-insensitively); None if there is none."""
        with self._lock:
            documents = self._shelf(workspace).documents
            gone = next((d for d in documents if _same_name(d.record.filename, filename)), None)
            if gone is None:
                return None
            self._commit(workspace, tuple(d for d in documents if d is not gone))
            collection = self._collection(workspace)
        collection.delete({"generation": gone.generation})
        return gone.record

    def search(self, workspace: str, query: str, k: int = 5, min_similarity: float = -1.0) -> list[Passage]:
        """The workspace's best `k` chunks for `query`: cosine similarity and BM25 (words stemmed in the
        query's language, and character n-grams for any other), fused by z-score sum. Chunks whose
        cosine similarity to the query is below `min_similarity` are left out: z-scores rank, but only
        an absolute similarity says whether a chunk is about the question at all."""
        with self._lock:
            shelf = self._shelf(workspace)
            if not shelf.documents:
                return []
            lang = detect_language(query)
            lexical = self._lexical(shelf, lang)
            collection = self._collection(workspace)
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

    # The helpers below run under self._lock.

    def _state_path(self, workspace: str) -> Path:
        return self._state_dir / f"{self._name(workspace)}.json"

    @staticmethod
    def _name(workspace: str) -> str:
        """Chroma collection and state file name: workspace ids may hold any character."""
        return "documents-" + hashlib.sha256(workspace.encode()).hexdigest()[:32]

    def _shelf(self, workspace: str) -> _Shelf:
        shelf = self._shelves.get(workspace)
        if shelf is None:
            path = self._state_path(workspace)
            documents: tuple[_Document, ...] = ()
            if path.is_file():
                documents = tuple(_Document.from_json(d) for d in json.loads(path.read_text("utf-8"))["documents"])
            shelf = self._shelves[workspace] = _Shelf(documents)
        return shelf

    def _commit(self, workspace: str, documents: Sequence[_Document]) -> None:
        """Write the state file atomically (a crash leaves the old or the new one), then publish it."""
        path = self._state_path(workspace)
        payload = {"workspace": workspace, "documents": [d.to_json() for d in documents]}
        fd, tmp = tempfile.mkstemp(dir=self._state_dir, prefix=path.stem, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(payload, out, ensure_ascii=False)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._shelves[workspace] = _Shelf(tuple(documents))

    def _collection(self, workspace: str) -> VectorCollection:
        collection = self._collections.get(workspace)
        if collection is None:
            collection = VectorCollection(self._client, self._embedder, self._name(workspace))
            collection.open_or_create()
            self._reconcile(collection, self._shelf(workspace).documents)
            self._collections[workspace] = collection
        return collection

    def _reconcile(self, collection: VectorCollection, documents: Sequence[_Document]) -> None:
        """Bring Chroma in line with the state file: clear vectors of uploads that were never committed
        or whose removal was interrupted, and re-embed everything if the collection was emptied (a new
        embedding model, a fresh Chroma server)."""
        if not documents:
            return
        if collection.size == 0:
            for doc in documents:
                collection.add(_entries(doc, self._embedder), extra={"generation": doc.generation})
            return
        collection.delete({"generation": {"$nin": [d.generation for d in documents]}})

    def _lexical(self, shelf: _Shelf, lang: str) -> LexicalIndex:
        index = shelf.lexical.get(lang)
        if index is None:
            index = shelf.lexical[lang] = LexicalIndex.build([c.indexed_text for _, c in shelf.rows], lang)
        return index
