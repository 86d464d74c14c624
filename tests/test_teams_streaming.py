"""Teams streaming and the AI-app features over real HTTP: in LLM mode a personal chat shows the answer's stages as
informative stream updates, then a final message holding only the verified answer; channels and group chats get
one message. Feedback clicks reach the audit trail, and a chat's history survives a restart."""
from __future__ import annotations

import asyncio
import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from adapters import wording
from adapters.conversation import Conversation
from adapters.teams import TeamsConfig
from core.models import Stage
from core.storage import embedded_storage
from evals.fake_bot_connector import FakeBotConnector, SentActivity
from evals.fake_llm import Reply
from tests.fake_service import FakeAnswerService
from tests.helpers import QUESTION, UNVERIFIED, VERIFIED, bounded, llm_mode
from tests.test_teams import (CHANNEL_THREAD, PERSONAL_CHAT, _activity, channel_mention, personal_message,
                              running_bot)

STREAMING = TeamsConfig(streaming=True)
GROUP_CHAT = "19:group-chat-1@thread.v2"

scenario = bounded(timeout_s=30)


def _everything(activity: SentActivity) -> str:
    return json.dumps(activity.activity, ensure_ascii=False)


def _feedback(service_url: str, answer_id: str, reaction: str) -> dict[str, Any]:
    return personal_message(service_url, None, f"f-{answer_id}") | {
        "type": "invoke", "name": "message/submitAction", "replyToId": answer_id,
        "value": {"actionName": "feedback", "actionValue": {"reaction": reaction}}}


@pytest.fixture
def verified_and_not(components):
    components.retriever  # built outside the scenario's time limit
    with llm_mode(components, [Reply.json({"statements": [VERIFIED, UNVERIFIED]})]) as assistant:
        yield assistant


@scenario
async def test_in_llm_mode_a_personal_chat_streams_the_stages_then_only_the_verified_answer(verified_and_not):
    async with running_bot(STREAMING, conversation=Conversation(verified_and_not)) as bot:
        await bot.post(personal_message(bot.connector.url, QUESTION))
        final = await bot.connector.wait_for(lambda a: a.type == "message", timeout=20)
        first, *updates = [a for a in bot.connector.sent if a.type == "typing"]
        infos = [a.stream_info for a in (first, *updates)]
        assert [(i["streamType"], i["streamSequence"]) for i in infos] == [("informative", 1), ("informative", 2),
                                                                         ("informative", 3)]
        assert [a.text for a in (first, *updates)] == [wording.STAGES[s] for s in Stage]
        # Teams names the stream by the id it gave the first update; every later activity carries it.
        assert "streamId" not in infos[0] and all(a.stream_info["streamId"] == first.id for a in updates)
        [answer] = final
        assert answer.stream_info == {"type": "streaminfo", "streamType": "final", "streamSequence": 4,
                                      "streamId": first.id}
        # A personal chat shows the quote in the citation's pop-up, cut to Teams' 160 characters.
        assert VERIFIED["text"] in answer.text and VERIFIED["quote"][:100] in _everything(answer)
        # The answer as today: the AI label with its citations, and Teams' feedback buttons.
        [label] = [e for e in answer.activity["entities"] if e["type"] == "https://schema.org/Message"]
        assert label["additionalType"] == ["AIGeneratedContent"] and label["citation"]
        assert answer.activity["channelData"] == {"feedbackLoopEnabled": True}
        # The statement whose quote is not in Art. 33(1) was never shown, neither streamed nor final.
        assert not any("50 million" in _everything(a) or "50 000 000" in _everything(a) for a in bot.connector.sent)


def group_chat_mention(service_url: str, question: str) -> dict[str, Any]:
    return _activity(service_url, {"id": GROUP_CHAT, "conversationType": "groupChat", "isGroup": True}, question)


@pytest.mark.parametrize("config, ask, chat", [
    (STREAMING, channel_mention, CHANNEL_THREAD),
    (STREAMING, group_chat_mention, GROUP_CHAT),
    (TeamsConfig(), personal_message, PERSONAL_CHAT),  # extractive mode: answers come at once
], ids=["channel", "group-chat", "personal-chat-without-llm"])
@scenario
async def test_no_stream_outside_llm_mode_personal_chats(config, ask, chat):
    async with running_bot(config) as bot:
        await bot.post(ask(bot.connector.url, "When must a breach be notified?"))
        await bot.answer(chat)
        assert [a.type for a in bot.connector.sent] == ["typing", "message"]
        assert all(a.stream_info is None for a in bot.connector.sent)


class HeldAnswers(FakeAnswerService):
    """Holds the first answer until `release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def ask(self, question, **kwargs):
        if question == "first":
            self.release.wait(10)
        return super().ask(question, **kwargs)


@scenario
async def test_a_second_question_while_the_chat_streams_gets_a_plain_message():
    service = HeldAnswers()
    async with running_bot(STREAMING, service=service) as bot:
        await bot.post(personal_message(bot.connector.url, "first", "p1"))
        await bot.connector.wait_for(lambda a: a.stream_info is not None)
        await bot.post(personal_message(bot.connector.url, "second", "p2"))
        [second] = await bot.connector.wait_for(lambda a: a.type == "message")
        assert second.stream_info is None
        service.release.set()
        [_, first] = await bot.connector.wait_for(lambda a: a.type == "message", count=2)
        assert first.stream_info["streamType"] == "final"
        # The second question showed only the plain typing indicator.
        assert sum(a.type == "typing" and a.stream_info is None for a in bot.connector.sent) == 1


@pytest.mark.parametrize("reaction, recorded", [("like", "up"), ("dislike", "down")])
@scenario
async def test_a_click_on_teams_feedback_buttons_is_recorded_in_the_audit_trail(audited, reaction, recorded):
    assistant, audit = audited
    async with running_bot(conversation=Conversation(assistant)) as bot:
        await bot.post(personal_message(bot.connector.url, QUESTION))
        answer = await bot.answer(PERSONAL_CHAT)
        assert answer.activity["channelData"] == {"feedbackLoopEnabled": True}
        # The answer id is mapped once the connector has acknowledged the send; a user clicks later.
        for _ in range(100):
            assert (await bot.post(_feedback(bot.connector.url, answer.id, reaction))).status == 200
            if any(row["feedback"] for row in audit.export()):
                break
            await asyncio.sleep(0.02)
        [row] = list(audit.export())
        assert row["question"] == QUESTION and row["feedback"] == recorded


def _stored_conversation(storage_dir: Path, service: FakeAnswerService):
    storage = embedded_storage(storage_dir)
    return storage, Conversation(service, deliveries=storage.deliveries, thread_memory=storage.threads,
                                 sent_answers=storage.sent_answers)


@scenario
async def test_a_personal_chats_history_and_feedback_survive_a_restart(tmp_path: Path):
    before, after = FakeAnswerService(), FakeAnswerService()
    # One connector for both runs, so that the ids it gives the bot's messages stay unique, as Teams' are.
    connector = FakeBotConnector()
    storage, conversation = _stored_conversation(tmp_path, before)
    async with running_bot(connector=connector, conversation=conversation) as bot:
        await bot.post(personal_message(bot.connector.url, "When must a breach be notified?", "p1"))
        answer = await bot.answer(PERSONAL_CHAT)
    storage.close()
    # A new process over the same data dir: nothing of the first is kept in memory.
    storage, conversation = _stored_conversation(tmp_path, after)
    try:
        async with running_bot(connector=connector, conversation=conversation) as bot:
            await bot.post(personal_message(bot.connector.url, "And to whom?", "p2"))
            await bot.connector.wait_for(lambda a: a.type == "message", count=2)
            [follow_up] = after.asked
            assert [t.text for t in follow_up.history][:1] == ["When must a breach be notified?"]
            assert "not later than 72 hours" in follow_up.history[1].text
            assert (await bot.post(_feedback(bot.connector.url, answer.id, "like"))).status == 200
            # Only the stored map knows which answer that message carried: this process never sent it.
            [(request_id, helpful, _)] = after.feedback
            assert helpful is True and re.fullmatch(r"[0-9a-f]{12}", request_id)
    finally:
        storage.close()
