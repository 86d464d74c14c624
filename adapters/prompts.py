"""Questions to suggest to someone who opens the bot: real questions people ask about provisions every
organisation meets, in their language, taken from the provision guides (which every official language has)."""
from __future__ import annotations

from functools import cache

from corpus import LANGUAGES
from corpus.guide import Guides

EXAMPLE_PROVISIONS = ("Art. 33(1)", "Art. 4(1)", "Art. 37(1)", "Art. 17(1)")  # Slack shows four at most
MAX_QUESTION_CHARS = 80  # what a suggestion shows without cutting it


@cache
def example_questions(lang: str) -> tuple[str, ...]:
    """One question for each of the example provisions, in `lang` where the Regulation is published in it, else
    in English: the first short one its guide lists."""
    questions = Guides().questions(lang if lang in LANGUAGES else "en")
    return tuple(next((q for q in questions[pid] if len(q) <= MAX_QUESTION_CHARS), min(questions[pid], key=len))
                 for pid in EXAMPLE_PROVISIONS)


__all__ = ["EXAMPLE_PROVISIONS", "example_questions"]
