"""The platform-neutral conversation: commands, the documents flow, feedback, the one runner and the one error
path, driven directly with a recording channel."""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from contextlib import asynccontextmanager

import pytest

from adapters.conversation import (
    CORE_THREADS,
    AskQuestion,
    Conversation,
    Deliveries,
    ForgetDocument,
    ListDocuments,
    ShowHelp,
    parse,
)
from adapters.intents import (
    AdminAction,
    AdminsOnly,
    Answered,
    Attachment,
    Declined,
    DocumentList,
    DownloadFailed,
    Failed,
    FeedbackNotFound,
    FeedbackRecorded,
    FileNameMissing,
    Forgotten,
    Help,
    Message,
    NoSuchDocument,
    NotDownloaded,
    Rejected,
    Task,
    UploadRefused,
    UploadsDisabled,
)
from core.library import too_large
from core.models import AbstentionReason, Asker, Stage, Turn
from core.service import QuestionTooLong
from tests.fake_service import FakeAnswerService, FakeDocuments, record
from tests.helpers import bounded

ADMIN = Asker("slack", "T1", "C1", "U0ADMIN01")
MEMBER = Asker("slack", "T1", "C1", "U00000001")
scenario = bounded(timeout_s=20)


class Recorder:
    """A channel that keeps what it was sent, and when the bot showed it was working."""

    def __init__(self) -> None:
        self.replies: list = []
        self.progress: list[str | None] = []

    async def send(self, reply) -> None:
        self.replies.append(reply)

    @asynccontextmanager
    async def working(self, file_name: str | None = None):
        self.progress.append(file_name)
        yield


async def replies_to(conversation: Conversation, text: str, asker: Asker = MEMBER, **message) -> Recorder:
    channel = Recorder()
    await conversation.handle(Message(text, asker, "thread-1", **message), channel)
    return channel


class FakeFile:
    def __init__(self, name: str = "Retention.pdf", size: int | None = 100, fails: bool = False):
        self.fetched: list[int] = []
        self.attachment = Attachment(name, size, self._fetch)
        self._fails = fails

    async def _fetch(self, limit: int) -> bytes:
        self.fetched.append(limit)
        if self._fails:
            raise DownloadFailed("HTTP 404")
        return b"%PDF-1.7"


# --- the command parser -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, command", [
    ("", ShowHelp()), ("   ", ShowHelp()), ("help", ShowHelp()), ("HELP me", ShowHelp()),
    ("docs", ListDocuments()), ("docs please", ListDocuments()), ("Docs x", ListDocuments()),
    ("forget", ForgetDocument("")), ("forget  Retention policy.pdf ", ForgetDocument("Retention policy.pdf")),
    ("What docs must a controller keep?", AskQuestion("What docs must a controller keep?")),
    ("  helpful? ", AskQuestion("helpful?")),
])
def test_the_first_word_decides_wherever_it_was_typed(text, command):
    assert parse(text) == command


def test_a_delivery_is_claimed_once_until_released_and_forgotten_after_its_time():
    deliveries = Deliveries(ttl_s=0.05)
    assert deliveries.claim("message:C1:1.1", "event:Ev1")
    assert not deliveries.claim("event:Ev1") and not deliveries.claim("message:C1:1.1", "event:Ev2")
    deliveries.release("message:C1:1.1", "event:Ev1", "event:Ev2")
    assert deliveries.claim("event:Ev1")
    time.sleep(0.06)
    assert deliveries.claim("event:Ev1")


# --- questions ----------------------------------------------------------------------------------------------------


@scenario
async def test_a_question_is_answered_while_working_and_a_declined_one_carries_its_reason():
    answered = await replies_to(Conversation(FakeAnswerService()), "When must a breach be notified?")
    [reply] = answered.replies
    assert isinstance(reply, Answered) and reply.answer.question == "When must a breach be notified?"
    assert answered.progress == [None]
    [declined] = (await replies_to(Conversation(FakeAnswerService(abstain=AbstentionReason.NATIONAL_LAW)), "q?")).replies
    assert isinstance(declined, Declined) and declined.reason is AbstentionReason.NATIONAL_LAW


class StagesShown(Recorder):
    """A channel that shows the stages of an answer; `fail_on` makes showing that stage fail."""

    def __init__(self, fail_on: Stage | None = None) -> None:
        super().__init__()
        self.events: list = []
        self._fail_on = fail_on

    async def show(self, stage: Stage) -> None:
        await asyncio.sleep(0.01)  # a platform call: the next stage waits for it
        self.events.append(stage)
        if stage is self._fail_on:
            raise RuntimeError("the platform refused the update")

    async def send(self, reply) -> None:
        self.events.append(type(reply))

    @asynccontextmanager
    async def working(self, file_name: str | None = None):
        yield self.show


@scenario
async def test_each_stage_is_shown_in_order_before_the_answer_is_sent():
    channel = StagesShown()
    await Conversation(FakeAnswerService()).handle(Message("When must a breach be notified?", MEMBER, "t"), channel)
    assert channel.events == [Stage.SEARCHING, Stage.GENERATING, Stage.VERIFYING, Answered]
    declined = StagesShown()
    conversation = Conversation(FakeAnswerService(abstain=AbstentionReason.OTHER_LAW))
    await conversation.handle(Message("q?", MEMBER, "t"), declined)
    assert declined.events == [Stage.SEARCHING, Declined]


@scenario
async def test_a_stage_that_cannot_be_shown_does_not_hold_up_the_answer(caplog):
    channel = StagesShown(fail_on=Stage.SEARCHING)
    with caplog.at_level(logging.ERROR, logger="adapters.conversation"):
        await Conversation(FakeAnswerService()).handle(Message("q?", MEMBER, "t"), channel)
    assert channel.events == [Stage.SEARCHING, Stage.GENERATING, Stage.VERIFYING, Answered]
    assert any("searching" in r.getMessage() for r in caplog.records)
    failing = StagesShown()
    await Conversation(FakeAnswerService(fail_with=RuntimeError("disk"))).handle(Message("q?", MEMBER, "t"), failing)
    assert failing.events == [Failed]


@scenario
async def test_rejections_are_values_and_failures_have_a_logged_reference(caplog):
    [rejected] = (await replies_to(Conversation(FakeAnswerService(max_question_chars=10)), "x" * 11)).replies
    assert isinstance(rejected, Rejected) and isinstance(rejected.reason, QuestionTooLong)
    assert (rejected.reason.length, rejected.reason.limit) == (11, 10)
    with caplog.at_level(logging.ERROR, logger="adapters.conversation"):
        [failed] = (await replies_to(Conversation(FakeAnswerService(fail_with=RuntimeError("disk"))), "q?")).replies
    assert isinstance(failed, Failed) and failed.task is Task.ANSWERING
    [logged] = [r for r in caplog.records if failed.reference in r.getMessage()]
    assert str(logged.exc_info[1]) == "disk"


@scenario
async def test_the_conversation_remembers_threads_unless_the_platform_provides_the_history():
    service = FakeAnswerService()
    conversation = Conversation(service)
    await replies_to(conversation, "When must a breach be notified?")
    await replies_to(conversation, "And to whom?")
    first, follow_up = service.asked
    assert first.history == () and follow_up.history[0] == Turn("user", "When must a breach be notified?")
    assert follow_up.history[1].role == "assistant" and "72 hours" in follow_up.history[1].text

    async def slack_thread():
        return (Turn("user", "from the platform"),)

    await replies_to(conversation, "And fines?", history=slack_thread)
    assert service.asked[2].history == (Turn("user", "from the platform"),)


@scenario
async def test_every_core_call_runs_on_the_one_bounded_pool():
    seen: list[str] = []
    running, peak, lock = [0], [0], threading.Lock()

    class Slow(FakeAnswerService):
        def ask(self, question, **kwargs):
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
                seen.append(threading.current_thread().name)
            time.sleep(0.05)
            with lock:
                running[0] -= 1
            return super().ask(question, **kwargs)

    conversation = Conversation(Slow())
    await asyncio.gather(*(replies_to(conversation, f"Question {n}?") for n in range(12)))
    assert peak[0] == CORE_THREADS and all(name.startswith("gdpr-core") for name in seen)


# --- commands and documents ---------------------------------------------------------------------------------------


@scenario
async def test_help_and_document_commands_reply_without_showing_work():
    documents = FakeDocuments({ADMIN.user}, [record()])
    conversation = Conversation(FakeAnswerService(), documents)
    for text, expected in (("help", Help()), ("docs x", DocumentList((record(),))), ("forget", FileNameMissing()),
                           ("forget Retention.pdf", AdminsOnly(AdminAction.REMOVE))):
        channel = await replies_to(conversation, text)
        assert channel.replies == [expected] and channel.progress == []
    assert (await replies_to(conversation, "forget Nope.pdf", ADMIN)).replies == [NoSuchDocument("Nope.pdf")]
    assert (await replies_to(conversation, "forget retention.pdf", ADMIN)).replies == [Forgotten(record())]
    assert (await replies_to(conversation, "docs", ADMIN)).replies == [DocumentList(())]


@scenario
async def test_without_documents_uploads_and_document_commands_are_not_enabled():
    conversation = Conversation(FakeAnswerService())
    file = FakeFile()
    for text, attachments in (("docs", ()), ("forget x.pdf", ()), ("", (file.attachment,))):
        assert (await replies_to(conversation, text, ADMIN, attachments=attachments)).replies == [UploadsDisabled()]
    assert file.fetched == []


@scenario
async def test_a_file_is_fetched_only_for_an_admin_and_within_the_size_limit():
    documents = FakeDocuments({ADMIN.user}, max_bytes=1000)
    conversation = Conversation(FakeAnswerService(), documents)
    refused, large, broken = FakeFile(), FakeFile(size=1001), FakeFile(fails=True)
    member = await replies_to(conversation, "", MEMBER, attachments=(refused.attachment,))
    assert member.replies == [AdminsOnly(AdminAction.ADD)] and refused.fetched == []
    assert member.progress == ["Retention.pdf"]
    assert (await replies_to(conversation, "", ADMIN, attachments=(large.attachment,))).replies == [
        UploadRefused("Retention.pdf", too_large("Retention.pdf", 1000))]
    assert large.fetched == []
    assert (await replies_to(conversation, "", ADMIN, attachments=(broken.attachment,))).replies == [
        NotDownloaded("Retention.pdf")]
    assert broken.fetched == [1001]  # one byte over the limit is enough for the core to refuse


@scenario
async def test_indexing_that_fails_is_a_failed_reply_naming_the_file(caplog):
    class Broken(FakeDocuments):
        def add(self, data, filename, *, asker):
            raise OSError("disk full")

    file = FakeFile()
    with caplog.at_level(logging.ERROR, logger="adapters.conversation"):
        [failed] = (await replies_to(Conversation(FakeAnswerService(), Broken({ADMIN.user})), "", ADMIN,
                                     attachments=(file.attachment,))).replies
    assert (failed.task, failed.subject) == (Task.INDEXING, "Retention.pdf")
    assert any(failed.reference in r.getMessage() and r.exc_info for r in caplog.records)


# --- feedback -----------------------------------------------------------------------------------------------------


@scenario
async def test_feedback_is_recorded_or_said_to_be_unknown():
    conversation = Conversation(FakeAnswerService(known_request_ids={"req-1"}))
    assert await conversation.feedback("req-1", helpful=True, asker=MEMBER) == FeedbackRecorded()
    assert await conversation.feedback("req-2", helpful=True, asker=MEMBER) == FeedbackNotFound()

    class Down(FakeAnswerService):
        def record_feedback(self, request_id, *, helpful, asker):
            raise RuntimeError("audit trail unavailable")

    failed = await Conversation(Down()).feedback("req-1", helpful=False, asker=MEMBER)
    assert isinstance(failed, Failed) and failed.task is Task.FEEDBACK
