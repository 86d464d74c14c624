"""The embedded backend: SQLite files and JSON files under the data dir, for one process on one machine.

Every SQLite file is in WAL mode and written in autocommit, so a row is committed (and survives a killed
process) before the call returns; readers (the audit export) neither wait for the writer nor hold it up.

One module for the seven stores of `core.storage.base`, so that the embedded backend reads side by side with
`core.storage.postgres`, store for store.
"""
from __future__ import annotations

import json
import logging
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from core.models import Turn
from core.storage.base import (
    AnswerRow,
    DeliveryClaims,
    FeedbackRow,
    Journal,
    JournalItem,
    JournalUnavailable,
    StorageUnavailable,
    workspace_name,
)
from core.storage.memory import HISTORY_TURNS

log = logging.getLogger(__name__)

# --- the audit trail ----------------------------------------------------------------------------------------------

AUDIT_SCHEMA_VERSION = 1
_AUDIT_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS answers (
    id INTEGER PRIMARY KEY,
    request_id TEXT NOT NULL,
    time TEXT NOT NULL,
    platform TEXT NOT NULL,
    workspace TEXT,
    channel TEXT,
    user_id TEXT,
    question TEXT NOT NULL,
    retrieved TEXT NOT NULL,
    citations TEXT NOT NULL,
    abstained INTEGER NOT NULL,
    mode TEXT NOT NULL,
    latency_ms REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS answers_time ON answers (time);
CREATE INDEX IF NOT EXISTS answers_request ON answers (request_id);
CREATE TABLE IF NOT EXISTS feedback (
    id INTEGER PRIMARY KEY,
    request_id TEXT NOT NULL,
    time TEXT NOT NULL,
    platform TEXT NOT NULL,
    workspace TEXT,
    user_id TEXT,
    helpful INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS feedback_request ON feedback (request_id);
INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', '{AUDIT_SCHEMA_VERSION}');
"""
_ANSWER_VALUES = ("request_id, time, platform, workspace, channel, user_id, question, retrieved, citations, abstained,"
                  " mode, latency_ms")
_INSERT_ANSWER = f"INSERT INTO answers ({_ANSWER_VALUES}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_INSERT_ANSWER_IF_ABSENT = (f"INSERT INTO answers ({_ANSWER_VALUES}) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?"
                            " WHERE NOT EXISTS (SELECT 1 FROM answers WHERE request_id = ?)")
_INSERT_FEEDBACK = (
    "INSERT INTO feedback (request_id, time, platform, workspace, user_id, helpful) VALUES (?, ?, ?, ?, ?, ?)"
)
# Newest feedback wins: a user may change their mind from 👎 to 👍.
_EXPORT = """
SELECT a.request_id, a.time, a.platform, a.workspace, a.channel, a.user_id, a.question, a.retrieved,
       a.citations, a.abstained, a.mode, a.latency_ms,
       (SELECT f.helpful FROM feedback f WHERE f.request_id = a.request_id ORDER BY f.id DESC LIMIT 1)
FROM answers a WHERE a.time >= ? ORDER BY a.time, a.id
"""
EXPORT_COLUMNS = ("request_id", "time", "platform", "workspace", "channel", "user", "question", "retrieved",
                  "citations", "abstained", "mode", "latency_ms", "feedback")


def timestamp(moment: datetime) -> str:
    """Fixed-width UTC ISO time, so that string order in SQL is time order."""
    return moment.astimezone(timezone.utc).isoformat(timespec="microseconds")


def export_record(fields: Sequence[Any], helpful: bool | int | None) -> dict[str, Any]:
    """One exported answer: the row's columns (JSON lists as text or as lists) and its latest feedback."""
    record = dict(zip(EXPORT_COLUMNS, fields))
    for column in ("retrieved", "citations"):
        if isinstance(record[column], str):
            record[column] = json.loads(record[column])
    record["abstained"] = bool(record["abstained"])
    record["feedback"] = None if helpful is None else ("up" if helpful else "down")
    return record


class SqliteAudit:
    """The audit trail in one SQLite file (`audit.sqlite3`)."""

    def __init__(self, path: Path, *, busy_timeout_s: float = 1.0):
        """`busy_timeout_s`: how long a write waits on another process's lock before it fails."""
        self.path = Path(path)
        self.where = str(self.path)
        self.busy_timeout_s = busy_timeout_s
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._closed = False

    def write_answer(self, row: AnswerRow, *, replace: bool = True) -> None:
        values = (row.request_id, timestamp(row.time), row.platform, row.workspace, row.channel, row.user,
                  row.question, json.dumps(row.retrieved, ensure_ascii=False),
                  json.dumps(row.citations, ensure_ascii=False), int(row.abstained), row.mode, float(row.latency_ms))
        with self._guard() as conn:
            if not replace:
                conn.execute(_INSERT_ANSWER_IF_ABSENT, (*values, row.request_id))
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("DELETE FROM answers WHERE request_id = ?", (row.request_id,))
                conn.execute(_INSERT_ANSWER, values)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def write_feedback(self, row: FeedbackRow) -> None:
        with self._guard() as conn:
            conn.execute(_INSERT_FEEDBACK, (row.request_id, timestamp(row.time), row.platform, row.workspace, row.user,
                                            int(row.helpful)))

    def has_answer(self, request_id: str) -> bool:
        with self._guard() as conn:
            return conn.execute("SELECT 1 FROM answers WHERE request_id = ? LIMIT 1", (request_id,)).fetchone() is not None

    def count_answers(self) -> int:
        with self._guard() as conn:
            return conn.execute("SELECT count(*) FROM answers").fetchone()[0]

    def export(self, since: datetime | None = None) -> Iterator[dict[str, Any]]:
        return export_sqlite(self.path, since)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @contextmanager
    def _guard(self) -> Iterator[sqlite3.Connection]:
        """The connection, under the lock; any failure as StorageUnavailable."""
        with self._lock:
            try:
                yield self._connection()
            except (sqlite3.Error, OSError) as exc:
                raise StorageUnavailable(f"{type(exc).__name__}: {exc}") from exc

    def _connection(self) -> sqlite3.Connection:
        """The open connection; opened (again) here after a failed open, so a fixed disk or path heals the trail."""
        if self._closed:
            raise sqlite3.ProgrammingError("the audit log is closed")
        if self._conn is None:
            # FULL: a row reported committed survives power loss too, not only a killed process. The data dir is
            # not created here: a trail pointed at a missing directory is a fault to report, not to paper over.
            self._conn = open_sqlite(self.path, _AUDIT_SCHEMA, synchronous="FULL", busy_timeout_s=self.busy_timeout_s,
                                     create_dir=False)
        return self._conn


def open_sqlite(path: Path, schema: str, *, synchronous: str, busy_timeout_s: float = 5.0,
                create_dir: bool = True) -> sqlite3.Connection:
    """An autocommit connection (each statement its own transaction, committed before execute() returns) in WAL
    mode, with `schema` applied. `busy_timeout_s`: how long a write waits on another process's lock."""
    if create_dir:
        path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.executescript(schema)
    except BaseException:
        conn.close()
        raise
    return conn


def export_sqlite(path: Path, since: datetime | None = None) -> Iterator[dict[str, Any]]:
    """The audit file's answers from `since` (naive: UTC), read-only: exporting must not create a database or need
    write access to it."""
    conn = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)
    try:
        lower = timestamp(since if since.tzinfo else since.replace(tzinfo=timezone.utc)) if since else ""
        for row in conn.execute(_EXPORT, (lower,)):
            *fields, helpful = row
            yield export_record(fields, helpful)
    finally:
        conn.close()


# --- the journal of accepted questions -----------------------------------------------------------------------------

_JOURNAL_SCHEMA = """
CREATE TABLE IF NOT EXISTS pending (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    added_at REAL NOT NULL
);
"""


def accept_separately(journal: Journal, claims: DeliveryClaims, keys: Sequence[str], key: str, kind: str,
                      payload: dict) -> bool:
    """`Journal.accept` for claims kept apart from the journal: claimed first, released if journaling fails."""
    if not claims.claim(*keys):
        return False
    try:
        journal.add(key, kind, payload)
    except JournalUnavailable:
        claims.release(*keys)  # so that the platform's retry is taken
        raise
    return True


class SqliteJournal:
    """SQLite (WAL, autocommit): a row is on disk before `add` returns, and survives the process being killed.

    `add` raises when the question could not be written: the adapter must then not acknowledge it, so that the
    platform delivers it again. Every other failure is logged and swallowed: a question left open is answered
    again after a restart, which is better than not at all.
    """

    takeover_interval_s = None  # one process: what it left is answered when it starts again

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._last_error: str | None = None

    def accept(self, claims: DeliveryClaims, keys: Sequence[str], key: str, kind: str, payload: dict) -> bool:
        return accept_separately(self, claims, keys, key, kind, payload)

    def add(self, key: str, kind: str, payload: dict) -> None:
        try:
            serialized = json.dumps(payload)
            with self._lock:
                self._connection().execute(
                    "INSERT OR IGNORE INTO pending (key, kind, payload, added_at) VALUES (?, ?, ?, ?)",
                    (key, kind, serialized, time.time()))
        except (TypeError, ValueError, sqlite3.Error, OSError) as exc:
            log.error("Could not journal pending question %s in %s: %s", key, self.path, exc)
            self._failed(exc)
            raise JournalUnavailable(str(exc)) from exc
        self._last_error = None

    def done(self, key: str) -> None:
        try:
            with self._lock:
                self._connection().execute("DELETE FROM pending WHERE key = ?", (key,))
        except (sqlite3.Error, OSError) as exc:
            log.exception("Could not mark %s done in the pending-questions journal %s", key, self.path)
            self._failed(exc)

    def open_items(self) -> list[JournalItem]:
        try:
            with self._lock:
                rows = self._connection().execute(
                    "SELECT key, kind, payload FROM pending ORDER BY added_at, rowid").fetchall()
        except (sqlite3.Error, OSError) as exc:
            log.exception("Could not read the pending-questions journal %s", self.path)
            self._failed(exc)
            return []
        items = []
        for key, kind, payload in rows:
            try:
                items.append((key, kind, json.loads(payload)))
            except ValueError:
                log.error("Dropping unreadable pending question %s from %s", key, self.path)
                self.done(key)
        return items

    def health(self) -> dict:
        return {"ok": self._last_error is None, "where": str(self.path), "last_error": self._last_error}

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _failed(self, exc: BaseException) -> None:
        self._last_error = f"{type(exc).__name__}: {exc}"

    def _connection(self) -> sqlite3.Connection:
        # Opened on first use and again after a failed open, so a disk that comes back heals the journal.
        if self._conn is None:
            # NORMAL: in WAL mode a commit survives the process being killed, which is what this is for;
            # the fsync per question that power-loss safety needs would slow every acknowledgement.
            self._conn = open_sqlite(self.path, _JOURNAL_SCHEMA, synchronous="NORMAL")
        return self._conn


# --- thread memory and the feedback-to-answer map ------------------------------------------------------------------

RETENTION_S = 30 * 24 * 3600  # turns and sent answers untouched this long are deleted
_PURGE_EVERY_S = 3600.0
_CONVERSATIONS_SCHEMA = """
CREATE TABLE IF NOT EXISTS thread_turns (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    thread TEXT NOT NULL,
    role TEXT NOT NULL,
    text TEXT NOT NULL,
    at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS thread_turns_thread ON thread_turns (thread, id);
CREATE INDEX IF NOT EXISTS thread_turns_at ON thread_turns (at);
CREATE TABLE IF NOT EXISTS sent_answers (
    message_id TEXT PRIMARY KEY,
    request_id TEXT NOT NULL,
    at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS sent_answers_at ON sent_answers (at);
"""


class SqliteConversations:
    """Thread memory and the feedback-to-answer map in one SQLite file (`conversations.sqlite3`), so that a
    restart keeps the threads' context and the feedback buttons of answers already sent.

    A failure never costs the user their answer: it is logged, and the question is answered without its thread
    (or the click is not attributed)."""

    def __init__(self, path: Path, *, turns: int = HISTORY_TURNS, retention_s: float = RETENTION_S):
        self.path = Path(path)
        self._turns = turns
        self._retention_s = retention_s
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._purged_at = 0.0

    def history(self, key: str) -> tuple[Turn, ...]:
        try:
            with self._lock:
                rows = self._connection().execute(
                    "SELECT role, text FROM (SELECT id, role, text FROM thread_turns WHERE thread = ? ORDER BY id DESC"
                    " LIMIT ?) ORDER BY id", (key, self._turns)).fetchall()
        except (sqlite3.Error, OSError):
            log.exception("Could not read the thread memory in %s; answering without the thread", self.path)
            return ()
        return tuple(Turn(role, text) for role, text in rows)

    def remember(self, key: str, question: str, answer: str) -> None:
        now = time.time()
        try:
            with self._lock:
                conn = self._connection()
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany("INSERT INTO thread_turns (thread, role, text, at) VALUES (?, ?, ?, ?)",
                                     [(key, "user", question, now), (key, "assistant", answer, now)])
                    conn.execute("DELETE FROM thread_turns WHERE thread = ? AND id NOT IN (SELECT id FROM thread_turns"
                                 " WHERE thread = ? ORDER BY id DESC LIMIT ?)", (key, key, self._turns))
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                self._purge(conn, now)
        except (sqlite3.Error, OSError):
            log.exception("Could not remember a turn of thread %s in %s", key, self.path)

    def get(self, message_id: str) -> str | None:
        try:
            with self._lock:
                row = self._connection().execute("SELECT request_id FROM sent_answers WHERE message_id = ?",
                                                 (message_id,)).fetchone()
        except (sqlite3.Error, OSError):
            log.exception("Could not read the sent answers in %s", self.path)
            return None
        return row[0] if row else None

    def put(self, message_id: str, request_id: str) -> None:
        now = time.time()
        try:
            with self._lock:
                conn = self._connection()
                conn.execute("INSERT OR REPLACE INTO sent_answers (message_id, request_id, at) VALUES (?, ?, ?)",
                             (message_id, request_id, now))
                self._purge(conn, now)
        except (sqlite3.Error, OSError):
            log.exception("Could not record sent answer %s in %s", message_id, self.path)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _purge(self, conn: sqlite3.Connection, now: float) -> None:
        if now - self._purged_at < _PURGE_EVERY_S:
            return
        self._purged_at = now
        conn.execute("DELETE FROM thread_turns WHERE at < ?", (now - self._retention_s,))
        conn.execute("DELETE FROM sent_answers WHERE at < ?", (now - self._retention_s,))

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = open_sqlite(self.path, _CONVERSATIONS_SCHEMA, synchronous="NORMAL", busy_timeout_s=1.0)
        return self._conn


# --- the uploaded documents' library state -------------------------------------------------------------------------


class FileShelves:
    """One JSON state file per workspace, replaced atomically on every change (a crash leaves the old or the new
    one). Only this process writes them, so the version is a counter of its own changes."""

    shared = False

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._versions: dict[str, int] = {}
        self._lock = threading.Lock()

    def version(self, workspace: str) -> int:
        return self._versions.get(workspace, 0)

    def load(self, workspace: str) -> tuple[int, list[dict]]:
        path = self._path(workspace)
        documents = json.loads(path.read_text("utf-8"))["documents"] if path.is_file() else []
        return self.version(workspace), documents

    def update(self, workspace: str, change: Callable[[list[dict]], list[dict]]) -> int:
        with self._lock:
            _, documents = self.load(workspace)
            self._write(workspace, change(documents))
            version = self._versions[workspace] = self.version(workspace) + 1
            return version

    def _path(self, workspace: str) -> Path:
        return self.directory / f"{workspace_name(workspace)}.json"

    def _write(self, workspace: str, documents: list[dict]) -> None:
        path = self._path(workspace)
        payload = {"workspace": workspace, "documents": documents}
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=path.stem, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(payload, out, ensure_ascii=False)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


__all__ = ["AUDIT_SCHEMA_VERSION", "EXPORT_COLUMNS", "FileShelves", "SqliteAudit", "SqliteConversations",
           "SqliteJournal", "accept_separately", "export_record", "export_sqlite", "timestamp"]
