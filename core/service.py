"""The one entry point adapters call: `AnswerService.ask()`.

Adapters depend only on this protocol and the dataclasses in `core.models`, so tests can hand them a fake
service and the real one can grow (audit trail, fair use) without touching any adapter. A question that is
not answered raises a `QuestionRejected` subclass carrying values; each adapter words it.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, Sequence

from core.models import Answer, Asker, Stage, Turn

# Called on the thread that answers, as each stage begins; it must return at once and never raise.
Progress = Callable[[Stage], None]


class QuestionRejected(Exception):
    """The question is not answered, for a reason the user must be told (the subclass says which)."""


class EmptyQuestion(QuestionRejected):
    pass


class RateLimited(QuestionRejected):
    def __init__(self, retry_after_s: float):
        super().__init__(f"rate limited for {retry_after_s:.1f} s")
        self.retry_after_s = retry_after_s


class QuestionTooLong(QuestionRejected):
    def __init__(self, length: int, limit: int):
        super().__init__(f"{length} characters, over the limit of {limit}")
        self.length = length
        self.limit = limit


class AnswerService(Protocol):
    def ask(self, question: str, *, history: Sequence[Turn] = (), asker: Asker = Asker(),
            request_id: str | None = None, progress: Progress | None = None) -> Answer:
        """Answer `question` (with its thread's earlier turns) under `request_id` (a new one by default; answering
        under the id of an earlier answer replaces it in the audit trail), telling `progress` each stage as it
        begins. Raises QuestionRejected subclasses."""
        ...

    def record_feedback(self, request_id: str, *, helpful: bool, asker: Asker) -> bool:
        """Attach a 👍 (helpful=True) or 👎 to the answer with `request_id`; False when no answer has that id."""
        ...
