"""The provisions in every served language, loaded from the built corpus and aligned by id."""
from __future__ import annotations

import threading
from functools import cached_property
from pathlib import Path

from core.models import Provision
from core.references import Structure
from corpus import corpus_file, load_corpus


class ProvisionStore:
    """English is loaded at once; another language on its first use (about 20 ms: a 1 MB file)."""

    def __init__(self, corpus_dir: Path, languages: tuple[str, ...]):
        if "en" not in languages:
            languages = ("en",) + tuple(languages)
        self.corpus_dir = corpus_dir
        self.languages = languages
        self._by_lang: dict[str, list[Provision]] = {"en": load_corpus("en", corpus_dir)}
        self._lock = threading.Lock()

    @cached_property
    def ids(self) -> list[str]:
        return [p.id for p in self._by_lang["en"]]

    @cached_property
    def position(self) -> dict[str, int]:
        return {pid: i for i, pid in enumerate(self.ids)}

    @cached_property
    def structure(self) -> Structure:
        """Which articles, paragraphs and points exist."""
        return Structure(self.ids, {p.id: p.points for p in self._by_lang["en"]})

    def point_labels(self, lang: str) -> dict[str, tuple[str, ...]]:
        """The printed point labels of each provision in `lang` ("α)", "б)"), for references written in it."""
        return {p.id: p.points for p in self.provisions(lang) if p.points}

    def corpus_file(self, lang: str) -> Path:
        return corpus_file(self.corpus_dir, lang)

    def provisions(self, lang: str = "en") -> list[Provision]:
        if lang not in self.languages:
            lang = "en"
        loaded = self._by_lang.get(lang)
        if loaded is None:
            with self._lock:
                loaded = self._by_lang.get(lang)
                if loaded is None:
                    loaded = load_corpus(lang, self.corpus_dir)
                    if [p.id for p in loaded] != self.ids:
                        raise RuntimeError(f"The {lang} corpus is not aligned with the English one; rebuild the corpus")
                    self._by_lang[lang] = loaded
        return loaded

    def get(self, provision_id: str, lang: str = "en") -> Provision:
        return self.provisions(lang)[self.position[provision_id]]
