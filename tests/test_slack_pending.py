"""The journal of accepted-but-unanswered Slack questions, and the adapter answering them after a restart."""
from __future__ import annotations

import asyncio
import json
import threading
import time
from urllib.parse import parse_qsl

import pytest

from core.storage import JournalUnavailable
from core.storage.embedded import SqliteJournal
from evals.fake_slack import (
    BOT_ID,
    BOT_USER_ID,
    TEAM_ID,
    FakeSlack,
    LoopbackSlack,
    command_body,
    event_body,
    mention,
    sign,
)
from tests.fake_service import QUOTE, FakeAnswerService
from tests.helpers import bounded

CHANNEL = "C00000001"
IDENTITY = {"team_id": TEAM_ID, "bot_user_id": BOT_USER_ID, "bot_id": BOT_ID}

scenario = bounded(timeout_s=20)


def _all_text(params: dict) -> str:
    return params.get("text", "") + json.dumps(params.get("blocks", []), ensure_ascii=False)


# --- the journal ----------------------------------------------------------------------------------------


def test_open_items_are_those_not_done_oldest_first(tmp_path):
    journal = SqliteJournal(tmp_path / "pending.sqlite3")
    journal.add("a", "app_mention", {"n": 1})
    journal.add("b", "message", {"n": 2})
    journal.add("c", "command", {"n": 3})
    journal.done("b")
    assert journal.open_items() == [("a", "app_mention", {"n": 1}), ("c", "command", {"n": 3})]


def test_adding_a_key_again_keeps_the_first_entry(tmp_path):
    journal = SqliteJournal(tmp_path / "pending.sqlite3")
    journal.add("a", "app_mention", {"n": 1})
    journal.add("a", "app_mention", {"n": 2})
    assert journal.open_items() == [("a", "app_mention", {"n": 1})]
    journal.done("a")
    journal.done("a")
    assert journal.open_items() == []


def test_open_items_survive_a_new_process(tmp_path):
    path = tmp_path / "sub" / "pending.sqlite3"
    first = SqliteJournal(path)
    first.add("a", "app_mention", {"event": {"ts": "1.1"}})
    # No close(): the process was killed.
    assert SqliteJournal(path).open_items() == [("a", "app_mention", {"event": {"ts": "1.1"}})]


def test_a_question_that_cannot_be_journaled_raises_and_other_failures_are_logged(tmp_path, caplog):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    journal = SqliteJournal(blocked / "pending.sqlite3")
    with pytest.raises(JournalUnavailable):
        journal.add("a", "app_mention", {})
    with pytest.raises(JournalUnavailable):
        SqliteJournal(tmp_path / "ok.sqlite3").add("b", "app_mention", {"not json": object()})
    journal.done("a")
    assert journal.open_items() == []
    assert "pending-questions journal" in caplog.text and "is not JSON serializable" in caplog.text


# --- the adapter -----------------------------------------------------------------------------------------


@scenario
async def test_a_question_acked_by_a_killed_process_is_answered_in_its_thread_on_restart(tmp_path):
    journal = SqliteJournal(tmp_path / "slack_pending.sqlite3")
    ts = f"{time.time():.6f}"
    event = mention("When must a breach be notified?", ts=ts)
    journal.add(f"message:{CHANNEL}:{ts}", "app_mention",
                {"event": event, "context": IDENTITY, "accepted_at": time.time()})
    service = FakeAnswerService()
    async with LoopbackSlack(service, journal=journal) as slack:
        [post] = await slack.fake.wait_for("chat.postMessage")
        assert post.params["channel"] == CHANNEL and post.params["thread_ts"] == ts
        assert f">{QUOTE}" in _all_text(post.params)
        # Slack redelivering the event (the dead process never acknowledged it) is not answered again.
        status, _ = await slack.post(event_body(event))
        assert status == 200
        await slack.fake.assert_no_more("chat.postMessage", 1)
        assert [asked.question for asked in service.asked] == ["When must a breach be notified?"]
    assert journal.open_items() == []


@scenario
async def test_a_stale_question_is_dropped_not_answered(tmp_path):
    journal = SqliteJournal(tmp_path / "slack_pending.sqlite3")
    event = mention("Still there?", ts="1700000000.000100")
    journal.add(f"message:{CHANNEL}:1700000000.000100", "app_mention",
                {"event": event, "context": IDENTITY, "accepted_at": time.time() - 2 * 3600})
    service = FakeAnswerService()
    async with LoopbackSlack(service, journal=journal) as slack:
        await slack.fake.assert_no_more("chat.postMessage")
        assert service.asked == []
    assert journal.open_items() == []


@scenario
async def test_a_slash_command_acked_by_a_killed_process_is_answered_on_restart(tmp_path):
    journal = SqliteJournal(tmp_path / "slack_pending.sqlite3")
    responses = FakeSlack()  # Slack's response_url side, which outlives the bot
    await responses.start()
    try:
        command = dict(parse_qsl(command_body("-p When must a breach be notified?",
                                              response_url=responses.response_url())))
        journal.add("command:1", "command", {"command": command, "accepted_at": time.time()})
        service = FakeAnswerService()
        async with LoopbackSlack(service, journal=journal):
            [reply] = await responses.wait_for("response_url")
            assert reply.params["response_type"] == "ephemeral" and f">{QUOTE}" in _all_text(reply.params)
            assert [asked.question for asked in service.asked] == ["When must a breach be notified?"]
        assert journal.open_items() == []
    finally:
        await responses.stop()


async def _until(condition, timeout_s: float = 5.0) -> None:
    """Poll `condition` until it holds; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


class _HeldAnswerService(FakeAnswerService):
    """Answers only once `release` is set, so a test can look at the journal while questions are in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def ask(self, question, **kwargs):
        self.release.wait(timeout=10)
        return super().ask(question, **kwargs)


@scenario
async def test_live_questions_are_journaled_until_answered(tmp_path):
    journal = SqliteJournal(tmp_path / "slack_pending.sqlite3")
    service = _HeldAnswerService()
    try:
        async with LoopbackSlack(service, journal=journal) as slack:
            await slack.post(event_body(mention("What is personal data?", ts="1700000000.000100")))
            await slack.post(command_body("What is personal data?", response_url=slack.fake.response_url()))
            # Acknowledged and not answered yet: both are on disk, for a restart to answer.
            kinds = {kind for _, kind, _ in SqliteJournal(journal.path).open_items()}
            assert kinds == {"app_mention", "command"}
            service.release.set()
            await slack.fake.wait_for("chat.postMessage")
            await slack.fake.wait_for("response_url")
            await _until(lambda: journal.open_items() == [])
    finally:
        service.release.set()


@scenario
async def test_a_question_that_cannot_be_journaled_is_not_acknowledged_and_its_retry_is_answered(tmp_path):
    blocked = tmp_path / "journal"
    blocked.write_text("a file where the journal's directory should be")
    journal = SqliteJournal(blocked / "slack_pending.sqlite3")
    service = FakeAnswerService()
    event = mention("When must a breach be notified?", ts="1700000000.000300")
    async with LoopbackSlack(service, journal=journal) as slack:
        status, _ = await slack.post(event_body(event, event_id="Ev0001"))
        assert status >= 500  # Slack retries what it did not get a 2xx for
        blocked.unlink()
        blocked.mkdir()  # the disk is back
        retry = event_body(event, event_id="Ev0001")
        status, _ = await slack.post(retry, headers={**sign(retry), "X-Slack-Retry-Num": "1",
                                                     "X-Slack-Retry-Reason": "http_error"})
        assert status == 200
        [post] = await slack.fake.wait_for("chat.postMessage")
        assert post.params["thread_ts"] == "1700000000.000300" and f">{QUOTE}" in _all_text(post.params)
    assert [asked.question for asked in service.asked] == ["When must a breach be notified?"]


@scenario
async def test_an_event_without_channel_or_ts_is_acknowledged_but_never_journaled(tmp_path):
    journal = SqliteJournal(tmp_path / "slack_pending.sqlite3")
    service = FakeAnswerService()
    async with LoopbackSlack(service, journal=journal) as slack:
        for broken in ({"type": "app_mention", "user": "U1", "text": "<@UBOT00001> hi"},
                       {"type": "message", "channel_type": "im", "user": "U1", "text": "hi", "ts": "1.1"}):
            status, _ = await slack.post(event_body(broken))
            assert status == 200
    assert journal.open_items() == [] and service.asked == []


@scenario
async def test_a_journal_entry_that_cannot_be_answered_is_skipped_and_the_rest_are_answered(tmp_path, caplog):
    journal = SqliteJournal(tmp_path / "slack_pending.sqlite3")
    now = time.time()
    for n in range(3):
        journal.add(f"bad:{n}", "app_mention", {"event": {"type": "app_mention", "text": "hi"}, "context": IDENTITY,
                                                "accepted_at": now})
    journal.add("bad:command", "command", {"command": {"text": "hi"}, "accepted_at": now})
    journal.add("bad:shape", "app_mention", {"accepted_at": now})
    ts = f"{now:.6f}"
    journal.add(f"message:{CHANNEL}:{ts}", "app_mention",
                {"event": mention("When must a breach be notified?", ts=ts), "context": IDENTITY, "accepted_at": now})
    service = FakeAnswerService()
    async with LoopbackSlack(service, journal=journal) as slack:
        [post] = await slack.fake.wait_for("chat.postMessage")
        assert post.params["thread_ts"] == ts
    assert journal.open_items() == []
    assert caplog.text.count("Skipping journal entry") == 5
