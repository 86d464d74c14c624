"""The GDPR corpus: one JSON Lines file per language, built by `python -m corpus.build_gdpr_corpus`.

`load_corpus` is the only reader of those files; the builder is the only writer.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from corpus.provision import Provision

# The 24 official languages of the EU, ISO 639-1, sorted.
LANGUAGES: tuple[str, ...] = (
    "bg", "cs", "da", "de", "el", "en", "es", "et", "fi", "fr", "ga", "hr",
    "hu", "it", "lt", "lv", "mt", "nl", "pl", "pt", "ro", "sk", "sl", "sv",
)
BUILD_COMMAND = "python -m corpus.build_gdpr_corpus"
# Bumped whenever what the builder writes changes (fields, rendering, links), so that a corpus built by an
# older version is rebuilt rather than served. 2: links to the paragraph's EUR-Lex anchor; 3: point labels.
CORPUS_VERSION = "3"


def corpus_file(corpus_dir: Path, lang: str) -> Path:
    return Path(corpus_dir) / f"gdpr_{lang}.jsonl"


def version_file(corpus_dir: Path) -> Path:
    """Written by the builder after the language files: the CORPUS_VERSION they were built by."""
    return Path(corpus_dir) / "VERSION"


def is_current(corpus_dir: Path, langs: Iterable[str]) -> bool:
    """Whether the corpus of `langs` is built, and by this version of the builder."""
    version = version_file(corpus_dir)
    return (version.is_file() and version.read_text("utf-8").strip() == CORPUS_VERSION
            and all(corpus_file(corpus_dir, lang).is_file() for lang in langs))


def load_corpus(lang: str, corpus_dir: Path) -> list[Provision]:
    """The provisions of the Regulation in `lang`, in the order of the Regulation."""
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; expected one of {', '.join(LANGUAGES)}")
    path = corpus_file(corpus_dir, lang)
    if not path.is_file():
        raise FileNotFoundError(f"No GDPR corpus for '{lang}' at {path}; build it with: "
                                f"{BUILD_COMMAND} --out {corpus_dir}")
    with path.open(encoding="utf-8") as lines:
        return [Provision(**json.loads(line)) for line in lines if line.strip()]


__all__ = ["BUILD_COMMAND", "CORPUS_VERSION", "LANGUAGES", "corpus_file", "is_current", "load_corpus", "version_file"]
