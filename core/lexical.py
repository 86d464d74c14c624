"""BM25 (rank-bm25) over one language's provisions: stemmed words, and character n-grams for the
compounds and inflections a stemmer does not join."""
from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from rank_bm25 import BM25Okapi

from core.provisions import ProvisionStore
from core.text import char_ngrams, tokenize


class LexicalIndex:
    def __init__(self, documents: Sequence[str], lang: str, *, grams: bool = True):
        self.lang = lang
        self._words = BM25Okapi([tokenize(d, lang) for d in documents])
        # n-grams cost about ten times the memory of words; indexes that never use them skip them.
        self._grams = BM25Okapi([char_ngrams(d) for d in documents]) if grams else None

    def word_scores(self, text: str) -> np.ndarray:
        return self._words.get_scores(tokenize(text, self.lang))

    def gram_scores(self, text: str) -> np.ndarray:
        if self._grams is None:
            raise ValueError("this index was built without character n-grams")
        return self._grams.get_scores(char_ngrams(text))


class LexicalIndexes:
    """The BM25 indexes of one corpus, per language and built on first use (most deployments see a
    handful of languages): over the provisions, and over the provision guides where a language has one."""

    def __init__(self, store: ProvisionStore, load_guides: Callable[[str], Mapping[str, Sequence[str]]]):
        self._store = store
        self._load_guides = load_guides
        self._provisions: dict[str, LexicalIndex] = {}
        self._guides: dict[str, LexicalIndex | None] = {}
        self._lock = threading.Lock()

    def language(self, lang: str) -> LexicalIndex:
        with self._lock:
            if lang not in self._provisions:
                # The heading is part of what a provision is about ("Right to erasure"), so BM25 sees it once.
                documents = [f"{p.title}. {p.text}" for p in self._store.provisions(lang)]
                self._provisions[lang] = LexicalIndex(documents, lang)
            return self._provisions[lang]

    def guide(self, lang: str) -> LexicalIndex | None:
        with self._lock:
            if lang not in self._guides:
                guides = self._load_guides(lang)
                # English questions have the dense model for inflection and paraphrase; other languages
                # lean on character n-grams ("gemeldet" vs "melden").
                self._guides[lang] = LexicalIndex(
                    [" ".join(guides.get(pid, ())) for pid in self._store.ids], lang, grams=lang != "en") if guides else None
            return self._guides[lang]
