"""The storage seam: each store on both backends (the embedded files and a real Postgres), what only a shared
database can do (two replicas, each with its own connection pool, on one database), and the migrations."""
from __future__ import annotations

import io
import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

import psycopg
import pytest

from core.audit import AuditLog, export_command
from core.fair_use import SharedFairUse
from core.models import Asker, Mode, Turn
from core.service import RateLimited
from core.storage import JournalUnavailable, Storage, StorageUnavailable, open_storage, postgres_storage
from core.storage.base import AnswerRow
from core.storage.migrations import LATEST, SchemaTooNew, migrate
from core.storage.postgres import PostgresClaims, PostgresDatabase, PostgresJournal

SLACK = Asker("slack", "T1", "C1", "U1")


@pytest.fixture(params=["embedded", "postgres"])
def backend(request, tmp_path):
    """A function returning a new Storage on the same place each time it is called: a restart, or a replica."""
    opened: list[Storage] = []
    url = request.getfixturevalue("database_url") if request.param == "postgres" else None

    def open_one() -> Storage:
        opened.append(open_storage(tmp_path, url))
        return opened[-1]

    yield open_one
    for storage in opened:
        storage.close()


@pytest.fixture
def replicas(database_url):
    """Two Storages on one database, as two replicas have."""
    pair = (postgres_storage(database_url), postgres_storage(database_url))
    yield pair
    for storage in pair:
        storage.close()


def _row(request_id: str, question: str = "When must a breach be notified?") -> AnswerRow:
    return AnswerRow(request_id, datetime(2026, 11, 1, 9, 30, tzinfo=timezone.utc), "slack", "T1", "C1", "U1",
                     question, [{"id": "Art. 33(1)", "label": "Art. 33(1)", "score": 1.5}],
                     [{"label": "Art. 33(1)", "quote": "72 hours", "url": "https://eur-lex", "kind": "regulation"}],
                     False, Mode.EXTRACTIVE.value, 12.5)


# --- every store, on both backends --------------------------------------------------------------------------------


def test_the_default_is_the_embedded_files_under_the_data_dir(tmp_path):
    storage = open_storage(tmp_path, None)
    storage.audit.write_answer(_row("a"))
    storage.journal("slack").add("k", "app_mention", {})
    storage.threads.remember("teams:c1", "q", "a")
    assert storage.backend == "embedded" and storage.buckets is None
    assert {p.name for p in tmp_path.iterdir()} >= {"audit.sqlite3", "slack_pending.sqlite3", "conversations.sqlite3",
                                                    "documents"}
    storage.close()
    with pytest.raises(ValueError, match="DATABASE_URL must start with postgresql://"):
        open_storage(tmp_path, "mysql://db/bot")


def test_audit_rows_are_replaced_by_request_id_exported_with_their_latest_feedback(backend):
    audit = backend().audit
    audit.write_answer(_row("a", "first"))
    audit.write_answer(_row("a", "made again"))
    audit.write_answer(_row("a", "replayed late"), replace=False)
    audit.write_answer(_row("b"))
    for helpful in (False, True):
        audit.write_feedback(_feedback("a", helpful))
    assert audit.count_answers() == 2 and audit.has_answer("b") and not audit.has_answer("c")
    rows = list(audit.export())
    assert [(r["request_id"], r["question"], r["feedback"]) for r in rows] == [("a", "made again", "up"),
                                                                               ("b", _row("b").question, None)]
    assert rows[0] | {"question": None, "feedback": None} == {
        "request_id": "a", "time": "2026-11-01T09:30:00.000000+00:00", "platform": "slack", "workspace": "T1",
        "channel": "C1", "user": "U1", "question": None, "retrieved": _row("a").retrieved,
        "citations": _row("a").citations, "abstained": False, "mode": "extractive", "latency_ms": 12.5,
        "feedback": None}
    assert list(audit.export(datetime(2026, 11, 2, tzinfo=timezone.utc))) == []


def _feedback(request_id: str, helpful: bool):
    from core.storage.base import FeedbackRow

    return FeedbackRow(request_id, datetime.now(timezone.utc), "slack", "T1", "U2", helpful)


def test_thread_memory_keeps_the_last_turns_and_survives_a_restart(backend):
    storage = backend()
    for n in range(5):
        storage.threads.remember("teams:conv-1", f"question {n}", f"answer {n}")
    storage.threads.remember("teams:conv-2", "other", "thread")
    restarted = backend()
    assert restarted.threads.history("teams:conv-1") == tuple(
        Turn(role, f"{word} {n}") for n in (2, 3, 4) for role, word in (("user", "question"), ("assistant", "answer")))
    assert restarted.threads.history("teams:conv-2") == (Turn("user", "other"), Turn("assistant", "thread"))
    assert restarted.threads.history("teams:nothing") == ()


def test_the_feedback_to_answer_map_survives_a_restart(backend):
    backend().sent_answers.put("activity-1", "req-1")
    restarted = backend()
    assert restarted.sent_answers.get("activity-1") == "req-1" and restarted.sent_answers.get("other") is None
    restarted.sent_answers.put("activity-1", "req-2")
    assert backend().sent_answers.get("activity-1") == "req-2"


def test_a_delivery_is_claimed_once_until_released(backend):
    claims = backend().deliveries
    assert claims.claim("message:C1:1.1", "event:Ev1")
    assert not claims.claim("event:Ev1") and not claims.claim("message:C1:1.1", "event:Ev2")
    claims.release("message:C1:1.1", "event:Ev1", "event:Ev2")
    assert claims.claim("event:Ev1")


def test_a_question_is_journaled_with_its_claim_or_not_at_all(backend):
    storage = backend()
    journal, claims = storage.journal("slack"), storage.deliveries
    assert journal.accept(claims, ["message:C1:1.1", "event:Ev1"], "message:C1:1.1", "app_mention", {"n": 1})
    assert not journal.accept(claims, ["message:C1:1.1", "event:Ev2"], "message:C1:1.1", "app_mention", {"n": 2})
    with pytest.raises(JournalUnavailable):
        journal.accept(claims, ["message:C1:2.2"], "message:C1:2.2", "app_mention", {"not json": object()})
    assert claims.claim("message:C1:2.2")  # the failed one left no claim behind: Slack's retry is taken
    journal.done("message:C1:1.1")
    assert journal.open_items() == []


def test_shelves_change_atomically_and_bump_their_version(backend):
    shelves = backend().shelves
    assert shelves.load("T1") == (0, [])
    first = shelves.update("T1", lambda docs: [*docs, {"generation": "g1", "record": {"filename": "a.pdf"}}])
    second = shelves.update("T1", lambda docs: [*docs, {"generation": "g2", "record": {"filename": "b.pdf"}}])
    assert second > first > 0 and shelves.version("T1") == second

    def refuse(docs):
        raise ValueError("no")

    with pytest.raises(ValueError):
        shelves.update("T1", refuse)
    assert [d["generation"] for d in shelves.load("T1")[1]] == ["g1", "g2"] and shelves.version("T1") == second
    shelves.update("T1", lambda docs: [d for d in docs if d["generation"] != "g1"])
    assert [d["generation"] for d in backend().shelves.load("T1")[1]] == ["g2"]
    assert backend().shelves.load("T2")[1] == []


# --- what only a shared database does -------------------------------------------------------------------------------


def test_replicas_claiming_the_same_delivery_at_once_take_it_once(replicas):
    keys = [f"message:C1:{n}" for n in range(40)]

    def claim(storage: Storage, key: str) -> bool:
        return storage.deliveries.claim(key, f"event:{key}")

    with ThreadPoolExecutor(8) as pool:
        won = list(pool.map(lambda job: claim(*job), [(replicas[n % 2], key) for key in keys for n in range(4)]))
    assert sum(won) == len(keys)


@pytest.fixture
def databases(database_url):
    """Two connection pools on one database, as two replicas have."""
    pair = (PostgresDatabase(database_url), PostgresDatabase(database_url))
    yield pair
    for db in pair:
        db.close()


def test_claims_expire_after_their_lifetime(databases):
    claims = PostgresClaims(databases[0], ttl_s=0.2)
    assert claims.claim("event:Ev1") and not claims.claim("event:Ev1")
    time.sleep(0.3)
    assert claims.claim("event:Ev1")


def test_a_replica_that_stops_renewing_loses_its_questions_to_another(databases):
    first, survivor = (PostgresJournal(db, "slack", lease_s=0.3) for db in databases)
    first.add("message:C1:1.1", "app_mention", {"n": 1})
    first.add("message:C1:2.2", "app_mention", {"n": 2})
    first.done("message:C1:2.2")
    time.sleep(0.5)
    assert survivor.open_items() == []  # the first renews its lease while it runs
    first.close()  # stops renewing, as a killed replica does
    time.sleep(0.5)
    assert survivor.open_items() == [("message:C1:1.1", "app_mention", {"n": 1})]
    assert survivor.open_items() == []  # held by the survivor now
    survivor.close()


def test_an_entry_taken_over_too_often_is_dropped(databases, caplog):
    journal = PostgresJournal(databases[0], "slack", lease_s=0.05)
    journal.close()  # never renews
    journal.add("message:C1:1.1", "app_mention", {})
    handed_out = 0
    for _ in range(6):
        time.sleep(0.1)
        handed_out += len(journal.open_items())
    assert handed_out == 3 and "taken over 3 times" in caplog.text


def test_a_burst_spread_over_two_replicas_is_limited_once(replicas):
    limits = [SharedFairUse(storage.buckets, 0.001, 5, 600, 50) for storage in replicas]
    asker = Asker("slack", "T1", "C1", "U1")
    answered = 0
    for n in range(10):
        try:
            limits[n % 2].check(asker)
            answered += 1
        except RateLimited as exc:
            assert exc.retry_after_s > 1000  # a token every 16 hours at this rate
    assert answered == 5
    limits[1].check(Asker("slack", "T1", "C1", "U2"))  # another user has their own bucket


def test_concurrent_checks_on_two_replicas_never_hand_out_more_than_the_burst(replicas):
    limits = [SharedFairUse(storage.buckets, 0.001, 1000, 0.001, 60) for storage in replicas]
    allowed = []

    def ask(n: int) -> None:
        try:
            limits[n % 2].check(Asker("slack", "T1", None, f"U{n % 7}"))
            allowed.append(n)
        except RateLimited:
            pass

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(ask, range(200)))
    assert len(allowed) == 60


def test_concurrent_library_changes_from_two_replicas_lose_none(replicas):
    def add(n: int) -> None:
        replicas[n % 2].shelves.update("T1", lambda docs: [*docs, {"generation": f"g{n}"}])

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(add, range(20)))
    version, documents = replicas[0].shelves.load("T1")
    assert version == 20 and sorted(d["generation"] for d in documents) == sorted(f"g{n}" for n in range(20))


def test_the_audit_trail_spools_while_the_database_refuses_and_replays_after(database_url, tmp_path):
    storage = postgres_storage(database_url)
    log = AuditLog(storage.audit, spool_path=tmp_path / "audit-spool.jsonl", retry_waits_s=(0.01,))
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE audit_answers RENAME TO audit_answers_away")
        log.record_answer(_answer("a"), SLACK, 10)
        log.record_answer(_answer("b"), SLACK, 10)
        assert log.health()["spooled"] == 2 and not log.health()["ok"]
        assert log.replay() == 0
        conn.execute("ALTER TABLE audit_answers_away RENAME TO audit_answers")
    assert log.replay() == 2 and log.health()["ok"]
    assert [r["request_id"] for r in storage.audit.export()] == ["a", "b"]
    log.close()
    storage.close()


def _answer(request_id: str):
    from core.models import Answer

    return Answer(question="When must a breach be notified?", statements=(), retrieved=(), mode=Mode.EXTRACTIVE,
                  request_id=request_id)


def test_the_audit_command_exports_from_the_database(database_url, capsys):
    storage = postgres_storage(database_url)
    storage.audit.write_answer(_row("a"))
    out = io.StringIO()
    assert export_command(lambda: storage.audit, "2026-11-01", False, out) == 0
    assert [json.loads(line)["request_id"] for line in out.getvalue().splitlines()] == ["a"]
    storage.close()
    unreachable = "postgresql://nobody@127.0.0.1:1/none"
    assert export_command(lambda: postgres_storage(unreachable).audit, None, False, io.StringIO()) == 1
    assert "cannot use the database at 127.0.0.1:1/none" in capsys.readouterr().err


# --- migrations -----------------------------------------------------------------------------------------------------


def test_migrations_apply_once_even_when_replicas_start_together(database_url):
    def start(_: int) -> list[int]:
        with psycopg.connect(database_url, autocommit=True) as conn:
            return migrate(conn)

    with ThreadPoolExecutor(4) as pool:
        applied = list(pool.map(start, range(4)))
    assert sorted(applied) == [[], [], [], list(range(1, LATEST + 1))]
    with psycopg.connect(database_url, autocommit=True) as conn:
        assert [v for (v,) in conn.execute("SELECT version FROM schema_migrations ORDER BY version")] == list(
            range(1, LATEST + 1))
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, 'from the future')", (LATEST + 1,))
        with pytest.raises(SchemaTooNew, match="upgrade the bot"):
            migrate(conn)


def test_an_unreachable_database_is_one_clear_error():
    with pytest.raises(StorageUnavailable, match=r"cannot use the database at 127\.0\.0\.1:1/gdpr \(DATABASE_URL\)"):
        postgres_storage("postgresql://bot:secret@127.0.0.1:1/gdpr")
