"""The GDPR corpus: one JSON Lines file per language, built by `python -m corpus.build_gdpr_corpus`.

`load_corpus` is the only reader of those files; the builder is the only writer.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from core.models import Provision

# The 24 official languages of the EU, ISO 639-1, sorted.
LANGUAGES: tuple[str, ...] = (
    "bg", "cs", "da", "de", "el", "en", "es", "et", "fi", "fr", "ga", "hr",
    "hu", "it", "lt", "lv", "mt", "nl", "pl", "pt", "ro", "sk", "sl", "sv",
)
BUILD_COMMAND = "python -m corpus.build_gdpr_corpus"
# Bumped whenever what the builder writes changes (fields, rendering, links), so that a corpus built by an
# older version is rebuilt rather than served. 2: links to the paragraph's EUR-Lex anchor.
CORPUS_VERSION = "2"


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


GUIDES_DIR = Path(__file__).parent / "guides"


def guide_files(lang: str, guides_dir: Path = GUIDES_DIR) -> list[Path]:
    """The files that hold the guide of `lang`, in the order `load_guides` merges them."""
    return sorted(Path(guides_dir).glob(f"{lang}_*.jsonl"))


def load_guides(lang: str = "en", guides_dir: Path = GUIDES_DIR) -> dict[str, list[str]]:
    """The curated plain-language guide per provision id, merged from every `<lang>_*.jsonl` file:
    what it says and what people ask when they need it, in everyday and in legal words. Search-only:
    it helps find a provision and is never quoted or cited."""
    guides: dict[str, list[str]] = {}
    for path in guide_files(lang, guides_dir):
        with path.open(encoding="utf-8") as lines:
            for n, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    lines_of = [row.get("about", ""), *row.get("asks", []), row.get("keywords", "")]
                    guides.setdefault(row["id"], []).extend(text for text in lines_of if text.strip())
                except (ValueError, KeyError) as exc:
                    raise ValueError(f"{path}:{n}: not a guide entry ({exc})") from None
    return guides


__all__ = ["BUILD_COMMAND", "CORPUS_VERSION", "GUIDES_DIR", "LANGUAGES", "corpus_file", "guide_files", "is_current",
           "load_corpus", "load_guides", "version_file"]
