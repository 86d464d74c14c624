"""Hybrid retrieval: the one pipeline the bot and the evals call.

question → language route → direct references | (dense on English + BM25 words/n-grams in the
question's language and English + lay vocabulary) → score fusion with an article-level term →
reranking → ranked provisions in the user's language.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from core.dense import VectorCollection
from core.embedding import Embedder
from core.language import detect_language
from core.lexical import LexicalIndexes
from core.models import Passage, Provision
from core.provisions import ProvisionStore
from core.references import referenced_provisions
from core.rerank import Reranker
from core.vocabulary import expand

FUSIONS = ("zsum", "rrf")


@dataclass(frozen=True)
class Weights:
    """Weights of the fused signals, each on a per-question z-score (or on 1/(k+rank) for rrf).

    Signals: `dense`/`guide_dense`/`title` are cosine similarities to the English provision text, guide
    lines and article headings; `words`/`grams` BM25 over the provisions in the question's language;
    `guide_words` BM25 over the English guide; `native_guide_words`/`native_guide_grams` over the guide in
    the question's language (stemmed words / character n-grams); `english_words` BM25 over the English provisions (for mixed-language questions).
    `article` adds each provision's best-in-article score: the right article first, then the paragraph.
    """

    dense: float = 0.0
    guide_dense: float = 0.0
    title: float = 0.0
    words: float = 0.0
    grams: float = 0.0
    guide_words: float = 0.0
    native_guide_words: float = 0.0
    native_guide_grams: float = 0.0
    english_words: float = 0.0
    article: float = 0.0

    def __post_init__(self):
        negative = [name for name, value in vars(self).items() if value < 0]
        if negative:
            raise ValueError(f"weights must be >= 0: {', '.join(negative)}")


# Chosen with `python -m evals.run_eval retrieval --sweep` on the visible set (see README). In English
# the provision guides carry most of the signal for lay wording and the legal text breaks ties; in other
# languages the English model reads noise, so the native guide and native BM25 lead.
ENGLISH = Weights(dense=0.2, guide_dense=2.0, title=0.05, words=0.1, grams=0.05, guide_words=6.0, article=1.2)
OTHER_LANGUAGES = Weights(dense=0.4, words=0.2, grams=0.1, guide_words=0.08, native_guide_words=3.0,
                          native_guide_grams=2.0, english_words=0.15, article=0.1)


@dataclass(frozen=True)
class RetrievalConfig:
    english: Weights = ENGLISH
    other: Weights = OTHER_LANGUAGES
    fusion: str = "zsum"
    vocabulary: bool = True
    expansion: float = 0.5  # weight of the lay-vocabulary terms relative to the question's own words
    expand_dense: bool = False  # the dense model reads lay wording well; expansion terms dilute it
    rrf_k: int = 60
    rerank_depth: int = 30
    dense_candidates: int = 200  # nearest entries read from Chroma; the rest count as no match

    def __post_init__(self):
        if self.fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {FUSIONS}, got {self.fusion!r}")
        if self.expansion < 0:
            raise ValueError("expansion must be >= 0")
        if self.rerank_depth < 1 or self.dense_candidates < 1:
            raise ValueError("rerank_depth and dense_candidates must be >= 1")


@dataclass(frozen=True)
class Retrieval:
    query: str  # what was searched: the question, made standalone when it was a follow-up
    lang: str
    passages: tuple[Passage, ...]
    referenced: tuple[str, ...]  # provision ids the question names explicitly
    # Best cosine similarity of the question to any provision text or guide line: how close the question
    # is to anything the Regulation is about (meaningful for English questions; the model is English).
    similarity: float = 0.0
    timings_ms: dict[str, float] = field(default_factory=dict)


def zscore(values: np.ndarray) -> np.ndarray:
    std = float(values.std())
    return (values - values.mean()) / std if std > 1e-9 else np.zeros_like(values)


def _rrf(values: np.ndarray, k: int) -> np.ndarray:
    ranks = np.empty(len(values))
    ranks[np.argsort(-values, kind="stable")] = np.arange(1, len(values) + 1)
    return 1.0 / (k + ranks)


class Retriever:
    def __init__(self, store: ProvisionStore, dense: VectorCollection, embedder: Embedder, reranker: Reranker,
                 config: RetrievalConfig, lexical: LexicalIndexes):
        self.store = store
        self.dense = dense
        self.lexical = lexical
        self.embedder = embedder
        self.reranker = reranker
        self.config = config

    @cached_property
    def _articles(self) -> np.ndarray:
        return np.array([p.article for p in self.store.provisions("en")])

    def with_config(self, config: RetrievalConfig) -> "Retriever":
        return Retriever(self.store, self.dense, self.embedder, self.reranker, config, self.lexical)

    def warm_up(self) -> None:
        """Build the English indexes and run one query now, so the first user does not wait for them."""
        self.run("What is personal data?")

    def run(self, query: str, *, k: int = 10, lang: str | None = None) -> Retrieval:
        started = time.perf_counter()
        lang = lang or detect_language(query, allowed=self.store.languages)
        referenced = referenced_provisions(query, self.store.ids)
        timings: dict[str, float] = {}
        signals = self.signals(query, lang, timings)
        similarity = float(max(signals["dense"].max(), signals["guide_dense"].max()))
        scores = self.fuse(signals, lang)
        order = list(np.argsort(-scores, kind="stable"))
        ids = self.store.ids
        ranked = [(ids[i], float(scores[i])) for i in order]
        t = time.perf_counter()
        ranked = self.reranker.rerank(query, ranked[: self.config.rerank_depth], self.store) + ranked[self.config.rerank_depth:]
        timings["rerank"] = (time.perf_counter() - t) * 1000
        if referenced:
            # Named provisions lead, scored just above the best search result.
            top = ranked[0][1] + 1.0
            ranked = [(pid, top) for pid in referenced] + [(pid, s) for pid, s in ranked if pid not in referenced]
        passages = tuple(self._passage(self.store.get(pid, lang), score) for pid, score in ranked[:k])
        timings["total"] = (time.perf_counter() - started) * 1000
        return Retrieval(query, lang, passages, tuple(referenced), similarity, timings)

    def signals(self, query: str, lang: str, timings: dict[str, float] | None = None) -> dict[str, np.ndarray]:
        """Every raw score of every provision for `query`, by signal name (see RetrievalConfig)."""
        timings = {} if timings is None else timings
        c = self.config
        expansion = expand(query) if c.vocabulary and lang == "en" else ""

        t = time.perf_counter()
        vector = self.embedder.embed_one(f"{query} {expansion}" if expansion and c.expand_dense else query)
        timings["embed"] = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        hits = self.dense.search(vector, self.config.dense_candidates)
        timings["dense"] = (time.perf_counter() - t) * 1000
        titles = hits.get("title", {})
        found = {
            "dense": self._per_provision(hits.get("text", {})),
            "guide_dense": self._per_provision(hits.get("guide", {})),
            "title": np.array([titles.get(str(a), 0.0) for a in self._articles]),
        }

        t = time.perf_counter()
        native = self.lexical.language(lang)
        found["words"] = native.word_scores(query)
        if expansion:
            found["words"] = found["words"] + c.expansion * native.word_scores(expansion)
        found["grams"] = native.gram_scores(query)
        if lang != "en":
            found["english_words"] = self.lexical.language("en").word_scores(query)
        guide = self.lexical.guide("en")
        if guide is not None:
            found["guide_words"] = guide.word_scores(query)
            if expansion:
                found["guide_words"] = found["guide_words"] + c.expansion * guide.word_scores(expansion)
        native_guide = self.lexical.guide(lang) if lang != "en" else None
        if native_guide is not None:
            found["native_guide_words"] = native_guide.word_scores(query)
            found["native_guide_grams"] = native_guide.gram_scores(query)
        timings["bm25"] = (time.perf_counter() - t) * 1000
        return found

    def fuse(self, signals: dict[str, np.ndarray], lang: str) -> np.ndarray:
        c = self.config
        weights = vars(c.english if lang == "en" else c.other)
        normalise = zscore if c.fusion == "zsum" else (lambda v: _rrf(v, c.rrf_k))
        fused = sum(weights[name] * normalise(values) for name, values in signals.items() if weights[name] > 0)
        return fused + weights["article"] * self._article_best(fused)

    def _per_provision(self, similarity: dict[str, float]) -> np.ndarray:
        floor = min(similarity.values(), default=0.0)
        return np.array([similarity.get(pid, floor) for pid in self.store.ids])

    def _article_best(self, scores: np.ndarray) -> np.ndarray:
        """Each provision gets its article's best score: the right article first, then the paragraph."""
        best = np.full(self._articles.max() + 1, -np.inf)
        np.maximum.at(best, self._articles, scores)
        return best[self._articles]

    @staticmethod
    def _passage(provision: Provision, score: float) -> Passage:
        return Passage(provision.id, provision.id, provision.text, provision.url, provision.lang, score)

