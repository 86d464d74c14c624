"""The audit trail: one row per answered question and per 👍/👎, for whoever must account for the bot.

Auditing must never cost the user their answer, and no row may be lost without anyone knowing. A row is written
on the answering thread, committed before `record_*` returns; a store that is locked or down gets a bounded retry
(SQLite's busy timeout, then a short backoff), and what still fails goes to a local spool file that a background
thread replays into the store in order once it can be written again. While anything waits in the spool the trail
reports itself degraded (`health()`, shown on /healthz and /metrics), and new rows queue behind the spooled ones
without waiting on the store. Only a row that could not even be spooled is lost, and it is counted and logged.

The retry, the spool and its replay are one mechanism over one ordering of rows, so they stay in one module.
"""
from __future__ import annotations

import csv as csv_module
import fcntl
import json
import logging
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from core.models import Answer, Asker
from core.storage.base import AnswerRow, AuditStore, FeedbackRow, StorageUnavailable
from core.storage.embedded import EXPORT_COLUMNS, SqliteAudit

log = logging.getLogger(__name__)

COLUMNS = EXPORT_COLUMNS
SPOOL_SUFFIX = "-spool.jsonl"
RETRY_WAITS_S = (0.05, 0.15)  # between the attempts after the first one
REPLAY_INTERVAL_S = 5.0
# Cells starting with these run as formulas when a spreadsheet opens the CSV, and questions are user input.
_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


class _Spool:
    """Rows waiting for the store: a JSON-lines file, locked while appended to or drained so that several processes
    on one data dir share it safely; in memory when even the file cannot be written."""

    def __init__(self, path: Path):
        self.path = path
        self._memory: list[dict] = []
        self._lock = threading.Lock()
        self.pending = self._count()
        self.answer_ids: set[str] = set()

    def append(self, entry: dict) -> bool:
        """False when the entry could only be kept in memory (lost if the process stops)."""
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        with self._lock:
            self.pending += 1
            if entry["kind"] == "answer":
                self.answer_ids.add(entry["row"]["request_id"])
            try:
                with open(self.path, "a", encoding="utf-8") as out:
                    fcntl.flock(out, fcntl.LOCK_EX)
                    out.write(line)
                    out.flush()
                    os.fsync(out.fileno())
                return True
            except OSError as exc:
                log.error("audit spool %s cannot be written (%s); the row is kept in memory only", self.path, exc)
                self._memory.append(entry)
                return False

    def drain(self, apply: Callable[[dict], None]) -> int:
        """Apply the entries in order until one fails; the rest stay. Returns how many were applied."""
        with self._lock:
            applied = self._drain_memory(apply)
            if len(self._memory):
                return applied
            try:
                applied += self._drain_file(apply)
            except FileNotFoundError:
                pass
            self.pending = self._count() + len(self._memory)
            if not self.pending:
                self.answer_ids.clear()
            return applied

    def _drain_memory(self, apply: Callable[[dict], None]) -> int:
        applied = 0
        while self._memory:
            try:
                apply(self._memory[0])
            except StorageUnavailable:
                break
            self._memory.pop(0)
            applied += 1
        return applied

    def _drain_file(self, apply: Callable[[dict], None]) -> int:
        with open(self.path, "r+", encoding="utf-8") as spool:
            fcntl.flock(spool, fcntl.LOCK_EX)
            lines = spool.read().splitlines()
            applied, rest = 0, []
            for n, line in enumerate(lines):
                try:
                    entry = json.loads(line)
                except ValueError:
                    log.error("Dropping an unreadable line of the audit spool %s: %r", self.path, line[:200])
                    continue
                try:
                    apply(entry)
                except StorageUnavailable:
                    rest = lines[n:]
                    break
                applied += 1
            spool.seek(0)
            spool.truncate()
            spool.write("".join(f"{line}\n" for line in rest))
            spool.flush()
            os.fsync(spool.fileno())
            return applied

    def _count(self) -> int:
        try:
            with open(self.path, encoding="utf-8") as spool:
                return sum(1 for line in spool if line.strip())
        except OSError:
            return 0


class AuditLog:
    def __init__(self, store: AuditStore | Path, *, spool_path: Path | None = None, busy_timeout_s: float = 1.0,
                 clock: Callable[[], datetime] = _utc_now, on_failure: Callable[[], None] | None = None,
                 retry_waits_s: tuple[float, ...] = RETRY_WAITS_S, replay_interval_s: float = REPLAY_INTERVAL_S):
        """`store`: an AuditStore, or the path of an SQLite trail (opened with `busy_timeout_s`). `spool_path`: by
        default `audit-spool.jsonl` beside a path, else in the working directory. `clock` returns aware datetimes;
        `on_failure` is called once per row the store did not take at once (e.g. a metrics counter)."""
        if isinstance(store, (str, Path)):
            spool_path = spool_path or Path(store).with_name(Path(store).stem + SPOOL_SUFFIX)
            store = SqliteAudit(Path(store), busy_timeout_s=busy_timeout_s)
        self.store = store
        self.path = getattr(store, "path", None)
        self.clock = clock
        self.on_failure = on_failure
        self.retry_waits_s = retry_waits_s
        self.replay_interval_s = replay_interval_s
        self.failed_writes = 0  # rows the store did not take at once: spooled, or lost
        self.lost_rows = 0  # rows not even the spool could keep
        self._last_error: str | None = None
        self._spool = _Spool(Path(spool_path or Path("audit" + SPOOL_SUFFIX)))
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._replayer: threading.Thread | None = None
        if self._spool.pending:
            log.warning("%d audit rows wait in %s from an earlier run; replaying them", self._spool.pending,
                        self._spool.path)
            self._start_replayer()

    def record_answer(self, answer: Answer, asker: Asker, latency_ms: float) -> None:
        """`answer.request_id` names the row: an answer with the id of a stored one replaces it."""
        self._record(lambda: {"kind": "answer", "row": self._answer_row(answer, asker, latency_ms).to_json()},
                     answer.request_id)

    def record_feedback(self, request_id: str, helpful: bool, asker: Asker) -> bool:
        """Record a 👍/👎 for an answer in the trail; False (nothing recorded) when no answer has that id."""
        try:
            known = request_id in self._spool.answer_ids or self.store.has_answer(request_id)
        except StorageUnavailable as exc:
            log.error("audit read failed: %s", exc, extra={"request_id": request_id, "audit_path": self.store.where})
            known = True  # unknown either way: keep the feedback rather than lose it
        if not known:
            log.warning("feedback for an unknown answer %s not recorded", request_id)
            return False
        self._record(lambda: {"kind": "feedback", "row": self._feedback_row(request_id, helpful, asker).to_json()},
                     request_id)
        return True

    def count_answers(self) -> int:
        return self.store.count_answers()

    def export(self, since: datetime | None = None) -> Iterator[dict[str, Any]]:
        return self.store.export(since)

    def replay(self) -> int:
        """Write what waits in the spool, in order, until the store refuses; returns how many rows were written."""
        written = self._spool.drain(lambda entry: self._apply(entry, replace=False))
        if written:
            log.warning("replayed %d audit rows from %s; %d still wait", written, self._spool.path, self._spool.pending)
        if not self._spool.pending:
            self._last_error = None
        return written

    def health(self) -> dict:
        """`ok` False while rows wait in the spool or any was lost since the start."""
        spooled = self._spool.pending
        return {"ok": not spooled and not self.lost_rows, "where": self.store.where, "spooled": spooled,
                "lost": self.lost_rows, "failed_writes": self.failed_writes, "last_error": self._last_error}

    def close(self) -> None:
        self._closed.set()
        if self._replayer is not None:
            self._replayer.join(timeout=self.replay_interval_s + 5)
        if self._spool.pending:
            self.replay()  # a last try, so that a clean stop leaves nothing behind when the store is back
        self.store.close()

    def _answer_row(self, answer: Answer, asker: Asker, latency_ms: float) -> AnswerRow:
        retrieved = [{"id": p.source_id, "label": p.label, "score": round(p.score, 4)} for p in answer.retrieved]
        citations = [{"label": c.label, "quote": c.quote, "url": c.url, "kind": c.kind} for c in answer.citations]
        return AnswerRow(answer.request_id, self.clock(), asker.platform, asker.workspace, asker.channel, asker.user,
                         answer.question, retrieved, citations, answer.abstained, answer.mode.value, float(latency_ms))

    def _feedback_row(self, request_id: str, helpful: bool, asker: Asker) -> FeedbackRow:
        return FeedbackRow(request_id, self.clock(), asker.platform, asker.workspace, asker.user, helpful)

    def _apply(self, entry: dict, *, replace: bool) -> None:
        if entry["kind"] == "answer":
            self.store.write_answer(AnswerRow.from_json(entry["row"]), replace=replace)
        else:
            self.store.write_feedback(FeedbackRow.from_json(entry["row"]))

    def _record(self, entry: Callable[[], dict], request_id: str) -> None:
        # Anything may go wrong here (disk full, locked, unreachable database, odd data); none of it may reach the
        # user. The row is built inside the guard for that reason.
        try:
            built = entry()
        except Exception:
            log.exception("audit row could not be built: lost", extra={"request_id": request_id})
            self._count_failure(lost=True)
            return
        if self._closed.is_set():
            self._spool_entry(built, request_id, "the audit log is closed")
            return
        if self._spool.pending:  # degraded: queue behind the spooled rows, without waiting on the store
            self._spool_entry(built, request_id, self._last_error or "rows wait in the spool")
            return
        for wait_s in (*self.retry_waits_s, None):
            try:
                self._apply(built, replace=True)
                return
            except StorageUnavailable as exc:
                error = str(exc)
            if wait_s is not None:
                time.sleep(wait_s)
        self._spool_entry(built, request_id, error)

    def _spool_entry(self, entry: dict, request_id: str, error: str) -> None:
        self._last_error = error
        kept = self._spool.append(entry)
        log.error("audit write failed (%s): the row is spooled in %s%s", error, self._spool.path,
                  "" if kept else " (in memory only: lost if the process stops)",
                  extra={"request_id": request_id, "audit_path": self.store.where})
        self._count_failure(lost=False)
        self._start_replayer()

    def _count_failure(self, *, lost: bool) -> None:
        with self._lock:
            self.failed_writes += 1
            self.lost_rows += lost
        if self.on_failure is not None:
            self.on_failure()

    def _start_replayer(self) -> None:
        with self._lock:
            if self._replayer is not None or self._closed.is_set():
                return
            self._replayer = threading.Thread(target=self._replay_until_closed, name="gdpr-audit-replay", daemon=True)
            self._replayer.start()

    def _replay_until_closed(self) -> None:
        while not self._closed.wait(self.replay_interval_s):
            if self._spool.pending:
                try:
                    self.replay()
                except Exception:
                    log.exception("replaying the audit spool %s failed", self._spool.path)


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


def export_command(trail: Path | Callable[[], AuditStore], since: str | None, csv: bool, out: TextIO) -> int:
    """`python -m bot audit [--since …] [--csv]`: the audit trail (an SQLite file, or a store opened by `trail`) to
    `out`; errors as one line on stderr."""
    try:
        lower = datetime.fromisoformat(since) if since else None
    except ValueError:
        print(f"error: --since {since!r} is not an ISO date or time (e.g. 2026-11-01 or 2026-11-01T09:30)",
              file=sys.stderr)
        return 2
    if isinstance(trail, (str, Path)) and not Path(trail).is_file():
        print(f"error: no audit trail at {trail}", file=sys.stderr)
        return 2
    from core.storage.embedded import export_sqlite

    try:
        rows = export_sqlite(Path(trail), lower) if isinstance(trail, (str, Path)) else trail().export(lower)
        (write_csv if csv else write_jsonl)(rows, out)
    except (sqlite3.Error, StorageUnavailable) as exc:
        where = trail if isinstance(trail, (str, Path)) else "the database"
        print(f"error: cannot read the audit trail at {where}: {exc}", file=sys.stderr)
        return 1
    return 0
