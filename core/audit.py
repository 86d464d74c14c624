"""The audit trail: one SQLite row per answered question and per 👍/👎, for whoever must account for the bot.

Writes happen on the answering thread, one INSERT per record in autocommit mode, so a row is
committed (and survives a killed process) before `record_*` returns. Auditing must never cost the
user their answer: every failure is logged and counted instead of raised, and a short busy timeout
bounds how long a locked database can hold an answer back.
"""
from __future__ import annotations

import csv as csv_module
import json
import logging
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from core.models import Answer, Asker

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
_SCHEMA = """
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
"""
_INSERT_ANSWER = (
    "INSERT INTO answers (request_id, time, platform, workspace, channel, user_id, question, retrieved, citations,"
    " abstained, mode, latency_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
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
COLUMNS = ("request_id", "time", "platform", "workspace", "channel", "user", "question", "retrieved",
           "citations", "abstained", "mode", "latency_ms", "feedback")
# Cells starting with these run as formulas when a spreadsheet opens the CSV, and questions are user input.
_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _timestamp(moment: datetime) -> str:
    """Fixed-width UTC ISO time, so that string order in SQL is time order."""
    return moment.astimezone(timezone.utc).isoformat(timespec="microseconds")


class AuditLog:
    def __init__(self, path: Path, *, busy_timeout_s: float = 1.0,
                 clock: Callable[[], datetime] = _utc_now, on_failure: Callable[[], None] | None = None):
        """`clock` returns aware datetimes; `on_failure` is called once per failed write (e.g. a metrics counter)."""
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self.clock = clock
        self.on_failure = on_failure
        self.failed_writes = 0
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        try:
            self._connection()
        except Exception as exc:
            log.error("audit trail at %s cannot be opened (%s); answers are not audited until it can", self.path, exc)

    def record_answer(self, answer: Answer, asker: Asker, latency_ms: float) -> None:
        self._write(_INSERT_ANSWER, lambda: self._answer_row(answer, asker, latency_ms), answer.request_id)

    def record_feedback(self, request_id: str, helpful: bool, asker: Asker) -> bool:
        """Record a 👍/👎 for an answer in the trail; False (nothing recorded) when no answer has that id."""
        try:
            with self._lock:
                known = self._connection().execute(
                    "SELECT 1 FROM answers WHERE request_id = ? LIMIT 1", (request_id,)).fetchone() is not None
        except Exception as exc:
            log.error("audit read failed: %s", exc, extra={"request_id": request_id, "audit_path": str(self.path)})
            known = True  # unknown either way: keep the feedback rather than lose it
        if not known:
            log.warning("feedback for an unknown answer %s not recorded", request_id)
            return False
        self._write(_INSERT_FEEDBACK, lambda: self._feedback_row(request_id, helpful, asker), request_id)
        return True

    def count_answers(self) -> int:
        with self._lock:
            return self._connection().execute("SELECT count(*) FROM answers").fetchone()[0]

    def export(self, since: datetime | None = None) -> Iterator[dict[str, Any]]:
        return export(self.path, since)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _answer_row(self, answer: Answer, asker: Asker, latency_ms: float) -> tuple:
        retrieved = [{"id": p.source_id, "label": p.label, "score": round(p.score, 4)} for p in answer.retrieved]
        citations = [{"label": c.label, "quote": c.quote, "url": c.url, "kind": c.kind} for c in answer.citations]
        return (answer.request_id, _timestamp(self.clock()), asker.platform, asker.workspace, asker.channel,
                asker.user, answer.question, json.dumps(retrieved, ensure_ascii=False),
                json.dumps(citations, ensure_ascii=False), int(answer.abstained), answer.mode.value, float(latency_ms))

    def _feedback_row(self, request_id: str, helpful: bool, asker: Asker) -> tuple:
        return request_id, _timestamp(self.clock()), asker.platform, asker.workspace, asker.user, int(helpful)

    def _write(self, sql: str, row: Callable[[], tuple], request_id: str) -> None:
        # Anything may go wrong here (disk full, locked, unwritable path, closed log, odd data); none of it may
        # reach the user. The row is built inside the guard for that reason.
        try:
            with self._lock:
                self._connection().execute(sql, row())
        except Exception as exc:
            log.error("audit write failed: %s", exc, extra={"request_id": request_id, "audit_path": str(self.path)})
            with self._lock:
                self.failed_writes += 1
            if self.on_failure is not None:
                self.on_failure()

    def _connection(self) -> sqlite3.Connection:
        """The open connection; opened (again) here after a failed open, so a fixed disk or path heals the log."""
        if self._closed:
            raise sqlite3.ProgrammingError("the audit log is closed")
        if self._conn is None:
            self._conn = _open(self.path, self.busy_timeout_s)
        return self._conn


def _open(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    # Autocommit: each INSERT is its own transaction, committed before execute() returns.
    # `timeout` is SQLite's busy_timeout: how long a write waits on another process's lock before failing.
    conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        # FULL: a row reported committed survives power loss too, not only a killed process.
        conn.execute("PRAGMA synchronous = FULL")
        conn.executescript(_SCHEMA)
        conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
    except BaseException:
        conn.close()
        raise
    return conn


def export(path: Path, since: datetime | None = None) -> Iterator[dict[str, Any]]:
    """Answers from `since` (naive: UTC) in time order, each with its latest feedback ("up", "down" or None).

    Reads alongside a running bot: WAL readers neither wait for the writer nor hold it up."""
    # Read-only: exporting must not create a database or need write access to it.
    conn = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)
    try:
        lower = _timestamp(since if since.tzinfo else since.replace(tzinfo=timezone.utc)) if since else ""
        for row in conn.execute(_EXPORT, (lower,)):
            *fields, helpful = row
            record = dict(zip(COLUMNS, fields))
            record["retrieved"] = json.loads(record["retrieved"])
            record["citations"] = json.loads(record["citations"])
            record["abstained"] = bool(record["abstained"])
            record["feedback"] = None if helpful is None else ("up" if helpful else "down")
            yield record
    finally:
        conn.close()


def write_jsonl(rows: Iterable[dict[str, Any]], stream: TextIO) -> None:
    for row in rows:
        stream.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_csv(rows: Iterable[dict[str, Any]], stream: TextIO) -> None:
    writer = csv_module.writer(stream)
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow([_csv_cell(row[column]) for column in COLUMNS])


def _csv_cell(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, str) and value.startswith(_FORMULA_PREFIXES):
        return "'" + value
    return value


def export_command(path: Path, since: str | None, csv: bool, out: TextIO) -> int:
    """`python -m bot audit [--since …] [--csv]`: the audit trail to `out`; errors as one line on stderr."""
    try:
        lower = datetime.fromisoformat(since) if since else None
    except ValueError:
        print(f"error: --since {since!r} is not an ISO date or time (e.g. 2026-11-01 or 2026-11-01T09:30)",
              file=sys.stderr)
        return 2
    if not Path(path).is_file():
        print(f"error: no audit trail at {path}", file=sys.stderr)
        return 2
    try:
        (write_csv if csv else write_jsonl)(export(path, lower), out)
    except sqlite3.Error as exc:
        print(f"error: cannot read the audit trail at {path}: {exc}", file=sys.stderr)
        return 1
    return 0
