"""The AnswerService every adapter calls: limits → retrieval → abstention → generation → verification → audit."""
from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from core.abstain import AbstentionPolicy
from core.library import Documents
from core.models import Answer, Asker, Mode, Passage, Statement, Turn
from core.retrieval import Retrieval, Retriever
from core.service import QuestionRejected, QuestionTooLong, RateLimited
from core.verify import Draft, verify

log = logging.getLogger(__name__)

NOT_COVERED = "The Regulation doesn't cover this."
ONLY_DOCUMENTS = "The Regulation doesn't cover this; what follows comes only from your organisation's documents."
DOCUMENT_PASSAGES = 3
# Cosine similarity (all-MiniLM-L6-v2) below which a document chunk is not about the question.
DOCUMENT_MIN_SIMILARITY = 0.35
RELATED_SHOWN = 3


class Generator(Protocol):
    mode: Mode

    def standalone_question(self, question: str, history: Sequence[Turn]) -> str:
        """What to search for: the question, with what a follow-up leaves implicit filled in from the thread."""
        ...

    def generate(self, question: str, retrieval: Retrieval, history: Sequence[Turn]) -> tuple[Draft, str | None]:
        """A draft answer from the retrieved passages, and a notice for the user (or None)."""
        ...


class AuditSink(Protocol):
    def record_answer(self, answer: Answer, asker: Asker, latency_ms: float) -> None: ...

    def record_feedback(self, request_id: str, helpful: bool, asker: Asker) -> None: ...


class FairUse(Protocol):
    def check(self, asker: Asker) -> None:
        """Raises RateLimited when the asker or their workspace is over the limit."""
        ...


class Observer(Protocol):
    def observe_answer(self, platform: str, latency_s: float, abstained: bool) -> None: ...

    def observe_error(self, platform: str) -> None: ...

    def observe_rate_limited(self, platform: str) -> None: ...


class Assistant:
    def __init__(self, retriever: Retriever, generator: Generator, *, abstention: AbstentionPolicy | None = None,
                 audit: AuditSink | None = None, fair_use: FairUse | None = None, metrics: Observer | None = None,
                 documents: Documents | None = None, max_question_chars: int = 2000, k: int = 8):
        self.retriever = retriever
        self.generator = generator
        self.abstention = abstention or AbstentionPolicy()
        self.audit = audit
        self.fair_use = fair_use
        self.metrics = metrics
        self.documents = documents
        self.max_question_chars = max_question_chars
        self.k = k

    def ask(self, question: str, *, history: Sequence[Turn] = (), asker: Asker = Asker()) -> Answer:
        started = time.perf_counter()
        question = question.strip()
        if not question:
            raise QuestionRejected("Please ask a question about the GDPR, e.g. “How quickly must a breach be reported?”")
        if len(question) > self.max_question_chars:
            raise QuestionTooLong(len(question), self.max_question_chars)
        if self.fair_use is not None:
            try:
                self.fair_use.check(asker)
            except RateLimited:
                if self.metrics is not None:
                    self.metrics.observe_rate_limited(asker.platform)
                raise
        try:
            answer = self._answer(question, history, asker, uuid.uuid4().hex[:16])
        except Exception:
            if self.metrics is not None:
                self.metrics.observe_error(asker.platform)
            raise
        latency_ms = (time.perf_counter() - started) * 1000
        answer.timings_ms["total"] = latency_ms
        if self.audit is not None:
            self.audit.record_answer(answer, asker, latency_ms)
        if self.metrics is not None:
            self.metrics.observe_answer(asker.platform, latency_ms / 1000, answer.abstained)
        return answer

    def record_feedback(self, request_id: str, *, helpful: bool, asker: Asker) -> None:
        if self.audit is not None:
            self.audit.record_feedback(request_id, helpful, asker)

    def _answer(self, question: str, history: Sequence[Turn], asker: Asker, request_id: str) -> Answer:
        query = self.generator.standalone_question(question, history)
        retrieval = self.retriever.run(query, k=self.k)
        timings = {"retrieval": retrieval.timings_ms.get("total", 0.0)}
        documents = self._documents(query, asker)
        decision = self.abstention.decide(question, retrieval)
        if decision.abstain:
            log.info("abstained: %s", decision.reason, extra={"request_id": request_id})
            if not documents:
                return self._abstain(question, retrieval, request_id, timings, None)
        # The organisation's documents come after the Regulation and never replace it: when the Regulation
        # does not cover the question, an answer may still quote them, saying so.
        sources = (() if decision.abstain else retrieval.passages) + documents
        t = time.perf_counter()
        draft, notice = self.generator.generate(question, replace(retrieval, passages=sources), history)
        timings["generation"] = (time.perf_counter() - t) * 1000
        verified = verify(draft, sources)
        for reason in verified.dropped:
            log.warning("dropped statement: %s", reason, extra={"request_id": request_id})
        if draft.not_in_sources or not verified.statements:
            return self._abstain(question, retrieval, request_id, timings, notice)
        if decision.abstain:
            notice = " ".join(filter(None, [ONLY_DOCUMENTS, notice]))
        return Answer(question, False, verified.statements, verified.citations, retrieval.passages + documents,
                      self.generator.mode, request_id, notice=notice, timings_ms=timings)

    def _documents(self, query: str, asker: Asker) -> tuple[Passage, ...]:
        if self.documents is None or not asker.workspace:
            return ()
        return tuple(self.documents.search(query, asker, DOCUMENT_PASSAGES, DOCUMENT_MIN_SIMILARITY))

    def _abstain(self, question: str, retrieval: Retrieval, request_id: str, timings: dict, notice: str | None) -> Answer:
        return Answer(question, True, (Statement(NOT_COVERED, ()),), (), retrieval.passages, self.generator.mode,
                      request_id, related=retrieval.passages[:RELATED_SHOWN], notice=notice, timings_ms=timings)
