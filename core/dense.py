"""Dense vectors in Chroma: one collection per body of text, rebuilt only when the model or the text changes."""
from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import chromadb
import numpy as np

from core.embedding import Embedder
from core.models import Provision

# Bumped when what is embedded changes (chunking, entry kinds), so stored vectors are rebuilt.
INDEX_SCHEMA = 3
MATRIX_PAGE = 500  # vectors per Chroma read when loading them into memory
_SENTENCE_END = re.compile(r"(?<=[.;:])\s+(?=(?:\([a-z]+\)\s)|[A-Z(])")


def open_chroma(index_dir: Path, host: str | None = None, port: int = 8000) -> chromadb.ClientAPI:
    """The embedded store under the data dir, or a Chroma server when `host` is set."""
    settings = chromadb.Settings(anonymized_telemetry=False)
    if host:
        return chromadb.HttpClient(host=host, port=port, settings=settings)
    index_dir.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(index_dir / "chroma"), settings=settings)


@dataclass(frozen=True)
class Entry:
    """One embedded text. `key` is what a hit scores (a provision id, an article number, a document
    chunk id); several entries may share a key (chunks of a long provision) and are max-pooled."""

    key: str
    kind: str
    text: str


def fingerprint(entries: Iterable[Entry]) -> str:
    digest = hashlib.sha256()
    for e in entries:
        digest.update(json.dumps([e.key, e.kind, e.text], ensure_ascii=False).encode())
    return digest.hexdigest()[:16]


def chunk_text(text: str, embedder: Embedder) -> list[str]:
    """Windows of whole sentences/points within the model's token limit, so long provisions
    (processor contracts, transfer derogations) are embedded to their end, not truncated."""
    limit = embedder.max_tokens - 16
    if embedder.count_tokens(text) <= limit:
        return [text]
    chunks: list[str] = []
    current: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        if current and embedder.count_tokens(" ".join(current + [sentence])) > limit:
            chunks.append(" ".join(current))
            current = []
        current.append(sentence)
    chunks.append(" ".join(current))
    return chunks


REGULATION_KINDS = ("text", "guide", "title")


def provision_entries(provisions: Sequence[Provision], guides: Mapping[str, Sequence[str]],
                      embedder: Embedder) -> list[Entry]:
    """The Regulation's entries: provision text chunks, guide lines, article headings."""
    entries = [Entry(p.id, "text", chunk) for p in provisions for chunk in chunk_text(p.text, embedder)]
    entries += [Entry(p.id, "guide", line) for p in provisions for line in guides.get(p.id, ()) if line.strip()]
    entries += [Entry(str(article), "title", title) for article, title in dict((p.article, p.title) for p in provisions).items()]
    return entries


def best_per_key(similarities: Sequence[float], kinds: Sequence[str], keys: Sequence[str]) -> dict[str, dict[str, float]]:
    """Cosine similarity per kind and key: the best entry of each key."""
    best: dict[str, dict[str, float]] = {}
    for similarity, kind, key in zip(similarities, kinds, keys):
        per_key = best.setdefault(kind, {})
        if similarity > per_key.get(key, -1.0):
            per_key[key] = float(similarity)
    return best


@dataclass(frozen=True)
class DenseMatrix:
    """A collection's vectors held in memory and searched exactly: for the Regulation's few thousand entries
    this costs a millisecond, and unlike an approximate graph it ranks the same on every machine, so the
    scores (and what the abstention model learned from them) do not depend on where the index was built."""

    vectors: np.ndarray  # entries × dimensions, normalised
    kinds: tuple[str, ...]
    keys: tuple[str, ...]

    @property
    def size(self) -> int:
        return len(self.keys)

    def search(self, query_vector: np.ndarray, n_results: int | None = None) -> dict[str, dict[str, float]]:
        """As VectorCollection.search, exactly: the nearest `n_results` entries (all by default)."""
        if not self.size:
            return {}
        similarities = self.vectors @ query_vector.astype(np.float32)
        n = min(n_results or self.size, self.size)
        nearest = np.argpartition(-similarities, n - 1)[:n] if n < self.size else np.arange(self.size)
        return best_per_key(similarities[nearest], [self.kinds[i] for i in nearest], [self.keys[i] for i in nearest])


class VectorCollection:
    def __init__(self, client: chromadb.ClientAPI, embedder: Embedder, name: str):
        self._client = client
        self._embedder = embedder
        self.name = name
        self._collection = None

    def ensure(self, entries: Sequence[Entry], *, rebuild: bool = False, progress: bool = False) -> bool:
        """Open the stored collection, or (re)build it when missing, stale or `rebuild`. True if built."""
        expected = {"model": self._embedder.model_id, "fingerprint": fingerprint(entries), "schema": INDEX_SCHEMA}
        if not rebuild and self._open_matching(expected):
            return False
        self.drop()
        self._collection = self._create(expected)
        # A build comes before any question is served, so it may have every core.
        self.add(entries, progress=progress, workers=len(os.sched_getaffinity(0)))
        return True

    def open_or_create(self) -> None:
        """For collections that grow by `add` (uploaded documents): same model, or start afresh."""
        expected = {"model": self._embedder.model_id, "schema": INDEX_SCHEMA}
        if not self._open_matching(expected):
            self.drop()
            self._collection = self._create(expected)

    def _open_matching(self, expected: dict) -> bool:
        if self.name not in {c.name for c in self._client.list_collections()}:
            return False
        collection = self._client.get_collection(self.name, embedding_function=None)
        stored = collection.metadata or {}
        if any(stored.get(k) != v for k, v in expected.items()):
            return False
        self._collection = collection
        return True

    def _create(self, metadata: dict):
        return self._client.create_collection(self.name, embedding_function=None, metadata=metadata,
                                              configuration={"hnsw": {"space": "cosine"}})

    def drop(self) -> None:
        if self.name in {c.name for c in self._client.list_collections()}:
            self._client.delete_collection(self.name)
        self._collection = None

    def add(self, entries: Sequence[Entry], *, extra: Mapping[str, str | int] | None = None, progress: bool = False,
            workers: int = 1) -> None:
        if not entries:
            return
        vectors = self._embedder.embed([e.text for e in entries], progress=progress, workers=workers)
        seen: dict[tuple[str, str], int] = {}
        ids = []
        for e in entries:
            n = seen[(e.kind, e.key)] = seen.get((e.kind, e.key), -1) + 1
            ids.append(f"{e.kind}:{e.key}:{n}")
        for start in range(0, len(entries), 256):
            batch = entries[start:start + 256]
            self._collection.add(
                ids=ids[start:start + 256],
                embeddings=vectors[start:start + 256].tolist(),
                metadatas=[{"key": e.key, "kind": e.kind, **(extra or {})} for e in batch],
                documents=[e.text for e in batch],
            )

    def delete(self, where: Mapping[str, str | int]) -> None:
        self._collection.delete(where=dict(where))

    @property
    def size(self) -> int:
        return self._collection.count()

    def matrix(self, kinds: Collection[str]) -> DenseMatrix:
        """The stored vectors of these kinds, in memory, for exact search."""
        # In pages: one `get` of every vector costs Chroma about 30 times the vectors' size at its peak.
        vectors: list[np.ndarray] = []
        metadatas: list[Mapping] = []
        while True:
            page = self._collection.get(where={"kind": {"$in": list(kinds)}}, include=["embeddings", "metadatas"],
                                        limit=MATRIX_PAGE, offset=len(metadatas))
            if not page["metadatas"]:
                break
            vectors.append(np.asarray(page["embeddings"], dtype=np.float32))
            metadatas.extend(page["metadatas"])
        matrix = np.concatenate(vectors) if vectors else np.zeros((0, 0), dtype=np.float32)
        return DenseMatrix(matrix, tuple(m["kind"] for m in metadatas), tuple(m["key"] for m in metadatas))

    def search(self, query_vector: np.ndarray, n_results: int | None = None) -> dict[str, dict[str, float]]:
        """Cosine similarity per kind and key (best entry of each key), over the nearest `n_results`
        entries (all of them by default)."""
        size = self.size
        if size == 0:
            return {}
        result = self._collection.query(query_embeddings=[query_vector.tolist()], n_results=min(n_results or size, size),
                                        include=["distances", "metadatas"])
        metadatas = result["metadatas"][0]
        return best_per_key([1.0 - float(d) for d in result["distances"][0]], [m["kind"] for m in metadatas],
                            [m["key"] for m in metadatas])
