"""The GDPR corpus: one JSON Lines file per language, built by `python -m corpus.build_gdpr_corpus`.

`load_corpus` is the only reader of those files; the builder is the only writer.
"""
from __future__ import annotations

import json
from pathlib import Path

from core.models import Provision

# The 24 official languages of the EU, ISO 639-1, sorted.
LANGUAGES: tuple[str, ...] = (
    "bg", "cs", "da", "de", "el", "en", "es", "et", "fi", "fr", "ga", "hr",
    "hu", "it", "lt", "lv", "mt", "nl", "pl", "pt", "ro", "sk", "sl", "sv",
)
BUILD_COMMAND = "python -m corpus.build_gdpr_corpus"


def corpus_file(corpus_dir: Path, lang: str) -> Path:
    return Path(corpus_dir) / f"gdpr_{lang}.jsonl"


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


def load_guides(lang: str = "en", guides_dir: Path = GUIDES_DIR) -> dict[str, list[str]]:
    """The curated plain-language guide per provision id, merged from every `<lang>_*.jsonl` file:
    what it says and what people ask when they need it, in everyday and in legal words. Search-only:
    it helps find a provision and is never quoted or cited."""
    guides: dict[str, list[str]] = {}
    for path in sorted(Path(guides_dir).glob(f"{lang}_*.jsonl")):
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


__all__ = ["BUILD_COMMAND", "GUIDES_DIR", "LANGUAGES", "corpus_file", "load_corpus", "load_guides"]
