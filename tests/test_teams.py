"""The Teams adapter over real HTTP: the aiohttp app on loopback, replies caught by a fake Bot Connector."""
from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from adapters import wording
from adapters.conversation import Conversation
from adapters.teams import TeamsConfig, build_teams_app
from bot.settings import SettingsError, load_settings
from bot.wiring import teams_config
from core.models import Turn
from core.service import RateLimited
from evals.fake_bot_connector import FakeBotConnector, SentActivity
from tests.fake_service import ART_33_1_URL, FakeAnswerService

BOT_ID = "28:gdpr-bot"
TENANT = "tenant-1"
CHANNEL_THREAD = "19:general@thread.tacv2;messageid=1700000000001"
PERSONAL_CHAT = "a:personal-chat-1"


CREDENTIALS = {"app_id": "00000000-0000-0000-0000-000000000001", "app_password": "not-a-secret"}
NO_CREDENTIALS = {"MICROSOFT_APP_ID": "", "MICROSOFT_APP_PASSWORD": "", "MICROSOFT_APP_TENANT_ID": "",
                  "MICROSOFT_APP_TYPE": "MultiTenant", "TEAMS_ALLOW_UNAUTHENTICATED_REMOTE": "false",
                  "TEAMS_HOST": "127.0.0.1"}


@dataclass
class Harness:
    url: str
    connector: FakeBotConnector
    service: FakeAnswerService
    http: aiohttp.ClientSession

    async def post(
        self, body: dict[str, Any] | bytes, *, headers: dict[str, str] | None = None
    ) -> aiohttp.ClientResponse:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", **(headers or {})}
        async with self.http.post(f"{self.url}/api/messages", data=data, headers=headers) as response:
            await response.read()
            return response

    async def answer(self, conversation_id: str) -> SentActivity:
        (sent,) = await self.connector.wait_for(
            lambda a: a.type == "message" and a.accepted and a.conversation_id == conversation_id
        )
        return sent


@asynccontextmanager
async def running_bot(config: TeamsConfig | None = None, service: FakeAnswerService | None = None,
                      connector: FakeBotConnector | None = None, documents: Any = None,
                      conversation: Conversation | None = None, **app_options: Any) -> AsyncIterator[Harness]:
    """`conversation`: the bot's own (the real assistant, stored history), instead of one over `service`."""
    service = service or FakeAnswerService()
    async with connector or FakeBotConnector() as connector, aiohttp.ClientSession() as http:
        app = build_teams_app(config or TeamsConfig(), conversation or Conversation(service, documents),
                              **app_options)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(runner, sock).start()
        try:
            yield Harness(f"http://127.0.0.1:{sock.getsockname()[1]}", connector, service, http)
        finally:
            await runner.cleanup()


def _activity(service_url: str, conversation: dict[str, Any], text: str | None, **extra: Any) -> dict[str, Any]:
    activity = {
        "type": "message",
        "id": "1700000000001",
        "channelId": "msteams",
        "serviceUrl": service_url,
        "from": {"id": "29:user-1", "name": "Dana", "aadObjectId": "aad-user-1"},
        "recipient": {"id": BOT_ID, "name": "GDPR Bot"},
        "conversation": {"tenantId": TENANT, **conversation},
        "channelData": {"tenant": {"id": TENANT}},
        **extra,
    }
    if text is not None:
        activity["text"] = text
    return activity


def channel_mention(service_url: str, question: str) -> dict[str, Any]:
    mention = "<at>GDPR Bot</at>"
    return _activity(
        service_url, {"id": CHANNEL_THREAD, "conversationType": "channel", "isGroup": True}, f"{mention} {question}",
        entities=[{"type": "mention", "text": mention, "mentioned": {"id": BOT_ID, "name": "GDPR Bot"}}],
        channelData={"tenant": {"id": TENANT}, "team": {"id": "team-1"}, "channel": {"id": "19:general@thread.tacv2"}},
    )


def personal_message(service_url: str, text: str | None, message_id: str = "p1") -> dict[str, Any]:
    return _activity(service_url, {"id": PERSONAL_CHAT, "conversationType": "personal"}, text, id=message_id)


def test_channel_mention_is_answered_in_its_thread_with_citations() -> None:
    async def scenario() -> None:
        async with running_bot() as bot:
            response = await bot.post(channel_mention(bot.connector.url, "When must a breach be notified?"))
            assert response.status == 200
            answer = await bot.answer(CHANNEL_THREAD)

            assert bot.service.asked[0].question == "When must a breach be notified?"
            asker = bot.service.asked[0].asker
            assert (asker.platform, asker.workspace, asker.channel, asker.user) == (
                "teams", TENANT, CHANNEL_THREAD, "aad-user-1")
            assert answer.reply_to_id == "1700000000001"
            assert "[1]" in answer.text
            (entity,) = [e for e in answer.activity["entities"] if e["type"] == "https://schema.org/Message"]
            assert entity["additionalType"] == ["AIGeneratedContent"]
            assert entity["citation"][0]["position"] == 1
            assert entity["citation"][0]["appearance"]["url"] == ART_33_1_URL
            assert answer.activity["channelData"] == {"feedbackLoopEnabled": True}
            # Channels do not render the citation entity, so the sources come as a card too.
            (card,) = answer.activity["attachments"]
            assert card["contentType"] == "application/vnd.microsoft.card.adaptive"
            assert ART_33_1_URL in json.dumps(card["content"])
            assert answer.authorization is None  # no credentials: the SDK's anonymous connector client

    asyncio.run(scenario())


def test_typing_indicator_precedes_the_answer() -> None:
    async def scenario() -> None:
        async with running_bot() as bot:
            await bot.post(personal_message(bot.connector.url, "What is a personal data breach?"))
            await bot.answer(PERSONAL_CHAT)
            assert [a.type for a in bot.connector.sent] == ["typing", "message"]

    asyncio.run(scenario())


def test_personal_chat_follow_up_gets_the_earlier_turn() -> None:
    async def scenario() -> None:
        async with running_bot() as bot:
            await bot.post(personal_message(bot.connector.url, "When must a breach be notified?", "p1"))
            first = await bot.answer(PERSONAL_CHAT)
            await bot.post(personal_message(bot.connector.url, "And to whom?", "p2"))
            await bot.connector.wait_for(lambda a: a.type == "message", count=2)

            follow_up = bot.service.asked[1]
            assert follow_up.question == "And to whom?"
            assert follow_up.history[0] == Turn("user", "When must a breach be notified?")
            assert follow_up.history[1].role == "assistant"
            assert "not later than 72 hours" in follow_up.history[1].text
            # Personal chats render citations natively: no duplicate source card.
            assert not first.activity.get("attachments")

    asyncio.run(scenario())


def test_a_redelivered_message_is_answered_once() -> None:
    async def scenario() -> None:
        async with running_bot() as bot:
            activity = personal_message(bot.connector.url, "When must a breach be notified?", "p7")
            assert (await bot.post(activity)).status == 200
            assert (await bot.post(activity)).status == 200  # the connector retries when an answer is slow
            await bot.answer(PERSONAL_CHAT)
            await bot.connector.assert_no_more(lambda a: a.type == "message", count=1)
            assert len(bot.service.asked) == 1

    asyncio.run(scenario())


def test_feedback_invoke_is_recorded_for_the_answer() -> None:
    async def scenario() -> None:
        async with running_bot() as bot:
            await bot.post(personal_message(bot.connector.url, "When must a breach be notified?"))
            answer = await bot.answer(PERSONAL_CHAT)
            feedback = personal_message(bot.connector.url, None, "f1") | {
                "type": "invoke", "name": "message/submitAction", "replyToId": answer.id,
                "value": {"actionName": "feedback",
                          "actionValue": {"reaction": "dislike", "feedback": "{\"feedbackText\":\"too short\"}"}},
            }
            # The answer id is mapped once the connector has acknowledged the send; a user clicks later.
            for _ in range(100):
                response = await bot.post(feedback)
                assert response.status == 200
                if bot.service.feedback:
                    break
                await asyncio.sleep(0.02)
            ((request_id, helpful, asker),) = bot.service.feedback
            assert re.fullmatch(r"[0-9a-f]{12}", request_id)
            assert helpful is False
            assert asker.user == "aad-user-1"

    asyncio.run(scenario())


def test_feedback_on_an_unknown_message_is_acknowledged_but_not_recorded() -> None:
    async def scenario() -> None:
        async with running_bot() as bot:
            feedback = personal_message(bot.connector.url, None) | {
                "type": "invoke", "name": "message/submitAction", "replyToId": "never-sent",
                "value": {"actionName": "feedback", "actionValue": {"reaction": "like"}},
            }
            assert (await bot.post(feedback)).status == 200
            assert bot.service.feedback == []

    asyncio.run(scenario())


def test_core_failure_gets_an_apology_with_a_logged_reference(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        async with running_bot(service=FakeAnswerService(fail_with=RuntimeError("index missing"))) as bot:
            await bot.post(personal_message(bot.connector.url, "Is consent required?"))
            apology = await bot.answer(PERSONAL_CHAT)
            reference = re.search(r"reference ([0-9a-f]{8})", apology.text)
            assert apology.text.startswith("Sorry") and reference
            assert any(reference.group(1) in r.getMessage() and r.exc_info for r in caplog.records)

    with caplog.at_level(logging.ERROR, logger="adapters.conversation"):
        asyncio.run(scenario())


def test_rejected_question_is_answered_with_the_reason() -> None:
    async def scenario() -> None:
        async with running_bot(service=FakeAnswerService(fail_with=RateLimited(12))) as bot:
            await bot.post(personal_message(bot.connector.url, "Is consent required?"))
            assert (await bot.answer(PERSONAL_CHAT)).text == wording.rejected(RateLimited(12))

    asyncio.run(scenario())


def test_answer_refused_by_teams_is_resent_as_plain_text_with_its_quotes(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        connector = FakeBotConnector(reject=lambda activity: bool(activity.get("entities")))
        async with running_bot(connector=connector) as bot:
            await bot.post(personal_message(bot.connector.url, "When must a breach be notified?"))
            fallback = await bot.answer(PERSONAL_CHAT)
            assert [a.accepted for a in bot.connector.sent if a.type == "message"] == [False, True]
            assert "“not later than 72 hours after having become aware of it”" in fallback.text
            assert any("retrying as plain text" in r.getMessage() and r.exc_info for r in caplog.records)

    with caplog.at_level(logging.ERROR, logger="adapters.teams"):
        asyncio.run(scenario())


def test_expect_replies_returns_the_answer_in_the_response() -> None:
    async def scenario() -> None:
        async with running_bot() as bot:
            activity = personal_message(bot.connector.url, "When must a breach be notified?")
            async with bot.http.post(f"{bot.url}/api/messages", json=activity | {"deliveryMode": "expectReplies"}) as r:
                assert r.status == 200
                replies = (await r.json())["activities"]
            assert [a["type"] for a in replies] == ["typing", "message"]
            assert "[1]" in replies[1]["text"] and replies[1]["entities"][0]["citation"]
            assert bot.connector.sent == []

    asyncio.run(scenario())


def test_message_without_text_gets_a_usage_hint() -> None:
    async def scenario() -> None:
        async with running_bot() as bot:
            assert (await bot.post(personal_message(bot.connector.url, None))).status == 200
            assert "GDPR" in (await bot.answer(PERSONAL_CHAT)).text
            assert bot.service.asked == []

    asyncio.run(scenario())


def test_unknown_activity_type_is_ignored() -> None:
    async def scenario() -> None:
        async with running_bot() as bot:
            response = await bot.post(personal_message(bot.connector.url, None) | {"type": "somethingNew"})
            assert response.status == 200
            await bot.post(personal_message(bot.connector.url, "Still there?"))
            await bot.answer(PERSONAL_CHAT)
            assert [a.question for a in bot.service.asked] == ["Still there?"]

    asyncio.run(scenario())


@pytest.mark.parametrize("header", ["Bearer not-a-jwt", "Basic dXNlcjpwYXNz", "Bearer a.b.c"])
@pytest.mark.parametrize("credentials", [{}, CREDENTIALS], ids=["without-credentials", "with-credentials"])
def test_malformed_authorization_is_401(header: str, credentials: dict[str, str]) -> None:
    async def scenario() -> None:
        async with running_bot(TeamsConfig(**credentials)) as bot:
            response = await bot.post(personal_message(bot.connector.url, "hi"), headers={"Authorization": header})
            assert response.status == 401
            assert bot.service.asked == [] and bot.connector.sent == []

    asyncio.run(scenario())


def test_missing_authorization_with_credentials_is_401() -> None:
    async def scenario() -> None:
        async with running_bot(TeamsConfig(**CREDENTIALS)) as bot:
            assert (await bot.post(personal_message(bot.connector.url, "hi"))).status == 401
            assert bot.service.asked == []

    asyncio.run(scenario())


@pytest.mark.parametrize(("body", "content_type", "status"), [
    (b"{not json", "application/json", 400),
    (b"[1, 2]", "application/json", 400),
    (b'{"text": "no type"}', "application/json", 400),
    (b'{"type": "message", "entities": "not-a-list"}', "application/json", 400),
    (b"type=message", "application/x-www-form-urlencoded", 415),
    (b'{"type": "message", "text": "' + b"x" * 300_000 + b'"}', "application/json", 413),
])
def test_bad_requests_get_a_sensible_status(body: bytes, content_type: str, status: int) -> None:
    async def scenario() -> None:
        async with running_bot() as bot:
            assert (await bot.post(body, headers={"Content-Type": content_type})).status == status
            async with bot.http.get(f"{bot.url}/healthz") as health:
                assert health.status == 200

    asyncio.run(scenario())


def test_extra_routes_are_served() -> None:
    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(text="answers_total 0\n")

    async def scenario() -> None:
        async with running_bot(extra_routes=[web.get("/metrics", metrics)]) as bot:
            async with bot.http.get(f"{bot.url}/metrics") as response:
                assert (response.status, await response.text()) == (200, "answers_total 0\n")

    asyncio.run(scenario())


def test_refuses_to_serve_beyond_loopback_without_credentials() -> None:
    with pytest.raises(SettingsError, match="TEAMS_ALLOW_UNAUTHENTICATED_REMOTE"):
        load_settings(**NO_CREDENTIALS | {"TEAMS_HOST": "0.0.0.0"})
    assert load_settings(**NO_CREDENTIALS | {"TEAMS_HOST": "0.0.0.0", "TEAMS_ALLOW_UNAUTHENTICATED_REMOTE": "true"})
    assert load_settings(**NO_CREDENTIALS | {"TEAMS_HOST": "::1"})


@pytest.mark.parametrize(("settings", "variable"), [
    ({"MICROSOFT_APP_ID": "00000000-0000-0000-0000-000000000001"}, "MICROSOFT_APP_PASSWORD"),
    ({"MICROSOFT_APP_PASSWORD": "secret"}, "MICROSOFT_APP_ID"),
    ({"MICROSOFT_APP_ID": "00000000-0000-0000-0000-000000000001", "MICROSOFT_APP_PASSWORD": "secret",
      "MICROSOFT_APP_TYPE": "SingleTenant"}, "MICROSOFT_APP_TENANT_ID"),
])
def test_incomplete_credentials_are_refused(settings: dict[str, str], variable: str) -> None:
    with pytest.raises(SettingsError, match=f"^Invalid setting {variable}: [^\\n]+$"):
        load_settings(**NO_CREDENTIALS | settings)


def test_answers_are_streamed_only_in_llm_mode() -> None:
    assert not teams_config(load_settings(**NO_CREDENTIALS | {"GROQ_API_KEY": ""})).streaming
    assert teams_config(load_settings(**NO_CREDENTIALS | {"GROQ_API_KEY": "gsk-test"})).streaming
