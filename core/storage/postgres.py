"""The Postgres backend: every store in one database that all replicas share (psycopg 3 and its pool).

Each operation is one short transaction on a pooled autocommit connection. Times that replicas compare (leases,
claim lifetimes, fair-use refills) come from the database's clock, so replicas on machines whose clocks disagree
still agree. The schema is `core.storage.migrations`.

One module for the seven stores of `core.storage.base` on one database: they share the pool, the clock and
the error mapping, and splitting them would scatter the one place that says how this backend behaves.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from core.models import Turn
from core.storage.base import (
    AnswerRow,
    BucketLimit,
    DeliveryClaims,
    FeedbackRow,
    JournalItem,
    JournalUnavailable,
    StorageUnavailable,
)
from core.storage.embedded import RETENTION_S, accept_separately, export_record
from core.storage.memory import CLAIM_TTL_S, HISTORY_TURNS
from core.storage.migrations import migrate

log = logging.getLogger(__name__)

POOL_SIZE = 10  # the core's threads, the journal's, the audit replay and the event loop's claims
CONNECT_TIMEOUT_S = 5
WAIT_TIMEOUT_S = 5.0  # for a pooled connection: a database that is down fails the call, not the process
# A replica renews its hold on the questions it accepted every LEASE_S / 3; when it stops (killed, cut off), the
# others take them over once LEASE_S has passed.
LEASE_S = 10.0
TAKEOVER_INTERVAL_S = 2.0
MAX_HAND_OUTS = 3  # an entry taken over this often is what kills the replicas that take it
PURGE_EVERY_S = 60.0
BUCKETS_IDLE_S = 24 * 3600.0  # an idle bucket is full long before this; deleting it changes nothing
_ERRORS = (psycopg.Error, PoolTimeout, OSError)


def describe(url: str) -> str:
    """`host:port/dbname` of a connection URL, without its user or password, for messages and /healthz."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "an unparsable DATABASE_URL"
    return f"{parts.get('host', 'localhost')}:{parts.get('port', 5432)}/{parts.get('dbname', '')}"


class PostgresDatabase:
    """The pool every store shares; opening it applies the missing migrations."""

    def __init__(self, url: str, *, pool_size: int = POOL_SIZE):
        self.where = describe(url)
        self._pool = ConnectionPool(url, min_size=1, max_size=pool_size, open=False, timeout=WAIT_TIMEOUT_S,
                                    kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S},
                                    check=ConnectionPool.check_connection, name="gdprbot")
        try:
            self._pool.open(wait=True, timeout=CONNECT_TIMEOUT_S * 2)
            with self._pool.connection() as conn:
                migrate(conn)
        except _ERRORS as exc:
            self._pool.close()
            raise StorageUnavailable(f"cannot use the database at {self.where} (DATABASE_URL): {exc}") from exc
        self._last_error: str | None = None

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A pooled connection; any database failure as StorageUnavailable (and remembered for /healthz)."""
        try:
            with self._pool.connection() as conn:
                yield conn
        except _ERRORS as exc:
            self._last_error = f"{type(exc).__name__}: {exc}"
            raise StorageUnavailable(f"database {self.where}: {exc}") from exc

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        with self.connection() as conn, conn.transaction():
            yield conn

    def health(self) -> dict:
        try:
            with self.connection() as conn:
                conn.execute("SELECT 1")
        except StorageUnavailable:
            return {"ok": False, "where": self.where, "last_error": self._last_error}
        return {"ok": True, "where": self.where}

    def close(self) -> None:
        self._pool.close()


class _Every:
    """Runs housekeeping at most once per `interval_s`, on whichever call comes due."""

    def __init__(self, interval_s: float):
        self._interval_s = interval_s
        self._last = 0.0
        self._lock = threading.Lock()

    def due(self) -> bool:
        with self._lock:
            now = time.monotonic()
            if now - self._last < self._interval_s:
                return False
            self._last = now
            return True


# --- the audit trail ----------------------------------------------------------------------------------------------

_ANSWER_COLUMNS = ("request_id, time, platform, workspace, channel, user_id, question, retrieved, citations, abstained,"
                   " mode, latency_ms")
_EXPORT = """
SELECT a.request_id, a.time, a.platform, a.workspace, a.channel, a.user_id, a.question, a.retrieved,
       a.citations, a.abstained, a.mode, a.latency_ms,
       (SELECT f.helpful FROM audit_feedback f WHERE f.request_id = a.request_id ORDER BY f.id DESC LIMIT 1)
FROM audit_answers a WHERE a.time >= %s ORDER BY a.time, a.id
"""


class PostgresAudit:
    def __init__(self, db: PostgresDatabase):
        self._db = db
        self.where = db.where

    def write_answer(self, row: AnswerRow, *, replace: bool = True) -> None:
        on_conflict = ("DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in _ANSWER_COLUMNS.split(", ")[1:])
                       if replace else "DO NOTHING")
        with self._db.connection() as conn:
            conn.execute(
                f"INSERT INTO audit_answers ({_ANSWER_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                f" ON CONFLICT (request_id) {on_conflict}",
                (row.request_id, row.time, row.platform, row.workspace, row.channel, row.user, row.question,
                 Jsonb(row.retrieved), Jsonb(row.citations), row.abstained, row.mode, float(row.latency_ms)))

    def write_feedback(self, row: FeedbackRow) -> None:
        with self._db.connection() as conn:
            conn.execute("INSERT INTO audit_feedback (request_id, time, platform, workspace, user_id, helpful)"
                         " VALUES (%s, %s, %s, %s, %s, %s)",
                         (row.request_id, row.time, row.platform, row.workspace, row.user, row.helpful))

    def has_answer(self, request_id: str) -> bool:
        with self._db.connection() as conn:
            return conn.execute("SELECT 1 FROM audit_answers WHERE request_id = %s", (request_id,)).fetchone() is not None

    def count_answers(self) -> int:
        with self._db.connection() as conn:
            return conn.execute("SELECT count(*) FROM audit_answers").fetchone()[0]

    def export(self, since: datetime | None = None) -> Iterator[dict[str, Any]]:
        lower = (since if since.tzinfo else since.replace(tzinfo=timezone.utc)) if since else datetime.min.replace(
            tzinfo=timezone.utc)
        with self._db.connection() as conn, conn.cursor(name=f"export_{uuid.uuid4().hex[:8]}") as cursor:
            # A named (server-side) cursor inside a transaction: a long trail is streamed, not loaded at once.
            with conn.transaction():
                cursor.execute(_EXPORT, (lower,))
                for row in cursor:
                    request_id, moment, *fields, helpful = row
                    yield export_record((request_id, _iso(moment), *fields), helpful)

    def close(self) -> None:
        """The database is closed by its owner (`PostgresStorage`)."""


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="microseconds")


# --- redelivery claims and the journal ---------------------------------------------------------------------------

_CLAIM = """
INSERT INTO delivery_claims (key) SELECT key FROM unnest(%(keys)s::text[]) AS t(key) ORDER BY key
ON CONFLICT (key) DO UPDATE SET claimed_at = clock_timestamp()
    WHERE delivery_claims.claimed_at < clock_timestamp() - make_interval(secs => %(ttl)s)
RETURNING key
"""


class PostgresClaims:
    """Claims every replica sees: `INSERT … ON CONFLICT DO NOTHING`, kept `ttl_s` (an hour covers Slack's retries,
    at once, after a minute and after five). Keys are inserted in order, so replicas claiming overlapping keys
    at the same moment wait for each other instead of deadlocking."""

    def __init__(self, db: PostgresDatabase, *, ttl_s: float = CLAIM_TTL_S):
        self._db = db
        self._ttl_s = ttl_s
        self._purge = _Every(PURGE_EVERY_S)

    def claim(self, *keys: str) -> bool:
        """On a database failure the delivery is taken: answering a possible duplicate beats dropping a question."""
        try:
            with self._db.transaction() as conn:
                return self.claim_in(conn, keys)
        except StorageUnavailable:
            log.exception("Could not claim delivery %s; taking it", keys)
            return True

    def claim_in(self, conn: psycopg.Connection, keys: Sequence[str]) -> bool:
        """Claim `keys` inside the caller's transaction."""
        keys = sorted(set(keys))
        claimed = conn.execute(_CLAIM, {"keys": keys, "ttl": self._ttl_s}).fetchall()
        if self._purge.due():
            conn.execute("DELETE FROM delivery_claims WHERE claimed_at < clock_timestamp() - make_interval(secs => %s)",
                         (self._ttl_s,))
        return len(claimed) == len(keys)

    def release(self, *keys: str) -> None:
        try:
            with self._db.connection() as conn:
                conn.execute("DELETE FROM delivery_claims WHERE key = ANY(%s)", (list(keys),))
        except StorageUnavailable:
            log.exception("Could not release delivery %s", keys)


class PostgresJournal:
    """The journal every replica shares. Each entry is held by the replica that accepted it, under a lease it
    renews while it runs; a replica that stops renewing (killed, cut off) loses its entries to the first other
    replica that looks (`open_items`, every `takeover_interval_s`), or to itself once restarted."""

    takeover_interval_s = TAKEOVER_INTERVAL_S

    def __init__(self, db: PostgresDatabase, name: str, *, lease_s: float = LEASE_S):
        self._db = db
        self.name = name
        self.lease_s = lease_s
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._last_error: str | None = None
        self._stop = threading.Event()
        self._renewer = threading.Thread(target=self._renew, name=f"gdpr-journal-lease-{name}", daemon=True)
        self._renewer.start()

    def accept(self, claims: DeliveryClaims, keys: Sequence[str], key: str, kind: str, payload: dict) -> bool:
        if not isinstance(claims, PostgresClaims) or claims._db is not self._db:
            return accept_separately(self, claims, keys, key, kind, payload)
        try:
            # One transaction: a replica killed in between leaves neither a claim without its entry (the platform's
            # retry would be dropped) nor an entry without its claim.
            with self._db.transaction() as conn:
                if not claims.claim_in(conn, keys):
                    return False
                self._insert(conn, key, kind, payload)
        except (StorageUnavailable, TypeError, ValueError) as exc:
            self._failed(key, exc)
        self._last_error = None
        return True

    def add(self, key: str, kind: str, payload: dict) -> None:
        try:
            with self._db.connection() as conn:
                self._insert(conn, key, kind, payload)
        except (StorageUnavailable, TypeError, ValueError) as exc:
            self._failed(key, exc)
        self._last_error = None

    def done(self, key: str) -> None:
        try:
            with self._db.connection() as conn:
                conn.execute("DELETE FROM pending_questions WHERE journal = %s AND key = %s", (self.name, key))
        except StorageUnavailable as exc:
            log.exception("Could not mark %s done in the pending-questions journal", key)
            self._last_error = str(exc)

    def open_items(self) -> list[JournalItem]:
        """Entries whose lease ran out, now held by this replica."""
        try:
            with self._db.transaction() as conn:
                rows = conn.execute(
                    "UPDATE pending_questions SET owner = %(owner)s, handed_out = handed_out + 1,"
                    " lease_until = clock_timestamp() + make_interval(secs => %(lease)s)"
                    " WHERE (journal, key) IN (SELECT journal, key FROM pending_questions WHERE journal = %(journal)s"
                    " AND lease_until < clock_timestamp() ORDER BY added_at FOR UPDATE SKIP LOCKED)"
                    " RETURNING key, kind, payload, added_at, handed_out",
                    {"owner": self.owner, "lease": self.lease_s, "journal": self.name}).fetchall()
                spent = [key for key, *_, handed_out in rows if handed_out > MAX_HAND_OUTS]
                if spent:
                    log.error("Dropping journal entries taken over %d times without an answer: %s", MAX_HAND_OUTS,
                              spent)
                    conn.execute("DELETE FROM pending_questions WHERE journal = %s AND key = ANY(%s)",
                                 (self.name, spent))
        except StorageUnavailable as exc:
            log.exception("Could not read the pending-questions journal")
            self._last_error = str(exc)
            return []
        return [(key, kind, payload) for key, kind, payload, _, handed_out in sorted(rows, key=lambda r: r[3])
                if handed_out <= MAX_HAND_OUTS]

    def health(self) -> dict:
        return {"ok": self._last_error is None, "where": f"{self._db.where} ({self.name})", "owner": self.owner,
                "last_error": self._last_error}

    def close(self) -> None:
        self._stop.set()
        self._renewer.join(timeout=5)

    def _insert(self, conn: psycopg.Connection, key: str, kind: str, payload: dict) -> None:
        conn.execute("INSERT INTO pending_questions (journal, key, kind, payload, owner, lease_until)"
                     " VALUES (%s, %s, %s, %s, %s, clock_timestamp() + make_interval(secs => %s))"
                     " ON CONFLICT (journal, key) DO NOTHING",
                     (self.name, key, kind, Jsonb(json.loads(json.dumps(payload))), self.owner, self.lease_s))

    def _failed(self, key: str, exc: Exception) -> None:
        log.error("Could not journal pending question %s in %s: %s", key, self._db.where, exc)
        self._last_error = str(exc)
        raise JournalUnavailable(str(exc)) from exc

    def _renew(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                with self._db.connection() as conn:
                    conn.execute("UPDATE pending_questions SET lease_until = clock_timestamp()"
                                 " + make_interval(secs => %s) WHERE journal = %s AND owner = %s",
                                 (self.lease_s, self.name, self.owner))
            except StorageUnavailable as exc:
                # Past the lease, another replica may answer these too: the at-least-once case.
                log.error("Could not renew the lease on accepted questions: %s", exc)
                self._last_error = str(exc)


# --- thread memory and the feedback-to-answer map ------------------------------------------------------------------


class PostgresConversations:
    """Thread memory and sent answers: a follow-up is understood, and a feedback click attributed, by whichever
    replica receives it. Failures are logged and cost the user only the thread's context."""

    def __init__(self, db: PostgresDatabase, *, turns: int = HISTORY_TURNS, retention_s: float = RETENTION_S):
        self._db = db
        self._turns = turns
        self._retention_s = retention_s
        self._purge = _Every(PURGE_EVERY_S)

    def history(self, key: str) -> tuple[Turn, ...]:
        try:
            with self._db.connection() as conn:
                rows = conn.execute("SELECT role, text FROM (SELECT id, role, text FROM thread_turns WHERE thread = %s"
                                    " ORDER BY id DESC LIMIT %s) t ORDER BY id", (key, self._turns)).fetchall()
        except StorageUnavailable:
            log.exception("Could not read the thread memory; answering without the thread")
            return ()
        return tuple(Turn(role, text) for role, text in rows)

    def remember(self, key: str, question: str, answer: str) -> None:
        try:
            with self._db.transaction() as conn:
                conn.execute("INSERT INTO thread_turns (thread, role, text) VALUES (%s, 'user', %s),"
                             " (%s, 'assistant', %s)", (key, question, key, answer))
                conn.execute("DELETE FROM thread_turns WHERE thread = %s AND id < (SELECT min(id) FROM"
                             " (SELECT id FROM thread_turns WHERE thread = %s ORDER BY id DESC LIMIT %s) t)",
                             (key, key, self._turns))
                self._purge_old(conn)
        except StorageUnavailable:
            log.exception("Could not remember a turn of thread %s", key)

    def get(self, message_id: str) -> str | None:
        try:
            with self._db.connection() as conn:
                row = conn.execute("SELECT request_id FROM sent_answers WHERE message_id = %s", (message_id,)).fetchone()
        except StorageUnavailable:
            log.exception("Could not read the sent answers")
            return None
        return row[0] if row else None

    def put(self, message_id: str, request_id: str) -> None:
        try:
            with self._db.connection() as conn:
                conn.execute("INSERT INTO sent_answers (message_id, request_id) VALUES (%s, %s) ON CONFLICT (message_id)"
                             " DO UPDATE SET request_id = excluded.request_id, at = clock_timestamp()",
                             (message_id, request_id))
                self._purge_old(conn)
        except StorageUnavailable:
            log.exception("Could not record sent answer %s", message_id)

    def _purge_old(self, conn: psycopg.Connection) -> None:
        if self._purge.due():
            for table in ("thread_turns", "sent_answers"):
                conn.execute(f"DELETE FROM {table} WHERE at < clock_timestamp() - make_interval(secs => %s)",
                             (self._retention_s,))


# --- fair use --------------------------------------------------------------------------------------------------------


class PostgresBuckets:
    """Token buckets in rows locked for the length of one check: a burst spread over replicas is limited once."""

    def __init__(self, db: PostgresDatabase):
        self._db = db
        self._purge = _Every(PURGE_EVERY_S)

    def take(self, buckets: Sequence[BucketLimit]) -> float:
        limits = {b.key: b for b in buckets}
        keys = sorted(limits)  # rows locked in one order: concurrent checks wait, never deadlock
        with self._db.transaction() as conn:
            conn.execute("INSERT INTO fair_use_buckets (key, tokens, updated_at) SELECT key, tokens,"
                         " extract(epoch FROM clock_timestamp()) FROM unnest(%s::text[], %s::float8[]) AS t(key, tokens)"
                         " ORDER BY key ON CONFLICT (key) DO NOTHING",
                         (keys, [float(limits[k].burst) for k in keys]))
            rows = conn.execute("SELECT key, tokens, extract(epoch FROM clock_timestamp()) - updated_at,"
                                " extract(epoch FROM clock_timestamp()) FROM fair_use_buckets WHERE key = ANY(%s)"
                                " ORDER BY key FOR UPDATE", (keys,)).fetchall()
            tokens = {key: limits[key].refilled(held, float(elapsed)) for key, held, elapsed, _ in rows}
            if any(held < 1 for held in tokens.values()):
                return max(limits[key].wait_s(held) for key, held in tokens.items())
            now = float(rows[0][3])
            conn.execute("UPDATE fair_use_buckets AS b SET tokens = t.tokens, updated_at = %s"
                         " FROM unnest(%s::text[], %s::float8[]) AS t(key, tokens) WHERE b.key = t.key",
                         (now, keys, [tokens[k] - 1 for k in keys]))
            if self._purge.due():
                conn.execute("DELETE FROM fair_use_buckets WHERE updated_at < %s", (now - BUCKETS_IDLE_S,))
        return 0.0


# --- the uploaded documents' library state -------------------------------------------------------------------------


class PostgresShelves:
    """Each workspace's documents as rows (one per upload: its record and its chunks), and a version bumped on every
    change: a replica compares it on each search and reloads what another one changed."""

    shared = True

    def __init__(self, db: PostgresDatabase):
        self._db = db

    def version(self, workspace: str) -> int:
        with self._db.connection() as conn:
            row = conn.execute("SELECT version FROM library_versions WHERE workspace = %s", (workspace,)).fetchone()
        return row[0] if row else 0

    def load(self, workspace: str) -> tuple[int, list[dict]]:
        with self._db.transaction() as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            row = conn.execute("SELECT version FROM library_versions WHERE workspace = %s", (workspace,)).fetchone()
            documents = conn.execute("SELECT document FROM library_documents WHERE workspace = %s ORDER BY position",
                                     (workspace,)).fetchall()
        return (row[0] if row else 0), [d for (d,) in documents]

    def update(self, workspace: str, change: Callable[[list[dict]], list[dict]]) -> int:
        with self._db.transaction() as conn:
            conn.execute("INSERT INTO library_versions (workspace, version) VALUES (%s, 0) ON CONFLICT DO NOTHING",
                         (workspace,))
            (version,) = conn.execute("SELECT version FROM library_versions WHERE workspace = %s FOR UPDATE",
                                      (workspace,)).fetchone()
            before = [d for (d,) in conn.execute("SELECT document FROM library_documents WHERE workspace = %s"
                                                 " ORDER BY position", (workspace,))]
            after = change(before)
            kept = {d["generation"] for d in after}
            old = {d["generation"] for d in before}
            conn.execute("DELETE FROM library_documents WHERE workspace = %s AND NOT (generation = ANY(%s))",
                         (workspace, list(kept)))
            for document in after:
                if document["generation"] not in old:
                    conn.execute("INSERT INTO library_documents (workspace, generation, document) VALUES (%s, %s, %s)",
                                 (workspace, document["generation"], Jsonb(document)))
            conn.execute("UPDATE library_versions SET version = %s WHERE workspace = %s", (version + 1, workspace))
        return version + 1


__all__ = ["LEASE_S", "PostgresAudit", "PostgresBuckets", "PostgresClaims", "PostgresConversations",
           "PostgresDatabase", "PostgresJournal", "PostgresShelves", "TAKEOVER_INTERVAL_S", "describe"]
