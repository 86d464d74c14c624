"""Lemma tables for the official languages Snowball has no stemmer for (`corpus/lemmas/<lang>.tsv`): each
word of that language's provisions and guides, with its lemma where the two differ ("spracúvania" →
"spracúvanie"). BM25 then joins a question's inflected form to the text's, as a stemmer would.

Written by `python -m core.lemmas` with simplemma's dictionaries (a development dependency: loaded in full they
take 30 to 60 MB per language, while a table holds the few thousand words these texts use). A question's word
that the texts never use has no entry and stays as typed, which costs nothing: BM25 could not match it anyway
unless it is already a lemma.
"""
from __future__ import annotations

import argparse
import unicodedata
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path

import corpus
from corpus import load_corpus
from corpus.guide import Guides

# Beside the guides: both are search aids derived from the Regulation's text, shipped as package data.
LEMMAS_DIR = Path(corpus.__file__).parent / "lemmas"
# Snowball lacks these; simplemma covers them all but Maltese. Croatian has Snowball's Serbian stemmer.
LEMMATISED = ("bg", "lv", "sk", "sl")


def lemma_file(lang: str, directory: Path = LEMMAS_DIR) -> Path:
    return Path(directory) / f"{lang}.tsv"


def lemma_files(lang: str) -> list[Path]:
    """The table `tokenize(…, lang)` reads, if any: what an index of `lang` must be rebuilt after."""
    return [lemma_file(lang)] if lang in LEMMATISED else []


@lru_cache(maxsize=None)
def lemmas(lang: str) -> dict[str, str]:
    """word → lemma for `lang` (lower-cased, NFKC), or {} for a language without a table."""
    if lang not in LEMMATISED:
        return {}
    # A missing table of a lemmatised language is a broken install, not a language to serve unstemmed.
    lines = lemma_file(lang).read_text("utf-8").splitlines()
    return dict(line.split("\t") for line in lines if line)


def table(lang: str, texts: Iterable[str], words_of: Callable[[str], list[str]]) -> str:
    """The TSV of every word `words_of` finds in `texts` whose lemma differs from it, sorted."""
    import simplemma  # development dependency: only this builder needs it

    vocabulary = {word for text in texts for word in words_of(text)}
    rows = []
    for word in sorted(vocabulary):
        lemma = unicodedata.normalize("NFKC", simplemma.lemmatize(word, lang=lang)).lower()
        if lemma != word and "\t" not in lemma:
            rows.append(f"{word}\t{lemma}\n")
    return "".join(rows)


def texts_of(lang: str, corpus_dir: Path, guides: Guides) -> list[str]:
    """What the tables are built from: the language's provisions (headings included) and its guide lines."""
    provisions = [p.headed_text for p in load_corpus(lang, corpus_dir)]
    return provisions + [line for lines in guides.lines(lang).values() for line in lines]


def main(argv: list[str] | None = None) -> int:
    # The tokenizer's own splitting, so every key is a word it looks up (imported here: core.text reads the tables).
    from core.text import words

    parser = argparse.ArgumentParser(description="Write the lemma tables of the languages Snowball has no stemmer for.")
    parser.add_argument("--corpus-dir", type=Path, default=Path("data/corpus"))
    parser.add_argument("--out", type=Path, default=LEMMAS_DIR)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for lang in LEMMATISED:
        text = table(lang, texts_of(lang, args.corpus_dir, Guides()), words)
        lemma_file(lang, args.out).write_text(text, "utf-8")
        print(f"{lang}: {text.count(chr(10))} words")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
