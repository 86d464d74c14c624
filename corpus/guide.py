"""The provision guides: per provision id, what it says and what people ask when they need it, in everyday
and in legal words, in every official language (`corpus/guides/<lang>_<n>.jsonl`). Search aids only: they
help find a provision and are never quoted or cited.

Every other language's `<lang>_1` and `<lang>_2` are written after the English passes ENGLISH_PASSES names,
entry by entry, which is what aligns a language's guide with the English one. A `<lang>_3` (a situation, an
everyday question and one in the Regulation's terms per provision, written natively from that language's text)
is searched like the others but aligns with nothing, so the lexicon does not learn from it.
"""
from __future__ import annotations

import json
from pathlib import Path

GUIDES_DIR = Path(__file__).parent / "guides"
ENGLISH_PASSES = {1: ("en_1", "en_2", "en_3", "en_4"), 2: ("en_5", "en_6")}


class Guides:
    def __init__(self, directory: Path = GUIDES_DIR):
        self.directory = Path(directory)

    def files(self, lang: str) -> list[Path]:
        """The files that hold the guide of `lang`, in the order `lines` merges them."""
        return sorted(self.directory.glob(f"{lang}_*.jsonl"))

    def lines(self, lang: str) -> dict[str, list[str]]:
        """Every line of the guide of `lang` (descriptions, questions, keywords), by provision id."""
        guides: dict[str, list[str]] = {}
        for path in self.files(lang):
            for row in _rows(path):
                lines = [row.get("about", ""), *row.get("asks", []), row.get("keywords", "")]
                guides.setdefault(row["id"], []).extend(text for text in lines if text.strip())
        return guides

    def questions(self, lang: str) -> dict[str, list[str]]:
        """What people ask when they need each provision, in `lang`, by provision id, in the order `lines` reads."""
        questions: dict[str, list[str]] = {}
        for path in self.files(lang):
            for row in _rows(path):
                questions.setdefault(row["id"], []).extend(q for q in row.get("asks", []) if q.strip())
        return questions

    def passes(self, lang: str) -> list[tuple[dict[str, dict], dict[str, dict]]]:
        """(rows of `lang`, rows of English) by provision id for each pass both have: texts that say the same."""
        aligned = []
        for number, english_names in ENGLISH_PASSES.items():
            native = self.directory / f"{lang}_{number}.jsonl"
            if native.is_file():
                english = {row["id"]: row for name in english_names for row in _rows(self.directory / f"{name}.jsonl")}
                aligned.append(({row["id"]: row for row in _rows(native)}, english))
        return aligned

    def aligned_files(self, lang: str) -> list[Path]:
        """The files `passes(lang)` reads."""
        files = []
        for number, english_names in ENGLISH_PASSES.items():
            native = self.directory / f"{lang}_{number}.jsonl"
            if native.is_file():
                files += [native, *(self.directory / f"{name}.jsonl" for name in english_names)]
        return files


def _rows(path: Path) -> list[dict]:
    rows = []
    with path.open(encoding="utf-8") as lines:
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if "id" not in row:
                    raise KeyError("id")
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{n}: not a guide entry ({exc})") from None
            rows.append(row)
    return rows


__all__ = ["ENGLISH_PASSES", "GUIDES_DIR", "Guides"]
