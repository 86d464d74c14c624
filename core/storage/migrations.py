"""The Postgres schema, as numbered migrations applied in order and recorded in `schema_migrations`.

A migration is never edited once released: a change to the schema is a new entry at the end. Every replica
applies what is missing when it starts, under an advisory lock, in one transaction, so two replicas starting
together neither race nor leave a half-migrated database.
"""
from __future__ import annotations

from dataclasses import dataclass

import psycopg


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial", """
CREATE TABLE audit_answers (
    id bigserial PRIMARY KEY,
    request_id text NOT NULL UNIQUE,
    time timestamptz NOT NULL,
    platform text NOT NULL,
    workspace text,
    channel text,
    user_id text,
    question text NOT NULL,
    retrieved jsonb NOT NULL,
    citations jsonb NOT NULL,
    abstained boolean NOT NULL,
    mode text NOT NULL,
    latency_ms double precision NOT NULL
);
CREATE INDEX audit_answers_time ON audit_answers (time, id);
CREATE TABLE audit_feedback (
    id bigserial PRIMARY KEY,
    request_id text NOT NULL,
    time timestamptz NOT NULL,
    platform text NOT NULL,
    workspace text,
    user_id text,
    helpful boolean NOT NULL
);
CREATE INDEX audit_feedback_request ON audit_feedback (request_id, id);

CREATE TABLE pending_questions (
    journal text NOT NULL,
    key text NOT NULL,
    kind text NOT NULL,
    payload jsonb NOT NULL,
    added_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    owner text NOT NULL,
    lease_until timestamptz NOT NULL,
    handed_out integer NOT NULL DEFAULT 0,
    PRIMARY KEY (journal, key)
);
CREATE INDEX pending_questions_lease ON pending_questions (journal, lease_until);
CREATE TABLE delivery_claims (
    key text PRIMARY KEY,
    claimed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX delivery_claims_time ON delivery_claims (claimed_at);

CREATE TABLE fair_use_buckets (
    key text PRIMARY KEY,
    tokens double precision NOT NULL,
    updated_at double precision NOT NULL
);

CREATE TABLE thread_turns (
    id bigserial PRIMARY KEY,
    thread text NOT NULL,
    role text NOT NULL,
    text text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX thread_turns_thread ON thread_turns (thread, id);
CREATE INDEX thread_turns_at ON thread_turns (at);
CREATE TABLE sent_answers (
    message_id text PRIMARY KEY,
    request_id text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX sent_answers_at ON sent_answers (at);

CREATE TABLE library_versions (
    workspace text PRIMARY KEY,
    version bigint NOT NULL
);
CREATE TABLE library_documents (
    workspace text NOT NULL,
    generation text NOT NULL,
    position bigserial,
    document jsonb NOT NULL,
    PRIMARY KEY (workspace, generation)
);
"""),
)
LATEST = MIGRATIONS[-1].version
# pg_advisory_xact_lock key: any constant the bot's database uses for nothing else.
_LOCK_KEY = 0x6764707262  # "gdprb"


class SchemaTooNew(Exception):
    """The database was migrated by a newer version of the bot."""


def migrate(conn: psycopg.Connection) -> list[int]:
    """Apply the missing migrations; returns the versions applied (none when the schema is current)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
                     " applied_at timestamptz NOT NULL DEFAULT now())")
        applied = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
        if applied and max(applied) > LATEST:
            raise SchemaTooNew(f"the database's schema is at version {max(applied)}, newer than this bot's "
                               f"({LATEST}): upgrade the bot")
        done = []
        for migration in MIGRATIONS:
            if migration.version not in applied:
                conn.execute(migration.sql)
                conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                             (migration.version, migration.name))
                done.append(migration.version)
        return done


__all__ = ["LATEST", "MIGRATIONS", "Migration", "SchemaTooNew", "migrate"]
