"""Which official language a question is asked in."""
from __future__ import annotations

from functools import lru_cache

from py3langid.langid import MODEL_FILE, LanguageIdentifier

from corpus import LANGUAGES as EU_LANGUAGES

# Below this probability the guess is noise (very short questions, provision numbers): use the default.
MIN_CONFIDENCE = 0.5


@lru_cache(maxsize=1)
def _identifier() -> LanguageIdentifier:
    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages([lang for lang in EU_LANGUAGES if lang in identifier.labels])
    identifier._full_model = None  # all 97 languages (28 MB), kept only to restrict them again
    return identifier


def detect_language(text: str, default: str = "en", allowed: tuple[str, ...] = EU_LANGUAGES) -> str:
    """ISO 639-1 code of `text` among the official EU languages, or `default` when unsure."""
    if len(text.strip()) < 3:
        return default
    lang, probability = _identifier().classify(text)
    if probability < MIN_CONFIDENCE or lang not in allowed:
        return default
    return lang
