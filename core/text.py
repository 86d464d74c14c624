"""Text folding and the tokenizer for legal text, shared by BM25, references and quote verification."""
from __future__ import annotations

import hashlib
import re
import threading
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

import numpy as np
import snowballstemmer

from core.lemmas import lemmas
from core.references import find_references, reference_tokens

# Snowball has no stemmer for bg, lv, mt, sk, sl: the first four are lemmatised through the tables of
# core/lemmas.py, Maltese (which simplemma lacks too) is matched on folded words and character n-grams only.
# Croatian uses the Serbian stemmer (Latin script, same inflection).
_SNOWBALL = {
    "cs": "czech", "da": "danish", "de": "german", "el": "greek", "en": "english", "es": "spanish",
    "et": "estonian", "fi": "finnish", "fr": "french", "ga": "irish", "hr": "serbian", "hu": "hungarian",
    "it": "italian", "lt": "lithuanian", "nl": "dutch", "pl": "polish", "pt": "portuguese", "ro": "romanian",
    "sv": "swedish",
}

# Bumped whenever tokenize() or char_ngrams() change what they return (find_references included: a reference
# is one token, and the lemma tables), so stored BM25 indexes are rebuilt.
TOKENIZER_VERSION = 5

_QUOTES = str.maketrans({
    "‘": "'", "’": "'", "‚": "'", "‛": "'", "′": "'", "“": '"', "”": '"', "„": '"', "‟": '"',
    "«": '"', "»": '"', "‹": "'", "›": "'", "–": "-", "—": "-", "‑": "-", "\u00ad": None,
})


def fold(text: str) -> str:
    """Unicode-, whitespace- and typographic-quote-insensitive form used to re-find quotes verbatim."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    return re.sub(r"\s+", " ", text).strip()


def _folded_chars(text: str) -> tuple[str, list[int]]:
    """`fold(text).casefold()` built char by char, with each folded char's index in `text`."""
    out: list[str] = []
    origin: list[int] = []
    for i, char in enumerate(text):
        folded = unicodedata.normalize("NFKC", char).translate(_QUOTES).casefold()
        if folded.isspace() or not folded and char.isspace():
            if out and out[-1] != " ":
                out.append(" ")
                origin.append(i)
            continue
        for f in folded:
            out.append(f)
            origin.append(i)
    return "".join(out), origin


def find_verbatim(quote: str, text: str) -> str | None:
    """The exact span of `text` that `quote` matches after Unicode, whitespace, case and
    typographic-quote folding, or None. What a user sees is always this span, never the quote as given."""
    needle = fold(quote).casefold()
    if not needle:
        return None
    haystack, origin = _folded_chars(text)
    at = haystack.find(needle)
    if at < 0:
        return None
    return text[origin[at]: origin[at + len(needle) - 1] + 1]


def strip_accents(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


# Grouped numbers as printed ("20 000 000", "20.000.000") are one token.
_GROUPED_NUMBER = re.compile(r"\b\d{1,3}(?:[ \u00a0\u202f.,]\d{3})+\b")
_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*|\d+", re.UNICODE)


def words(text: str) -> list[str]:
    """The lower-cased words of `text` as the tokenizer splits them, before stemming."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).translate(_QUOTES).lower())


# Snowball stemmers keep state while they work, so each thread gets its own.
_local = threading.local()


def _stemmer(lang: str):
    stemmers = _local.__dict__.setdefault("stemmers", {})
    if lang not in stemmers:
        name = _SNOWBALL.get(lang)
        stemmers[lang] = snowballstemmer.stemmer(name) if name else None
    return stemmers[lang]


@lru_cache(maxsize=65536)
def _stem(lang: str, word: str) -> str:
    """Memoised: a language has a few thousand distinct words, and Snowball costs ~20 µs per call."""
    return _stemmer(lang).stemWord(word)


def tokenize(text: str, lang: str = "en") -> list[str]:
    """Lower-cased, stemmed, accent-folded tokens; references and grouped numbers kept as units."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    # "Art. 33(1)", "Artikel 33 Absatz 1" are single units in queries and in the text, so a question naming a
    # provision matches it exactly rather than every text containing "33" or "1".
    references = find_references(text)
    tokens = reference_tokens(r.ref for r in references)
    for start, end in sorted({r.span for r in references}, reverse=True):
        text = text[:start] + " " + text[end:]
    text = _GROUPED_NUMBER.sub(lambda m: " " + re.sub(r"\D", "", m.group(0)) + " ", text)
    found = words(text)
    if _SNOWBALL.get(lang):
        found = [_stem(lang, w) for w in found]
    elif lemma := lemmas(lang):
        found = [lemma.get(w, w) for w in found]
    tokens.extend(strip_accents(w) for w in found)
    return tokens


def char_ngrams(text: str, n: int = 4) -> list[str]:
    """Character n-grams inside words: joins compounds and inflections a stemmer misses
    (Dutch "boete" in "geldboeten", German "benannt"/"benennen" share most 4-grams)."""
    grams: list[str] = []
    for word in _WORD.findall(strip_accents(unicodedata.normalize("NFKC", text).lower())):
        if len(word) < 4 or word.isdigit():
            continue
        padded = f"_{word}_"
        grams.extend(padded[i:i + n] for i in range(len(padded) - n + 1))
    return grams


def term_hashes(tokens: Iterable[str]) -> np.ndarray:
    """Stable 64-bit hashes of tokens (Python's own hash() changes between processes)."""
    return np.array([int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little") for t in tokens],
                    dtype=np.uint64)
