"""Reranking of the fused top candidates, behind one small interface."""
from __future__ import annotations

from typing import Protocol

from core.embedding import ModelLoadError
from core.provisions import ProvisionStore

Ranked = list[tuple[str, float]]


class Reranker(Protocol):
    def rerank(self, query: str, ranked: Ranked, store: ProvisionStore) -> Ranked:
        """Reorder (provision id, score) pairs, best first."""
        ...


class FusedOrder:
    """The offline default, needing no model: the fused order stands."""

    def rerank(self, query: str, ranked: Ranked, store: ProvisionStore) -> Ranked:
        return ranked


class CrossEncoderReranker:
    """A sentence-transformers CrossEncoder (e.g. cross-encoder/ms-marco-MiniLM-L6-v2) scoring
    (question, English provision text) pairs."""

    def __init__(self, model: str):
        from sentence_transformers import CrossEncoder

        try:
            self._model = CrossEncoder(model, device="cpu")
        except OSError as exc:
            raise ModelLoadError(f"Could not load reranker model {model!r}: {exc}") from None

    def rerank(self, query: str, ranked: Ranked, store: ProvisionStore) -> Ranked:
        if not ranked:
            return ranked
        pairs = [(query, store.get(pid).text) for pid, _ in ranked]
        scores = self._model.predict(pairs, show_progress_bar=False)
        return sorted(((pid, float(s)) for (pid, _), s in zip(ranked, scores)), key=lambda x: -x[1])
