"""The storage seam: every store the bot keeps beyond one question, from one of two backends.

- embedded (the default): SQLite and JSON files under the data dir, in memory what a restart may forget (redelivery
  claims, fair-use buckets). One process on one machine.
- postgres (`DATABASE_URL=postgresql://…`): one database shared by every replica, so that any of them answers a
  retry once, limits a user once, sees every upload, continues every thread and takes over the questions of a
  replica that died.

`open_storage` picks the backend; everything else sees only the protocols of `core.storage.base`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.storage.base import (
    AnswerRow,
    AuditStore,
    BucketLimit,
    BucketStore,
    DeliveryClaims,
    FeedbackRow,
    Journal,
    JournalItem,
    JournalUnavailable,
    LibraryShelves,
    SentAnswers,
    StorageUnavailable,
    ThreadMemory,
    workspace_name,
)

AUDIT_FILE = "audit.sqlite3"
CONVERSATIONS_FILE = "conversations.sqlite3"
DOCUMENTS_DIR = "documents"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def journal_file(name: str) -> str:
    return f"{name}_pending.sqlite3"


@dataclass
class Storage:
    """Every store of one deployment. `buckets` is None where fair use is counted per process (embedded)."""

    backend: str  # "embedded" or "postgres"
    where: str  # the data dir, or the database's host:port/name
    audit: AuditStore
    deliveries: DeliveryClaims
    threads: ThreadMemory
    sent_answers: SentAnswers
    shelves: LibraryShelves
    buckets: BucketStore | None
    _journal: Callable[[str], Journal]
    _health: Callable[[], dict] = lambda: {}
    _close: Callable[[], None] = lambda: None
    _journals: dict[str, Journal] = field(default_factory=dict)

    def journal(self, name: str) -> Journal:
        """The journal of accepted questions of one platform ("slack")."""
        if name not in self._journals:
            self._journals[name] = self._journal(name)
        return self._journals[name]

    def health(self) -> dict:
        """`ok` False when the backend cannot be reached; each journal's state."""
        journals = {name: journal.health() for name, journal in self._journals.items()}
        report = {"backend": self.backend, "where": self.where, **self._health()}
        report["ok"] = report.get("ok", True) and all(j["ok"] for j in journals.values())
        return report | ({"journals": journals} if journals else {})

    def close(self) -> None:
        for journal in self._journals.values():
            journal.close()
        self._close()


def embedded_storage(data_dir: Path) -> Storage:
    from core.storage.embedded import FileShelves, SqliteAudit, SqliteConversations, SqliteJournal
    from core.storage.memory import Deliveries

    data_dir = Path(data_dir)
    conversations = SqliteConversations(data_dir / CONVERSATIONS_FILE)
    audit = SqliteAudit(data_dir / AUDIT_FILE)

    def close() -> None:
        conversations.close()
        audit.close()

    return Storage("embedded", str(data_dir), audit, Deliveries(), conversations, conversations,
                   FileShelves(data_dir / DOCUMENTS_DIR), None, lambda name: SqliteJournal(data_dir / journal_file(name)),
                   _close=close)


def postgres_storage(url: str, *, lease_s: float | None = None) -> Storage:
    """Raises StorageUnavailable, naming the database, when it cannot be reached or migrated. `lease_s`: how long
    the questions of a replica that stopped wait before another takes them over (default `postgres.LEASE_S`)."""
    from core.storage.postgres import (LEASE_S, PostgresAudit, PostgresBuckets, PostgresClaims, PostgresConversations,
                                       PostgresDatabase, PostgresJournal, PostgresShelves)

    db = PostgresDatabase(url)
    conversations = PostgresConversations(db)
    return Storage("postgres", db.where, PostgresAudit(db), PostgresClaims(db), conversations, conversations,
                   PostgresShelves(db), PostgresBuckets(db), lambda name: PostgresJournal(db, name, lease_s=lease_s or LEASE_S),
                   _health=db.health, _close=db.close)


def open_storage(data_dir: Path, database_url: str | None) -> Storage:
    """Postgres when `database_url` is set, else the embedded files under `data_dir`."""
    if not database_url:
        return embedded_storage(data_dir)
    if not database_url.startswith(POSTGRES_SCHEMES):
        raise ValueError(f"DATABASE_URL must start with {' or '.join(POSTGRES_SCHEMES)}")
    return postgres_storage(database_url)


__all__ = [
    "AnswerRow", "AuditStore", "BucketLimit", "BucketStore", "DeliveryClaims", "FeedbackRow", "Journal", "JournalItem",
    "JournalUnavailable", "LibraryShelves", "SentAnswers", "Storage", "StorageUnavailable", "ThreadMemory",
    "embedded_storage", "open_storage", "postgres_storage", "workspace_name",
]
