"""What the bot keeps beyond one question, as small protocols: one implementation per backend.

The embedded backend (`core.storage.embedded`) keeps it in SQLite files and JSON files under the data dir, and
in memory where a restart loses nothing that matters; the Postgres backend (`core.storage.postgres`) keeps all
of it in one database that every replica shares.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Protocol

from core.models import Turn


class StorageUnavailable(Exception):
    """The store could not be read or written (disk, lock, database down); the message says why."""


class JournalUnavailable(StorageUnavailable):
    """A question could not be journaled; it must not be acknowledged."""


# --- the audit trail -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AnswerRow:
    """One answered question as the audit trail keeps it."""

    request_id: str
    time: datetime  # aware, UTC
    platform: str
    workspace: str | None
    channel: str | None
    user: str | None
    question: str
    retrieved: list[dict]
    citations: list[dict]
    abstained: bool
    mode: str  # the mode that produced the answer shown
    latency_ms: float

    def to_json(self) -> dict:
        return {**asdict(self), "time": self.time.isoformat()}

    @classmethod
    def from_json(cls, data: dict) -> AnswerRow:
        return cls(**{**data, "time": datetime.fromisoformat(data["time"])})


@dataclass(frozen=True)
class FeedbackRow:
    request_id: str
    time: datetime
    platform: str
    workspace: str | None
    user: str | None
    helpful: bool

    def to_json(self) -> dict:
        return {**asdict(self), "time": self.time.isoformat()}

    @classmethod
    def from_json(cls, data: dict) -> FeedbackRow:
        return cls(**{**data, "time": datetime.fromisoformat(data["time"])})


class AuditStore(Protocol):
    """Where audit rows are committed. Every method raises StorageUnavailable when the store cannot be used."""

    where: str  # for messages: a path, or the database's host and name

    def write_answer(self, row: AnswerRow, *, replace: bool = True) -> None:
        """Committed when this returns. An answer with the request id of a stored one replaces it (`replace`), or
        leaves it as it is: an answer made again for the same message (a replica died before posting it) replaces
        the one nobody saw, and replaying a row that was in fact written changes nothing."""
        ...

    def write_feedback(self, row: FeedbackRow) -> None: ...

    def has_answer(self, request_id: str) -> bool: ...

    def count_answers(self) -> int: ...

    def export(self, since: datetime | None = None) -> Iterator[dict[str, Any]]:
        """Answers from `since` (aware) in time order, each with its latest feedback ("up", "down" or None)."""
        ...

    def close(self) -> None: ...


# --- what the chat adapters keep -----------------------------------------------------------------------------------


class DeliveryClaims(Protocol):
    """Redelivery detection: a key (a message's, a file share's) claimed within the claims' lifetime is a
    duplicate, whichever replica claimed it."""

    def claim(self, *keys: str) -> bool:
        """True for the first caller with any of `keys`; all of them count as claimed afterwards."""
        ...

    def release(self, *keys: str) -> None:
        """Forget `keys`, so that the platform's next delivery is taken (this one could not be accepted)."""
        ...


JournalItem = tuple[str, str, dict]  # key, kind, payload


class Journal(Protocol):
    """Questions accepted (acknowledged to the platform) and not answered yet, kept until they are."""

    # Seconds between looks for questions another process accepted and can no longer answer; None: only at start.
    takeover_interval_s: float | None

    def accept(self, claims: DeliveryClaims, keys: Sequence[str], key: str, kind: str, payload: dict) -> bool:
        """Claim the delivery `keys` and journal the question under `key`, both or neither. False: a redelivery
        (nothing journaled). Raises JournalUnavailable when it could not be written."""
        ...

    def add(self, key: str, kind: str, payload: dict) -> None:
        """Journal an accepted question; adding a key again keeps the first entry. Raises JournalUnavailable."""
        ...

    def done(self, key: str) -> None: ...

    def open_items(self) -> list[JournalItem]:
        """The questions this process should answer now, oldest first: at start, those a previous process left;
        with a shared journal, also those of a replica that stopped renewing its hold on them.

        A local journal (`takeover_interval_s` None) hands an entry out for as long as it is open: the caller marks
        it done before answering, so that a question that killed the process does not kill every restart. A shared
        journal holds what it hands out under this replica's lease, so that it is answered even if this replica
        dies too, and drops (and logs) an entry handed out too often."""
        ...

    def health(self) -> dict: ...

    def close(self) -> None: ...


class ThreadMemory(Protocol):
    """The last few turns of each recent thread, for platforms that cannot read a thread back (Teams)."""

    def history(self, key: str) -> tuple[Turn, ...]: ...

    def remember(self, key: str, question: str, answer: str) -> None: ...


class SentAnswers(Protocol):
    """Which answer (request id) each sent message carries, for feedback buttons that report only the message."""

    def get(self, message_id: str) -> str | None: ...

    def put(self, message_id: str, request_id: str) -> None: ...


class BucketStore(Protocol):
    """Token buckets shared by every replica (fair use)."""

    def take(self, buckets: Sequence[BucketLimit]) -> float:
        """Refill each bucket and take one token from every one of them, all or none, atomically. Returns 0.0 when
        taken, else the seconds until each of them holds a whole token again (nothing taken)."""
        ...


@dataclass(frozen=True)
class BucketLimit:
    """A token bucket: holds up to `burst` tokens and refills at `rate_per_s`."""

    key: str
    rate_per_s: float
    burst: int

    def refilled(self, tokens: float, elapsed_s: float) -> float:
        return min(float(self.burst), tokens + max(0.0, elapsed_s) * self.rate_per_s)

    def wait_s(self, tokens: float) -> float:
        """Seconds until a bucket holding `tokens` holds a whole token again."""
        return max(0.0, (1.0 - tokens) / self.rate_per_s)


def workspace_name(workspace: str) -> str:
    """A workspace's name in file names and Chroma collections: workspace ids may hold any character."""
    return "documents-" + hashlib.sha256(workspace.encode()).hexdigest()[:32]


class LibraryShelves(Protocol):
    """Each workspace's uploaded documents (records, chunks and their languages: what listing and the lexical index
    need), as JSON objects, with a version that changes on every change, so that a replica sees another's upload
    on its next search."""

    shared: bool  # seen by other processes: vectors of an upload in progress elsewhere must not be cleared

    def version(self, workspace: str) -> int: ...

    def load(self, workspace: str) -> tuple[int, list[dict]]:
        """The version and the documents, in upload order."""
        ...

    def update(self, workspace: str, change: Callable[[list[dict]], list[dict]]) -> int:
        """Replace the documents with `change(documents)`, atomically (nobody else changes them meanwhile; if
        `change` or the write fails, nothing changes). Returns the new version."""
        ...


__all__ = [
    "AnswerRow", "AuditStore", "BucketLimit", "BucketStore", "DeliveryClaims", "FeedbackRow", "Journal",
    "JournalItem", "JournalUnavailable", "LibraryShelves", "SentAnswers", "StorageUnavailable", "ThreadMemory",
    "workspace_name",
]
