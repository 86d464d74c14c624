"""The audit trail: complete rows, linked feedback, exports, concurrency, and failures that never reach the user."""
from __future__ import annotations

import csv
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from core.audit import AuditLog, export_command
from core.models import Abstention, AbstentionReason, Answer, Asker, Citation, Mode, Passage, Statement

REPO = Path(__file__).resolve().parent.parent
SLACK = Asker("slack", "T1", "C1", "U1")
URL = "https://eur-lex.europa.eu/eli/reg/2016/679/oj#art_33"


def _answer(request_id: str = "req-1", question: str = "How fast must a breach be reported?", *,
            abstained: bool = False) -> Answer:
    quote = "not later than 72 hours after having become aware of it"
    citation = Citation("Art. 33(1)", "Art. 33(1)", quote, URL, "en")
    return Answer(
        question=question, statements=() if abstained else (Statement("Within 72 hours.", (citation,)),),
        retrieved=(Passage("Art. 33(1)", "Art. 33(1)", "…", URL, "en", 7.123456),
                   Passage("Art. 34(1)", "Art. 34(1)", "…", URL, "en", 3.5)),
        mode=Mode.EXTRACTIVE, request_id=request_id,
        abstention=Abstention(AbstentionReason.NOT_COVERED) if abstained else None,
    )


class _Clock:
    """Answers one minute apart from 1 Nov 2026, so --since has something to cut."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        self.now += timedelta(minutes=1)
        return self.now


@pytest.fixture
def audit(tmp_path: Path):
    log = AuditLog(tmp_path / "audit.sqlite3", clock=_Clock())
    yield log
    log.close()


def test_one_row_per_answer_with_every_field(audit: AuditLog) -> None:
    audit.record_answer(_answer(), SLACK, 1234.5)
    (row,) = audit.export()
    assert row == {
        "request_id": "req-1", "time": "2026-11-01T00:01:00.000000+00:00", "platform": "slack", "workspace": "T1",
        "channel": "C1", "user": "U1", "question": "How fast must a breach be reported?",
        "retrieved": [{"id": "Art. 33(1)", "label": "Art. 33(1)", "score": 7.1235},
                      {"id": "Art. 34(1)", "label": "Art. 34(1)", "score": 3.5}],
        "citations": [{"label": "Art. 33(1)", "quote": "not later than 72 hours after having become aware of it",
                       "url": URL, "kind": "regulation"}],
        "abstained": False, "mode": "extractive", "latency_ms": 1234.5, "feedback": None,
    }
    assert audit.count_answers() == 1


def test_feedback_is_linked_by_request_id_and_the_latest_counts(audit: AuditLog) -> None:
    audit.record_answer(_answer("a"), SLACK, 10)
    audit.record_answer(_answer("b", abstained=True), SLACK, 10)
    audit.record_feedback("a", False, SLACK)
    audit.record_feedback("a", True, Asker("slack", "T1", "C1", "U2"))
    audit.record_feedback("b", False, SLACK)
    assert [(r["request_id"], r["feedback"], r["abstained"]) for r in audit.export()] == [
        ("a", "up", False), ("b", "down", True)]
    with sqlite3.connect(audit.path) as db:
        rows = db.execute("SELECT request_id, user_id, helpful, time FROM feedback ORDER BY id").fetchall()
    assert [r[:3] for r in rows] == [("a", "U1", 0), ("a", "U2", 1), ("b", "U1", 0)]
    assert all(r[3].startswith("2026-11-01T") for r in rows)


def test_rows_survive_reopening_and_the_schema_is_versioned(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    first = AuditLog(path)
    first.record_answer(_answer("a"), SLACK, 10)
    first.close()
    second = AuditLog(path)
    second.record_answer(_answer("b"), SLACK, 10)
    assert second.count_answers() == 2
    second.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("1",)
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_export_command_writes_jsonl_from_since(audit: AuditLog, capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(3):  # at 00:01, 00:02, 00:03
        audit.record_answer(_answer(f"r{i}"), SLACK, 10)
    out = io.StringIO()
    assert export_command(audit.path, "2026-11-01T00:02", False, out) == 0
    assert [json.loads(line)["request_id"] for line in out.getvalue().splitlines()] == ["r1", "r2"]
    out = io.StringIO()
    assert export_command(audit.path, "2026-11-01", False, out) == 0
    assert len(out.getvalue().splitlines()) == 3
    out = io.StringIO()
    assert export_command(audit.path, "2026-11-01T01:02:00+01:00", False, out) == 0  # the same instant as 00:02Z
    assert len(out.getvalue().splitlines()) == 2
    assert capsys.readouterr().err == ""


def test_export_command_writes_csv_safe_for_spreadsheets(audit: AuditLog) -> None:
    audit.record_answer(_answer("r1", question="=HYPERLINK(\"http://evil\")"), SLACK, 10)
    audit.record_feedback("r1", True, SLACK)
    out = io.StringIO()
    assert export_command(audit.path, None, True, out) == 0
    (row,) = csv.DictReader(io.StringIO(out.getvalue()))
    assert row["question"] == "'=HYPERLINK(\"http://evil\")"
    assert row["feedback"] == "up" and row["abstained"] == "false" and row["user"] == "U1"
    assert json.loads(row["citations"])[0]["label"] == "Art. 33(1)"


def test_export_command_rejects_a_bad_since_or_a_missing_trail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    AuditLog(tmp_path / "audit.sqlite3").close()
    assert export_command(tmp_path / "audit.sqlite3", "last tuesday", False, io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --since") and err.count("\n") == 1
    assert export_command(tmp_path / "nowhere.sqlite3", None, False, io.StringIO()) == 2
    assert "no audit trail" in capsys.readouterr().err
    assert not (tmp_path / "nowhere.sqlite3").exists()


def test_concurrent_writes_from_8_threads_are_all_kept(audit: AuditLog) -> None:
    def ask(thread: int) -> None:
        for i in range(50):
            audit.record_answer(_answer(f"t{thread}-{i}"), Asker("teams", "T", "C", f"U{thread}"), 1.0)
            if i % 10 == 0:
                audit.record_feedback(f"t{thread}-{i}", True, SLACK)

    threads = [threading.Thread(target=ask, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert audit.failed_writes == 0
    assert audit.count_answers() == 400
    rows = list(audit.export())
    assert {r["request_id"] for r in rows} == {f"t{t}-{i}" for t in range(8) for i in range(50)}
    assert sum(r["feedback"] == "up" for r in rows) == 40


def test_an_unopenable_path_spools_its_rows_and_replays_them_once_it_opens(tmp_path: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    failures: list[None] = []
    path = tmp_path / "missing" / "audit.sqlite3"
    log = AuditLog(path, on_failure=lambda: failures.append(None))
    log.record_answer(_answer("a"), SLACK, 10)
    log.record_feedback("a", True, SLACK)  # known: its answer waits in the spool
    assert log.failed_writes == 2 and len(failures) == 2
    assert "audit write failed" in caplog.text
    assert log.health() | {"last_error": None} == {"ok": False, "where": str(path), "spooled": 2, "lost": 0,
                                                   "failed_writes": 2, "last_error": None}
    path.parent.mkdir()
    log.record_answer(_answer("b"), SLACK, 10)  # queued behind the spooled rows
    assert log.replay() == 3
    assert [(r["request_id"], r["feedback"]) for r in log.export()] == [("a", "up"), ("b", None)]
    assert log.health()["ok"] and log.health()["spooled"] == 0
    log.close()


def test_a_lock_held_over_the_busy_timeout_is_waited_out(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.sqlite3", busy_timeout_s=0.5)
    log.record_answer(_answer("a"), SLACK, 10)
    blocker = sqlite3.connect(tmp_path / "audit.sqlite3", isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN EXCLUSIVE")
    threading.Timer(0.7, blocker.execute, ("ROLLBACK",)).start()
    log.record_answer(_answer("b"), SLACK, 10)
    assert log.failed_writes == 0 and log.count_answers() == 2
    blocker.close()
    log.close()


def test_a_locked_database_holds_the_answer_briefly_then_spools_and_replays(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.sqlite3", busy_timeout_s=0.1)
    blocker = sqlite3.connect(tmp_path / "audit.sqlite3", isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    started = time.monotonic()
    log.record_answer(_answer("a"), SLACK, 10)
    assert time.monotonic() - started < 1.0
    started = time.monotonic()
    log.record_answer(_answer("b"), SLACK, 10)
    assert time.monotonic() - started < 0.05  # degraded: straight to the spool, no waiting on the lock
    assert log.failed_writes == 2 and log.health()["spooled"] == 2 and "locked" in log.health()["last_error"]
    blocker.execute("ROLLBACK")
    blocker.close()
    assert log.replay() == 2 and log.count_answers() == 2 and log.health()["ok"]
    log.close()


def test_a_corrupt_trail_spools_and_a_restart_replays_what_waits(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    path.write_bytes(b"not a database" * 100)
    log = AuditLog(path, replay_interval_s=0.05)
    log.record_answer(_answer("a"), SLACK, 10)
    assert log.health()["spooled"] == 1 and "not a database" in log.health()["last_error"]
    log.close()  # stops with the row still in the spool file
    path.unlink()
    restarted = AuditLog(path, replay_interval_s=0.05)
    deadline = time.monotonic() + 5
    while restarted.health()["spooled"] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [r["request_id"] for r in restarted.export()] == ["a"]
    restarted.close()


def test_replaying_a_row_that_was_written_after_all_adds_nothing(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    log = AuditLog(path)
    log.record_answer(_answer("a"), SLACK, 10)
    spool = tmp_path / "audit-spool.jsonl"
    entry = {"kind": "answer", "row": log._answer_row(_answer("a", question="changed"), SLACK, 10).to_json()}
    spool.write_text(json.dumps(entry) + "\n")
    log.close()
    reopened = AuditLog(path)
    assert reopened.replay() == 1
    assert [(r["request_id"], r["question"]) for r in reopened.export()] == [("a", _answer().question)]
    reopened.close()


def test_an_answer_made_again_under_its_request_id_replaces_the_first(audit: AuditLog) -> None:
    audit.record_answer(_answer("a", question="first"), SLACK, 10)
    audit.record_answer(_answer("a", question="again"), SLACK, 12)
    assert [(r["request_id"], r["question"]) for r in audit.export()] == [("a", "again")]


def test_writes_after_close_are_counted_not_raised(audit: AuditLog) -> None:
    audit.close()
    audit.record_answer(_answer(), SLACK, 10)
    assert audit.failed_writes == 1


_WRITER = """
import sys
from pathlib import Path
from core.audit import AuditLog
from core.models import Abstention, AbstentionReason, Answer, Asker, Mode
log = AuditLog(Path(sys.argv[1]))
i = 0
while True:
    answer = Answer(question="q" * 500, statements=(), retrieved=(), mode=Mode.EXTRACTIVE, request_id=f"r{i}",
                    abstention=Abstention(AbstentionReason.NOT_COVERED))
    log.record_answer(answer, Asker(), 1.0)
    print(f"r{i}", flush=True)  # printed only once committed
    i += 1
"""


@pytest.mark.timeout(10)
def test_killing_the_writer_mid_stream_loses_no_committed_row(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    committed = []
    with subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], cwd=REPO, stdout=subprocess.PIPE, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}) as writer:
        while len(committed) < 200:
            line = writer.stdout.readline()
            assert line, "the writer exited early"
            committed.append(line.strip())
        writer.send_signal(signal.SIGKILL)
        committed += [line.strip() for line in writer.stdout.read().splitlines() if line.strip()]
    assert writer.returncode == -signal.SIGKILL
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        stored = {r[0] for r in db.execute("SELECT request_id FROM answers")}
    assert set(committed) <= stored
