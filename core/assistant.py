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
from core.models import Abstention, AbstentionReason, Answer, Asker, Mode, Notice, Passage, Stage, Turn
from core.references import ProvisionRef
from core.retrieval import Retrieval, Retriever
from core.service import EmptyQuestion, Progress, QuestionTooLong, RateLimited
from core.verify import Draft, Verifier

log = logging.getLogger(__name__)

DOCUMENT_PASSAGES = 3
# Cosine similarity (all-MiniLM-L6-v2) below which a document chunk is not about the question.
DOCUMENT_MIN_SIMILARITY = 0.35
RELATED_SHOWN = 3
# A declined answer lists the closest provisions as related only when they are about the question at all:
# the cosine similarity of its English reading to their guide lines.
RELATED_MIN_SIMILARITY = 0.5
NEVER_RELATED = frozenset({AbstentionReason.OFF_TOPIC, AbstentionReason.MISUSE,
                           AbstentionReason.UNSUPPORTED_LANGUAGE})


class Generator(Protocol):
    mode: Mode

    def standalone_question(self, question: str, history: Sequence[Turn]) -> str:
        """What to search for: the question, with what a follow-up leaves implicit filled in from the thread."""
        ...

    def generate(self, question: str, retrieval: Retrieval, history: Sequence[Turn]) -> tuple[Draft, Notice | None]:
        """A draft answer from the retrieved passages, and a notice for the user (or None)."""
        ...


class AuditSink(Protocol):
    def record_answer(self, answer: Answer, asker: Asker, latency_ms: float) -> None: ...

    def record_feedback(self, request_id: str, helpful: bool, asker: Asker) -> bool: ...


class FairUse(Protocol):
    def check(self, asker: Asker) -> None:
        """Raises RateLimited when the asker or their workspace is over the limit."""
        ...


class Observer(Protocol):
    def observe_answer(self, platform: str, latency_s: float, abstained: bool) -> None: ...

    def observe_error(self, platform: str) -> None: ...

    def observe_rate_limited(self, platform: str) -> None: ...


class Assistant:
    def __init__(self, retriever: Retriever, generator: Generator, abstention: AbstentionPolicy, *,
                 verifier: Verifier | None = None, fallback: Generator | None = None, audit: AuditSink | None = None,
                 fair_use: FairUse | None = None, metrics: Observer | None = None, documents: Documents | None = None,
                 max_question_chars: int = 2000, k: int = 8):
        """`fallback` (the extractive generator, for an LLM) answers when none of the model's statements verify."""
        self.retriever = retriever
        self.generator = generator
        self.abstention = abstention
        self.verifier = verifier or Verifier()
        self.fallback = fallback
        self.audit = audit
        self.fair_use = fair_use
        self.metrics = metrics
        self.documents = documents
        self.max_question_chars = max_question_chars
        self.k = k

    def ask(self, question: str, *, history: Sequence[Turn] = (), asker: Asker = Asker(),
            request_id: str | None = None, progress: Progress | None = None) -> Answer:
        started = time.perf_counter()
        question = question.strip()
        if not question:
            raise EmptyQuestion()
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
            answer = self._answer(question, history, asker, request_id or uuid.uuid4().hex[:16],
                                  progress or _unobserved)
        except Exception:
            if self.metrics is not None:
                self.metrics.observe_error(asker.platform)
            raise
        latency_ms = (time.perf_counter() - started) * 1000
        answer = replace(answer, timings_ms={**answer.timings_ms, "total": latency_ms})
        if self.audit is not None:
            self.audit.record_answer(answer, asker, latency_ms)
        if self.metrics is not None:
            self.metrics.observe_answer(asker.platform, latency_ms / 1000, answer.abstained)
        return answer

    def record_feedback(self, request_id: str, *, helpful: bool, asker: Asker) -> bool:
        return self.audit.record_feedback(request_id, helpful, asker) if self.audit is not None else False

    def _answer(self, question: str, history: Sequence[Turn], asker: Asker, request_id: str,
                progress: Progress) -> Answer:
        progress(Stage.SEARCHING)
        query = self.generator.standalone_question(question, history)
        retrieval = self.retriever.run(query, k=self.k)
        timings = {"retrieval": retrieval.timings_ms.get("total", 0.0)}
        documents = self._documents(query, asker)
        abstention = self.abstention.decide(query, retrieval)
        if abstention is not None:
            log.info("declined: %s", abstention.reason.value, extra={"request_id": request_id})
            if not documents:
                return self._declined(question, retrieval, request_id, timings, abstention)
        # The organisation's documents come after the Regulation and never replace it: when the Regulation
        # does not cover the question, an answer may still quote them, saying so.
        sources = (() if abstention else retrieval.passages) + documents
        t = time.perf_counter()
        progress(Stage.GENERATING)
        draft, notice = self.generator.generate(question, replace(retrieval, passages=sources), history)
        progress(Stage.VERIFYING)
        verified = self.verifier.run(draft, sources)
        mode = Mode.EXTRACTIVE if notice is Notice.LLM_UNAVAILABLE else self.generator.mode
        if not verified.statements and not draft.not_in_sources and self.fallback is not None:
            # Every statement of the model failed verification: the Regulation's own words still answer.
            draft, _ = self.fallback.generate(question, replace(retrieval, passages=sources), history)
            verified, notice, mode = self.verifier.run(draft, sources), Notice.LLM_UNVERIFIED, Mode.EXTRACTIVE
        timings["generation"] = (time.perf_counter() - t) * 1000
        for reason in verified.dropped + verified.unchecked:
            log.warning("verification: %s", reason, extra={"request_id": request_id})
        if draft.not_in_sources or not verified.statements:
            return self._declined(question, retrieval, request_id, timings,
                                  abstention or Abstention(AbstentionReason.NOT_COVERED), mode)
        notices = tuple(n for n in (Notice.ONLY_DOCUMENTS if abstention else None, notice) if n is not None)
        return Answer(question=question, statements=verified.statements, retrieved=retrieval.passages + documents,
                      mode=mode, request_id=request_id, notices=notices, timings_ms=timings)

    def _documents(self, query: str, asker: Asker) -> tuple[Passage, ...]:
        if self.documents is None or not asker.workspace:
            return ()
        return tuple(self.documents.search(query, asker, DOCUMENT_PASSAGES, DOCUMENT_MIN_SIMILARITY))

    def _declined(self, question: str, retrieval: Retrieval, request_id: str, timings: dict,
                  abstention: Abstention, mode: Mode | None = None) -> Answer:
        return Answer(question=question, statements=(), retrieved=retrieval.passages, mode=mode or self.generator.mode,
                      request_id=request_id, abstention=abstention, related=self._related(retrieval, abstention),
                      timings_ms=timings)

    def _related(self, retrieval: Retrieval, abstention: Abstention) -> tuple[Passage, ...]:
        store = self.retriever.store
        if abstention.reason is AbstentionReason.NO_SUCH_PROVISION:
            # What the article does have, next to what it does not.
            existing = [store.structure.resolve(ProvisionRef(missing.ref.article)) for missing in abstention.missing]
            ids = dict.fromkeys(pid for found in existing if isinstance(found, list) for pid in found)
            return tuple(Retriever.passage(store.get(pid, retrieval.lang), 0.0) for pid in ids)[:RELATED_SHOWN]
        if abstention.reason in NEVER_RELATED or retrieval.evidence is None:
            return ()
        if retrieval.evidence.similarity_guide < RELATED_MIN_SIMILARITY:
            return ()
        return retrieval.passages[:RELATED_SHOWN]


def _unobserved(stage: Stage) -> None:
    """Nobody is waiting to see the stages."""
