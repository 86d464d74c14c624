"""Dense vectors of the provisions in Chroma, rebuilt only when the model or the corpus changes."""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path

import chromadb
import numpy as np

from core.embedding import Embedder
from core.models import Provision

# Bumped when what is embedded changes (chunking, title handling), so stored vectors are rebuilt.
INDEX_SCHEMA = 2
_SENTENCE_END = re.compile(r"(?<=[.;:])\s+(?=(?:\([a-z]+\)\s)|[A-Z(])")


def open_chroma(index_dir: Path, host: str | None = None, port: int = 8000) -> chromadb.ClientAPI:
    """The embedded store under the data dir, or a Chroma server when `host` is set."""
    settings = chromadb.Settings(anonymized_telemetry=False)
    if host:
        return chromadb.HttpClient(host=host, port=port, settings=settings)
    index_dir.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(index_dir / "chroma"), settings=settings)


def corpus_hash(provisions: Sequence[Provision]) -> str:
    digest = hashlib.sha256()
    for p in provisions:
        digest.update(json.dumps([p.id, p.title, p.text], ensure_ascii=False).encode())
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
        candidate = " ".join(current + [sentence])
        if current and embedder.count_tokens(candidate) > limit:
            chunks.append(" ".join(current))
            current = [current[0], sentence] if len(chunks) == 1 else [sentence]
        else:
            current.append(sentence)
    chunks.append(" ".join(current))
    return chunks


class DenseIndex:
    """One Chroma collection of provision chunks (max-pooled back to provisions at query time)
    and article titles (for the article-level score)."""

    def __init__(self, client: chromadb.ClientAPI, embedder: Embedder, name: str = "gdpr-provisions-en"):
        self._client = client
        self._embedder = embedder
        self._name = name
        self._collection = None

    def ensure(self, provisions: Sequence[Provision], *, rebuild: bool = False, progress: bool = False) -> bool:
        """Open the stored collection, or (re)build it when missing, stale or `rebuild`. True if built."""
        expected = {"model": self._embedder.model_id, "corpus": corpus_hash(provisions), "schema": INDEX_SCHEMA}
        existing = next((c for c in self._client.list_collections() if c.name == self._name), None)
        if existing is not None and not rebuild:
            collection = self._client.get_collection(self._name, embedding_function=None)
            stored = collection.metadata or {}
            if all(stored.get(k) == v for k, v in expected.items()) and collection.count() > 0:
                self._collection = collection
                return False
        if existing is not None:
            self._client.delete_collection(self._name)
        self._collection = self._build(provisions, expected, progress)
        return True

    def _build(self, provisions: Sequence[Provision], metadata: dict, progress: bool):
        ids, texts, metadatas = [], [], []
        for p in provisions:
            for n, chunk in enumerate(chunk_text(p.text, self._embedder)):
                ids.append(f"{p.id}#{n}")
                texts.append(chunk)
                metadatas.append({"provision": p.id, "article": p.article, "kind": "text"})
        for article, title in dict((p.article, p.title) for p in provisions).items():
            ids.append(f"title:{article}")
            texts.append(title)
            metadatas.append({"provision": "", "article": article, "kind": "title"})
        vectors = self._embedder.embed(texts, progress=progress)
        collection = self._client.create_collection(
            self._name, embedding_function=None, metadata=metadata, configuration={"hnsw": {"space": "cosine"}}
        )
        for start in range(0, len(ids), 256):
            end = start + 256
            collection.add(ids=ids[start:end], embeddings=vectors[start:end].tolist(),
                           metadatas=metadatas[start:end], documents=texts[start:end])
        return collection

    @property
    def size(self) -> int:
        return self._collection.count()

    def search(self, query_vector: np.ndarray) -> tuple[dict[str, float], dict[int, float]]:
        """Cosine similarity of every provision (best chunk) and every article title to the query."""
        result = self._collection.query(
            query_embeddings=[query_vector.tolist()], n_results=self.size, include=["distances", "metadatas"]
        )
        provisions: dict[str, float] = {}
        titles: dict[int, float] = {}
        for distance, meta in zip(result["distances"][0], result["metadatas"][0]):
            similarity = 1.0 - float(distance)
            if meta["kind"] == "title":
                titles[int(meta["article"])] = similarity
            elif similarity > provisions.get(meta["provision"], -1.0):
                provisions[meta["provision"]] = similarity
        return provisions, titles
