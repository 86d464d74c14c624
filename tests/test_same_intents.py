"""The same message means the same thing everywhere: each scenario goes through a Slack mention, `/gdpr`, a Teams
message and the terminal chat (each over its real adapter), and every one of them must produce the same reply
intent. Every divergence the platforms once had is a scenario here."""
from __future__ import annotations

import asyncio
import io
import json
import re
import socket

import aiohttp
import pytest
from aiohttp import web

from adapters import terminal
from adapters.conversation import Conversation
from adapters.intents import AdminAction, AdminsOnly, Answered, Declined, DocumentList, Failed, Help, Rejected, Task
from adapters.teams import TeamsConfig, build_teams_app
from core.models import AbstentionReason, Asker
from core.service import QuestionTooLong
from evals.fake_bot_connector import FakeBotConnector
from evals.fake_slack import LoopbackSlack, command_body, event_body, mention
from tests.fake_service import FakeAnswerService, FakeDocuments, record
from tests.helpers import bounded

ADMIN = "U0ADMIN01"
LIMIT = 40


class Recording(Conversation):
    """The real conversation, keeping every reply it hands a platform."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.replies: list = []

    async def handle(self, message, channel):
        await super().handle(message, _Tap(channel, self.replies))


class _Tap:
    def __init__(self, channel, replies: list):
        self._channel = channel
        self._replies = replies

    async def send(self, reply) -> None:
        self._replies.append(reply)
        await self._channel.send(reply)

    def working(self, file_name=None):
        return self._channel.working(file_name)


async def slack_mention(conversation: Recording, text: str) -> None:
    async with LoopbackSlack(None, conversation=conversation) as slack:
        assert (await slack.post(event_body(mention(text, ts="1700000000.000100"))))[0] == 200
        await slack.fake.wait_for("chat.postMessage")


async def slack_command(conversation: Recording, text: str) -> None:
    async with LoopbackSlack(None, conversation=conversation) as slack:
        status, body = await slack.post(command_body(text, response_url=slack.fake.response_url()))
        assert status == 200
        if not body:  # help is the acknowledgement itself; the rest comes through the response_url
            await slack.fake.wait_for("response_url")


async def teams_message(conversation: Recording, text: str) -> None:
    async with FakeBotConnector() as connector, aiohttp.ClientSession() as http:
        runner = web.AppRunner(build_teams_app(TeamsConfig(), conversation), access_log=None)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(runner, sock).start()
        activity = {"type": "message", "id": "m1", "channelId": "msteams", "serviceUrl": connector.url, "text": text,
                    "from": {"id": "29:user-1", "aadObjectId": "aad-user-1"}, "recipient": {"id": "28:gdpr-bot"},
                    "conversation": {"id": "a:personal", "conversationType": "personal", "tenantId": "tenant-1"},
                    "channelData": {"tenant": {"id": "tenant-1"}}}
        try:
            url = f"http://127.0.0.1:{sock.getsockname()[1]}/api/messages"
            async with http.post(url, data=json.dumps(activity), headers={"Content-Type": "application/json"}) as r:
                assert r.status == 200
            await connector.wait_for(lambda a: a.type == "message")
        finally:
            await runner.cleanup()


async def terminal_chat(conversation: Recording, text: str) -> None:
    lines = iter([text])

    def read(_prompt: str) -> str:
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None

    out = io.StringIO()
    await asyncio.to_thread(terminal.chat, conversation, Asker(platform="cli", user="operator"), read=read, out=out)
    assert out.getvalue().count("\n") > 1  # the greeting, then the reply


PLATFORMS = {"slack mention": slack_mention, "/gdpr": slack_command, "teams": teams_message, "terminal": terminal_chat}


def shape(reply) -> object:
    """What must agree across platforms (request ids and references differ by nature)."""
    match reply:
        case Answered(answer=answer):
            return "answered", answer.question
        case Declined():
            return "declined", reply.reason
        case Failed(reference=reference, task=task):
            assert re.fullmatch(r"[0-9a-f]{8}", reference)
            return "failed", task
        case Rejected(reason=QuestionTooLong(length=length, limit=limit)):
            return "too long", length, limit
    return reply


SCENARIOS = {
    "answered": (dict(), "When must a breach be notified?", ("answered", "When must a breach be notified?")),
    "declined with its reason": (dict(abstain=AbstentionReason.NATIONAL_LAW), "What is the age of consent in Spain?",
                                 ("declined", AbstentionReason.NATIONAL_LAW)),
    "docs with an argument": (dict(), "docs retention", DocumentList((record(),))),
    "forget by a non-admin": (dict(), "forget Retention.pdf", AdminsOnly(AdminAction.REMOVE)),
    "help": (dict(), "help", Help()),
    "an over-long message": (dict(), "x" * (LIMIT + 10), ("too long", LIMIT + 10, LIMIT)),
    "a core failure": (dict(fail_with=RuntimeError("index corrupted")), "Is consent required?",
                       ("failed", Task.ANSWERING)),
}


@pytest.mark.parametrize("scenario", SCENARIOS)
@bounded(timeout_s=60)
async def test_every_platform_replies_with_the_same_intent(scenario):
    service_options, text, expected = SCENARIOS[scenario]
    seen = {}
    for name, send in PLATFORMS.items():
        service = FakeAnswerService(max_question_chars=LIMIT, **service_options)
        conversation = Recording(service, FakeDocuments({ADMIN}, [record()]))
        await send(conversation, text)
        seen[name] = [shape(reply) for reply in conversation.replies]
    assert seen == {name: [expected] for name in PLATFORMS}
