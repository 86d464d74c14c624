"""BM25 (rank-bm25) over one language's provisions: stemmed words, and character n-grams for the
compounds and inflections a stemmer does not join."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rank_bm25 import BM25Okapi

from core.text import char_ngrams, tokenize


class LexicalIndex:
    def __init__(self, documents: Sequence[str], lang: str):
        self.lang = lang
        self._words = BM25Okapi([tokenize(d, lang) for d in documents])
        self._grams = BM25Okapi([char_ngrams(d) for d in documents])

    def word_scores(self, text: str) -> np.ndarray:
        return self._words.get_scores(tokenize(text, self.lang))

    def gram_scores(self, text: str) -> np.ndarray:
        return self._grams.get_scores(char_ngrams(text))
