"""Scripted stand-ins for adapter tests: an AnswerService that records what it was asked and answers from a fixed
provision, and a document library without an index."""
from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Sequence

from core.documents import DocumentRecord
from core.library import NotAllowed
from core.models import Abstention, AbstentionReason, Answer, Asker, Citation, Mode, Passage, Stage, Statement, Turn
from core.service import Progress, QuestionRejected, QuestionTooLong

ART_33_1 = (
    "In the case of a personal data breach, the controller shall without undue delay and, where feasible, "
    "not later than 72 hours after having become aware of it, notify the personal data breach to the "
    "supervisory authority competent in accordance with Article 55, unless the personal data breach is "
    "unlikely to result in a risk to the rights and freedoms of natural persons."
)
ART_33_1_URL = "https://eur-lex.europa.eu/legal-content/EN/TXT/HTML/?uri=CELEX:32016R0679#033.001"
QUOTE = "not later than 72 hours after having become aware of it"


@dataclass
class Asked:
    question: str
    history: tuple[Turn, ...]
    asker: Asker


@dataclass
class FakeAnswerService:
    """`fail_with` makes every ask raise it; `abstain` declines every question for that reason; questions longer
    than `max_question_chars` are refused as the real service refuses them; feedback is recorded for
    `known_request_ids` (every id when None)."""

    abstain: AbstentionReason | None = None
    fail_with: Exception | None = None
    max_question_chars: int = 2000
    known_request_ids: set[str] | None = None
    asked: list[Asked] = field(default_factory=list)
    feedback: list[tuple[str, bool, Asker]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def ask(self, question: str, *, history: Sequence[Turn] = (), asker: Asker = Asker(),
            request_id: str | None = None, progress: Progress | None = None) -> Answer:
        if len(question) > self.max_question_chars:
            raise QuestionTooLong(len(question), self.max_question_chars)
        with self._lock:
            self.asked.append(Asked(question, tuple(history), asker))
        if self.fail_with is not None:
            raise self.fail_with
        report = progress or (lambda stage: None)
        report(Stage.SEARCHING)
        passage = Passage("Art. 33(1)", "Art. 33(1)", ART_33_1, ART_33_1_URL, "en", 0.9)
        request_id = request_id or uuid.uuid4().hex[:12]
        if self.abstain is not None:
            return Answer(question=question, statements=(), retrieved=(passage,), mode=Mode.EXTRACTIVE,
                          request_id=request_id, abstention=Abstention(self.abstain), related=(passage,))
        report(Stage.GENERATING)
        report(Stage.VERIFYING)
        citation = Citation("Art. 33(1)", "Art. 33(1)", QUOTE, ART_33_1_URL, "en")
        return Answer(question=question, statements=(Statement(None, (citation,)),), retrieved=(passage,),
                      mode=Mode.EXTRACTIVE, request_id=request_id)

    def record_feedback(self, request_id: str, *, helpful: bool, asker: Asker) -> bool:
        if self.known_request_ids is not None and request_id not in self.known_request_ids:
            return False
        with self._lock:
            self.feedback.append((request_id, helpful, asker))
        return True


class FakeDocuments:
    """The document commands' side of `core.library.Documents`, on a list: no PDFs, no index."""

    def __init__(self, admins: set[str], records: Sequence[DocumentRecord] = (), max_bytes: int = 20 * 2**20):
        self.admins = frozenset(admins)
        self.records = list(records)
        self.max_bytes = max_bytes

    def is_admin(self, asker: Asker) -> bool:
        return bool(asker.user) and asker.user in self.admins

    def list(self, asker: Asker) -> list[DocumentRecord]:
        return list(self.records)

    def forget(self, filename: str, *, asker: Asker) -> DocumentRecord | None:
        if not self.is_admin(asker):
            raise NotAllowed("not an admin")
        found = next((r for r in self.records if r.filename.casefold() == filename.casefold()), None)
        if found is not None:
            self.records.remove(found)
        return found


def record(filename: str = "Retention.pdf", uploader: str = "U0ADMIN01") -> DocumentRecord:
    return DocumentRecord(upload_id="u1", filename=filename, sha256="0" * 64, pages=3, passages=5, uploader=uploader,
                          uploaded_at="2026-11-30T10:00:00+00:00")


__all__ = ["ART_33_1", "ART_33_1_URL", "FakeAnswerService", "FakeDocuments", "QUOTE", "QuestionRejected", "record"]
