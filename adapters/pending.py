"""A durable journal of questions an adapter accepted but has not answered yet.

Chat platforms never re-send an event that was acknowledged, so a process killed between the acknowledgement
and the answer (OOM, crash) would leave the asker in silence. An adapter adds each question before it
acknowledges, marks it done once the reply is posted, and answers what is still open when it starts again.

`add` raises when the question could not be written: the adapter must then not acknowledge it, so that the
platform delivers it again. Every other failure is logged and swallowed: a question left open is answered
again after a restart, which is better than not at all.
"""
from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from pathlib import Path

logger = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pending (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    added_at REAL NOT NULL
);
"""


class JournalUnavailable(Exception):
    """A question could not be journaled; it must not be acknowledged."""


class PendingJournal:
    """SQLite (WAL, autocommit): a row is on disk before `add` returns, and survives the process being killed."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def add(self, key: str, kind: str, payload: dict) -> None:
        """Journal an accepted question, on disk when this returns; adding a key again (a redelivery) keeps
        the first entry. Raises JournalUnavailable when it could not be written."""
        try:
            serialized = json.dumps(payload)
            with self._lock:
                self._connection().execute(
                    "INSERT OR IGNORE INTO pending (key, kind, payload, added_at) VALUES (?, ?, ?, ?)",
                    (key, kind, serialized, time.time()))
        except (TypeError, ValueError, sqlite3.Error, OSError) as exc:
            logger.error("Could not journal pending question %s in %s: %s", key, self.path, exc)
            raise JournalUnavailable(str(exc)) from exc

    def done(self, key: str) -> None:
        try:
            with self._lock:
                self._connection().execute("DELETE FROM pending WHERE key = ?", (key,))
        except (sqlite3.Error, OSError):
            logger.exception("Could not mark %s done in the pending-questions journal %s", key, self.path)

    def open_items(self) -> list[tuple[str, str, dict]]:
        """(key, kind, payload) of every question not marked done, oldest first."""
        try:
            with self._lock:
                rows = self._connection().execute(
                    "SELECT key, kind, payload FROM pending ORDER BY added_at, rowid").fetchall()
        except (sqlite3.Error, OSError):
            logger.exception("Could not read the pending-questions journal %s", self.path)
            return []
        items = []
        for key, kind, payload in rows:
            try:
                items.append((key, kind, json.loads(payload)))
            except ValueError:
                logger.error("Dropping unreadable pending question %s from %s", key, self.path)
                self.done(key)
        return items

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _connection(self) -> sqlite3.Connection:
        # Opened on first use and again after a failed open, so a disk that comes back heals the journal.
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                # NORMAL: in WAL mode a commit survives the process being killed, which is what this is for;
                # the fsync per question that power-loss safety needs would slow every acknowledgement.
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.executescript(_SCHEMA)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn


__all__ = ["JournalUnavailable", "PendingJournal"]
