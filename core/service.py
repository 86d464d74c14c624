"""The one entry point adapters call: `AnswerService.ask()`.

Adapters depend only on this protocol and the dataclasses in `core.models`, so tests can hand them
a fake service and the real one can grow (audit trail, fair use) without touching any adapter.
"""
from __future__ import annotations

from typing import Protocol, Sequence

from core.models import Answer, Asker, Turn


class QuestionRejected(Exception):
    """The question is not answered, for a reason the user must be told (`str(exc)` is that reason)."""


class RateLimited(QuestionRejected):
    def __init__(self, retry_after_s: float):
        self.retry_after_s = retry_after_s
        super().__init__(
            f"You're asking faster than I can fairly answer everyone. Please try again in {max(1, round(retry_after_s))} s."
        )


class QuestionTooLong(QuestionRejected):
    def __init__(self, length: int, limit: int):
        super().__init__(f"That message is {length} characters long; please keep questions under {limit} characters.")


class AnswerService(Protocol):
    def ask(self, question: str, *, history: Sequence[Turn] = (), asker: Asker = Asker()) -> Answer:
        """Answer `question` (with its thread's earlier turns). Raises QuestionRejected subclasses."""
        ...

    def record_feedback(self, request_id: str, *, helpful: bool, asker: Asker) -> None:
        """Attach a 👍 (helpful=True) or 👎 to the answer with `request_id`."""
        ...
