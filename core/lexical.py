"""BM25 over one language's provisions and guides: stemmed words, and character n-grams for the
compounds and inflections a stemmer does not join.

An index is sparse postings sized for a few hundred documents (term hashes, then per term the documents
it occurs in and its precomputed BM25 weight there), not a dict per document: all 24 languages fit in a
few megabytes, are built once by `python -m bot index`, and are loaded at start, so the first question
in any language is answered as fast as the hundredth. Scores equal rank-bm25's BM25Okapi (tested).
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import multiprocessing
import os
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.lemmas import lemma_files
from core.provisions import ProvisionStore
from corpus.guide import Guides
from core.lexicon import Lexicon, aligned_segments, learn
from core.text import TOKENIZER_VERSION, char_ngrams, term_hashes, tokenize

log = logging.getLogger(__name__)

# BM25Okapi's defaults in rank-bm25, which the weights of the fusion were chosen with.
K1 = 1.5
B = 0.75
EPSILON = 0.25
# Bumped when what an index holds changes, so stored indexes are rebuilt.
LEXICAL_SCHEMA = 3


@dataclass(frozen=True)
class BM25:
    terms: np.ndarray  # uint64, sorted: the hash of each indexed term
    offsets: np.ndarray  # int64, len(terms) + 1: term i's postings are [offsets[i], offsets[i + 1])
    docs: np.ndarray  # uint16 (int32 beyond 65,536 documents): the document of each posting
    weights: np.ndarray  # float32: idf × saturated term frequency of the term in that document
    n_docs: int

    @classmethod
    def build(cls, documents: Sequence[Sequence[str]]) -> BM25:
        counts = [Counter(tokens) for tokens in documents]
        n_docs = len(documents)
        lengths = np.array([len(tokens) for tokens in documents], dtype=np.float64)
        average_length = lengths.sum() / n_docs if n_docs else 0.0
        document_frequency = Counter(term for c in counts for term in c)
        idf = {term: math.log(n_docs - n + 0.5) - math.log(n + 0.5) for term, n in document_frequency.items()}
        # rank-bm25's floor for terms in more than half of the documents: a share of the average idf.
        floor = EPSILON * (sum(idf.values()) / len(idf)) if idf else 0.0
        idf = {term: value if value >= 0 else floor for term, value in idf.items()}
        vocabulary = sorted(document_frequency)
        hashes = term_hashes(vocabulary)
        order = np.argsort(hashes, kind="stable")
        position = {vocabulary[i]: rank for rank, i in enumerate(order)}
        postings: list[list[tuple[int, float]]] = [[] for _ in vocabulary]
        for doc, c in enumerate(counts):
            norm = K1 * (1 - B + B * lengths[doc] / average_length) if average_length else K1
            for term, tf in c.items():
                postings[position[term]].append((doc, idf[term] * tf * (K1 + 1) / (tf + norm)))
        sizes = np.array([len(p) for p in postings], dtype=np.int64)
        flat = [posting for p in postings for posting in p]
        return cls(
            terms=hashes[order],
            offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
            docs=np.array([d for d, _ in flat], dtype=np.uint16 if n_docs <= 65536 else np.int32),
            weights=np.array([w for _, w in flat], dtype=np.float32),
            n_docs=n_docs,
        )

    def scores(self, tokens: Sequence[str]) -> np.ndarray:
        """BM25 of every document for the query `tokens` (a repeated token counts again, as in rank-bm25)."""
        positions = self._positions(tokens)
        found = positions[positions >= 0]
        if not len(found):
            return np.zeros(self.n_docs)
        spans = [np.arange(self.offsets[i], self.offsets[i + 1]) for i in found]
        picked = np.concatenate(spans)
        return np.bincount(self.docs[picked], weights=self.weights[picked], minlength=self.n_docs)

    def _positions(self, tokens: Sequence[str]) -> np.ndarray:
        """Each token's index in `terms`, -1 where it is not indexed."""
        if not tokens or not len(self.terms):
            return np.full(len(tokens), -1)
        hashes = term_hashes(tokens)
        at = np.minimum(np.searchsorted(self.terms, hashes), len(self.terms) - 1)
        return np.where(self.terms[at] == hashes, at, -1)

    def known(self, tokens: Sequence[str]) -> np.ndarray:
        """Which tokens occur anywhere in the indexed documents."""
        return self._positions(tokens) >= 0

    def in_document(self, tokens: Sequence[str], doc: int) -> np.ndarray:
        """Which tokens occur in document `doc`."""
        return np.array([i >= 0 and doc in self.docs[self.offsets[i]:self.offsets[i + 1]]
                         for i in self._positions(tokens)], dtype=bool)

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}.terms": self.terms, f"{prefix}.offsets": self.offsets, f"{prefix}.docs": self.docs,
                f"{prefix}.weights": self.weights, f"{prefix}.n_docs": np.array([self.n_docs])}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], prefix: str) -> BM25:
        return cls(arrays[f"{prefix}.terms"], arrays[f"{prefix}.offsets"], arrays[f"{prefix}.docs"],
                   arrays[f"{prefix}.weights"], int(arrays[f"{prefix}.n_docs"][0]))


@dataclass(frozen=True)
class LexicalIndex:
    """BM25 over stemmed words and (optionally) character n-grams of the same documents."""

    lang: str
    words: BM25
    grams: BM25 | None

    @classmethod
    def build(cls, documents: Sequence[str], lang: str, *, grams: bool = True) -> LexicalIndex:
        return cls(lang, BM25.build([tokenize(d, lang) for d in documents]),
                   BM25.build([char_ngrams(d) for d in documents]) if grams else None)

    def word_scores(self, text: str) -> np.ndarray:
        return self.words.scores(tokenize(text, self.lang))

    def gram_scores(self, text: str) -> np.ndarray:
        if self.grams is None:
            raise ValueError("this index was built without character n-grams")
        return self.grams.scores(char_ngrams(text))

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        found = self.words.arrays(f"{prefix}.words")
        if self.grams is not None:
            found.update(self.grams.arrays(f"{prefix}.grams"))
        return found

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], prefix: str, lang: str) -> LexicalIndex:
        grams = BM25.from_arrays(arrays, f"{prefix}.grams") if f"{prefix}.grams.terms" in arrays else None
        return cls(lang, BM25.from_arrays(arrays, f"{prefix}.words"), grams)


@dataclass(frozen=True)
class LanguageIndexes:
    """One language's indexes: over the provisions, over the provision guide where it has one, and (for
    languages other than English) the lexicon that renders its questions in English words."""

    provisions: LexicalIndex
    guide: LexicalIndex | None
    lexicon: Lexicon | None


def build_language(store: ProvisionStore, guides: Guides, lang: str) -> LanguageIndexes:
    provisions = LexicalIndex.build([p.headed_text for p in store.provisions(lang)], lang)
    lines = guides.lines(lang)
    # English questions have the dense model for inflection and paraphrase; other languages lean on
    # character n-grams ("gemeldet" vs "melden").
    guide = LexicalIndex.build([" ".join(lines.get(pid, ())) for pid in store.ids], lang,
                               grams=lang != "en") if lines else None
    lexicon = None if lang == "en" else learn(lang, aligned_segments(store, lang, guides.passes(lang)))
    return LanguageIndexes(provisions, guide, lexicon)


class LexicalIndexes:
    """The BM25 indexes and lexicons of every served language, memory-mapped from the index directory: ready
    at start, and only the pages a question's terms touch are ever read into memory."""

    def __init__(self, by_lang: Mapping[str, LanguageIndexes]):
        self._by_lang = dict(by_lang)

    def language(self, lang: str) -> LexicalIndex:
        return self._by_lang[lang].provisions

    def guide(self, lang: str) -> LexicalIndex | None:
        return self._by_lang[lang].guide

    def lexicon(self, lang: str) -> Lexicon | None:
        return self._by_lang[lang].lexicon

    def english_reading(self, text: str, lang: str) -> str:
        """The text in English words: itself, or its word-by-word rendering through the language's lexicon."""
        lexicon = self._by_lang[lang].lexicon if lang in self._by_lang else None
        return lexicon.translate(text) if lexicon is not None else text

    @classmethod
    def open(cls, store: ProvisionStore, guides: Guides, directory: Path, *, rebuild: bool = False,
             progress: Callable[[Iterable[str]], Iterable[str]] = iter) -> LexicalIndexes:
        """Open each language's stored indexes, building (and storing) those missing or out of date."""
        directory.mkdir(parents=True, exist_ok=True)
        by_lang: dict[str, LanguageIndexes | None] = {}
        stale: dict[str, tuple[Path, str]] = {}
        for lang in store.languages:
            sources = [store.corpus_file(lang), *guides.files(lang), *lemma_files(lang)]
            if lang != "en":
                sources += [store.corpus_file("en"), *guides.aligned_files(lang)]
            stamp = _fingerprint(sources, lang)
            path = directory / f"lexical-{lang}"
            by_lang[lang] = None if rebuild else _load(path, stamp, lang)
            if by_lang[lang] is None:
                stale[lang] = (path, stamp)
        for lang in progress(_build_and_save(store, guides, stale)):
            path, stamp = stale[lang]
            # Another process building the same index at once may have replaced ours: the same content.
            by_lang[lang] = _load(path, stamp, lang)
            if by_lang[lang] is None:
                raise OSError(f"the lexical index {path} was built but cannot be read back")
        return cls(by_lang)


def _build_and_save(store: ProvisionStore, guides: Guides, stale: Mapping[str, tuple[Path, str]]) -> Iterator[str]:
    """Build and store the indexes of the `stale` languages, one process per core (tokenising is pure Python, so
    threads would take turns), yielding each language as it is stored."""
    workers = min(len(stale), len(os.sched_getaffinity(0)))
    if workers <= 1:
        for lang, (path, stamp) in stale.items():
            _save(path, stamp, build_language(store, guides, lang))
            yield lang
        return
    # spawn, not fork: the parent may already run threads (the embedder's, a server's) that a fork would copy
    # mid-operation.
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        built = {pool.submit(_build_one, store.corpus_dir, store.languages, guides.directory, lang, *stale[lang]): lang
                 for lang in stale}
        for future in as_completed(built):
            future.result()
            yield built[future]


def _build_one(corpus_dir: Path, languages: tuple[str, ...], guides_dir: Path, lang: str, path: Path,
               stamp: str) -> None:
    """In a worker process: one language's indexes, stored under `path`."""
    _save(path, stamp, build_language(ProvisionStore(corpus_dir, languages), Guides(guides_dir), lang))


def _fingerprint(files: Sequence[Path], lang: str) -> str:
    digest = hashlib.sha256(f"{LEXICAL_SCHEMA}:{TOKENIZER_VERSION}:{lang}".encode())
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _load(path: Path, stamp: str, lang: str) -> LanguageIndexes | None:
    """The indexes stored under `path` (a .json header naming its .bin arrays), or None when absent, stale
    or unreadable."""
    try:
        header = json.loads(path.with_suffix(".json").read_text("utf-8"))
        if header.get("fingerprint") != stamp:
            return None
        data_path = path.parent / header["data"]
        if data_path.stat().st_size != header["size"]:
            return None
        arrays = {name: np.memmap(data_path, dtype=spec["dtype"], mode="r", offset=spec["offset"],
                                  shape=tuple(spec["shape"])) if spec["shape"][0] else np.zeros(0, spec["dtype"])
                  for name, spec in header["arrays"].items()}
        words = header.get("lexicon_words")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("Rebuilding the unreadable lexical index %s (%s)", path, exc)
        return None
    guide = LexicalIndex.from_arrays(arrays, "guide", lang) if "guide.words.terms" in arrays else None
    lexicon = Lexicon(lang, arrays["lexicon.terms"], arrays["lexicon.english"], tuple(words)) if words is not None else None
    return LanguageIndexes(LexicalIndex.from_arrays(arrays, "provisions", lang), guide, lexicon)


def _save(path: Path, stamp: str, indexes: LanguageIndexes) -> None:
    arrays = indexes.provisions.arrays("provisions")
    if indexes.guide is not None:
        arrays.update(indexes.guide.arrays("guide"))
    header: dict = {"fingerprint": stamp}
    if indexes.lexicon is not None:
        arrays.update({"lexicon.terms": indexes.lexicon.terms, "lexicon.english": indexes.lexicon.english})
        header["lexicon_words"] = list(indexes.lexicon.words)
    # A new file per build, never rewritten: a running process keeps reading the one it mapped.
    data_path = path.parent / f"{path.name}-{stamp}-{uuid.uuid4().hex[:8]}.bin"
    specs, offset = {}, 0
    with open(data_path, "wb") as out:
        for name, array in arrays.items():
            array = np.ascontiguousarray(array).reshape(-1)
            specs[name] = {"dtype": array.dtype.str, "shape": [len(array)], "offset": offset}
            out.write(array.tobytes())
            offset += array.nbytes
    # The header is written last and moved into place: it is what marks the arrays as complete.
    partial = path.with_suffix(f".json.{uuid.uuid4().hex[:8]}.partial")
    partial.write_text(json.dumps({**header, "data": data_path.name, "size": offset, "arrays": specs},
                                  ensure_ascii=False), "utf-8")
    partial.replace(path.with_suffix(".json"))
    # Only builds of other contents go: a concurrent build of the same one may still be about to be mapped.
    for old in path.parent.glob(f"{path.name}-*.bin"):
        if not old.name.startswith(f"{path.name}-{stamp}-"):
            old.unlink(missing_ok=True)  # a process that mapped it keeps its pages until it exits
