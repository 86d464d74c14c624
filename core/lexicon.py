"""Word translation into English, learned from the Regulation's own aligned texts.

The 24 language versions say the same thing provision by provision, and every language's provision guide
is written entry by entry after the English one, so each language comes with a few thousand segments
aligned with English: article headings, paragraphs, guide descriptions, questions and keywords. A word's
English counterpart is the English word that occurs in the same segments most consistently (Dice
coefficient over segment co-occurrence). Translating a question word by word gives a rough English
paraphrase ("Kdo je předsedou dozorového úřadu?" → "who is chair supervisory authority") that the English
embedding model can read, so evidence learned in English carries to every language.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from core.provisions import ProvisionStore
from core.text import strip_accents, term_hashes, tokenize

# A word seen in fewer aligned segments than this has no reliable counterpart.
MIN_SEGMENTS = 2
MIN_DICE = 0.15
_ENGLISH_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*|\d+", re.UNICODE)

# (language file rows by id) for one guide pass: id → {"about", "asks", "keywords"}
GuideRows = Mapping[str, Mapping[str, object]]


@dataclass(frozen=True)
class Lexicon:
    """One language's words (as BM25 tokens: stemmed, accent-folded) and their English counterparts."""

    lang: str
    terms: np.ndarray  # uint64 sorted hashes of the language's tokens
    english: np.ndarray  # int32: index into `words` of each term's counterpart
    words: tuple[str, ...]  # English words

    def translate(self, text: str) -> str:
        """A word-by-word English rendering: each word by its counterpart, the rest (names, numbers) as written."""
        out = []
        for word in _WORD.findall(text):
            tokens = tokenize(word, self.lang)
            hashes = term_hashes(tokens[:1]) if tokens else None
            if hashes is not None and len(self.terms):
                at = min(int(np.searchsorted(self.terms, hashes[0])), len(self.terms) - 1)
                if self.terms[at] == hashes[0]:
                    out.append(self.words[int(self.english[at])])
                    continue
            out.append(word)
        return " ".join(out)


def aligned_segments(store: ProvisionStore, lang: str, guides: Sequence[tuple[GuideRows, GuideRows]]
                     ) -> list[tuple[str, str]]:
    """(text in `lang`, English text) pairs that say the same: headings, paragraphs and, per guide pass
    (lang rows, English rows), descriptions, keywords and questions (one by one where both have as many)."""
    pairs: list[tuple[str, str]] = []
    headings = {}
    for native, english in zip(store.provisions(lang), store.provisions("en")):
        pairs.append((native.text, english.text))
        headings[native.article] = (native.title, english.title)
    pairs.extend(headings.values())
    for native_rows, english_rows in guides:
        for pid, native in native_rows.items():
            english = english_rows.get(pid)
            if english is None:
                continue
            for field in ("about", "keywords"):
                if native.get(field) and english.get(field):
                    pairs.append((str(native[field]), str(english[field])))
            asks, english_asks = list(native.get("asks", [])), list(english.get("asks", []))
            if len(asks) == len(english_asks):
                pairs.extend(zip(asks, english_asks))
            elif asks and english_asks:
                pairs.append((" ".join(asks), " ".join(english_asks)))
    return pairs


def learn(lang: str, pairs: Iterable[tuple[str, str]]) -> Lexicon:
    native_vocab: dict[str, int] = {}
    english_vocab: dict[str, int] = {}
    native_rows, native_cols, english_rows, english_cols = [], [], [], []
    for segment, (native, english) in enumerate(pairs):
        # dict.fromkeys, not set: the order of the vocabulary decides ties, and a set's order changes per process.
        for token in dict.fromkeys(tokenize(native, lang)):
            native_rows.append(native_vocab.setdefault(token, len(native_vocab)))
            native_cols.append(segment)
        for word in dict.fromkeys(_ENGLISH_WORD.findall(strip_accents(english.lower()))):
            english_rows.append(english_vocab.setdefault(word, len(english_vocab)))
            english_cols.append(segment)
    n = max(native_cols + english_cols, default=-1) + 1
    native = sparse.csr_matrix((np.ones(len(native_rows), np.float32), (native_rows, native_cols)),
                               shape=(len(native_vocab), n))
    english = sparse.csr_matrix((np.ones(len(english_rows), np.float32), (english_rows, english_cols)),
                                shape=(len(english_vocab), n))
    together = (native @ english.T).tocsr()
    native_counts = np.asarray(native.sum(axis=1)).ravel()
    english_counts = np.asarray(english.sum(axis=1)).ravel()
    terms, counterparts = [], []
    for token, row in native_vocab.items():
        if native_counts[row] < MIN_SEGMENTS:
            continue
        start, end = together.indptr[row], together.indptr[row + 1]
        if start == end:
            continue
        columns, counts = together.indices[start:end], together.data[start:end]
        dice = 2 * counts / (native_counts[row] + english_counts[columns])
        best = int(np.argmax(dice))
        if dice[best] >= MIN_DICE:
            terms.append(token)
            counterparts.append(int(columns[best]))
    words = [""] * len(english_vocab)
    for word, index in english_vocab.items():
        words[index] = word
    used = sorted(set(counterparts))
    renumber = {old: new for new, old in enumerate(used)}
    hashes = term_hashes(terms)
    order = np.argsort(hashes, kind="stable")
    return Lexicon(lang, hashes[order], np.array([renumber[counterparts[i]] for i in order], dtype=np.int32),
                   tuple(words[i] for i in used))
