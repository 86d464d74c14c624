"""A scripted AnswerService for adapter tests: records what it was asked, answers from a fixed provision."""
from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Sequence

from core.models import Answer, Asker, Citation, Passage, Statement, Turn
from core.service import QuestionRejected

ART_33_1 = (
    "In the case of a personal data breach, the controller shall without undue delay and, where feasible, "
    "not later than 72 hours after having become aware of it, notify the personal data breach to the "
    "supervisory authority competent in accordance with Article 55, unless the personal data breach is "
    "unlikely to result in a risk to the rights and freedoms of natural persons."
)
ART_33_1_URL = "https://eur-lex.europa.eu/legal-content/EN/TXT/HTML/?uri=CELEX:32016R0679#033.001"


@dataclass
class Asked:
    question: str
    history: tuple[Turn, ...]
    asker: Asker


@dataclass
class FakeAnswerService:
    """`fail_with` makes the next asks raise it; `abstain=True` answers with an abstention."""

    abstain: bool = False
    fail_with: Exception | None = None
    asked: list[Asked] = field(default_factory=list)
    feedback: list[tuple[str, bool, Asker]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def ask(self, question: str, *, history: Sequence[Turn] = (), asker: Asker = Asker()) -> Answer:
        with self._lock:
            self.asked.append(Asked(question, tuple(history), asker))
        if self.fail_with is not None:
            raise self.fail_with
        passage = Passage("Art. 33(1)", "Art. 33(1)", ART_33_1, ART_33_1_URL, "en", 0.9)
        request_id = uuid.uuid4().hex[:12]
        if self.abstain:
            return Answer(question, True, (Statement("The Regulation doesn't cover this.", ()),), (), (passage,),
                          "extractive", request_id, related=(passage,))
        quote = "not later than 72 hours after having become aware of it"
        citation = Citation("Art. 33(1)", "Art. 33(1)", quote, ART_33_1_URL, "en")
        statement = Statement(f"Art. 33(1): “…{quote}…”", (0,))
        return Answer(question, False, (statement,), (citation,), (passage,), "extractive", request_id)

    def record_feedback(self, request_id: str, *, helpful: bool, asker: Asker) -> None:
        with self._lock:
            self.feedback.append((request_id, helpful, asker))


__all__ = ["FakeAnswerService", "QuestionRejected", "ART_33_1", "ART_33_1_URL"]
