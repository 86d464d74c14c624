"""Slack as an AI app: suggested prompts where a conversation starts, the status while the bot works, the answer
streamed in LLM mode (a plan of what the bot does, then only the verified answer), Slack's own feedback buttons.
The real bolt app over HTTP against the fake Web API; the LLM cases run the real assistant against a local fake
of the model."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from adapters import wording
from adapters.prompts import example_questions
from core.models import Stage, Statement
from evals.fake_llm import Reply
from evals.fake_slack import (
    LoopbackSlack,
    assistant_thread_started,
    button_body,
    event_body,
    home_opened,
    mention,
)
from tests.fake_service import FakeAnswerService
from tests.helpers import QUESTION, UNVERIFIED, VERIFIED, bounded, llm_mode

CHANNEL = "C00000001"
DM = "D00000001"
USER = "U00000001"
ROOT = "1700000000.000100"

scenario = bounded(timeout_s=30)


def _everything(params: dict) -> str:
    return json.dumps(params, ensure_ascii=False)


def _tasks(calls) -> list[tuple[str, str]]:
    """(task id, status) of every task update in the calls, in order."""
    return [(chunk["id"], chunk["status"]) for call in calls for chunk in call.params.get("chunks") or []
            if chunk["type"] == "task_update"]


# --- suggested prompts ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("locale, lang", [("de-DE", "de"), ("fr-FR", "fr"), ("en-GB", "en"), ("ja-JP", "en")])
@scenario
async def test_opening_the_dm_pins_real_questions_in_the_users_language(locale, lang):
    async with LoopbackSlack(FakeAnswerService()) as slack:
        slack.fake.set_locale(USER, locale)
        assert (await slack.post(event_body(home_opened(user=USER, channel=DM))))[0] == 200
        [pinned] = await slack.fake.wait_for("assistant.threads.setSuggestedPrompts")
        # The agent view pins prompts on the DM itself: a thread_ts would make Slack drop them.
        assert pinned.params["channel_id"] == DM and "thread_ts" not in pinned.params
        questions = example_questions(lang)
        assert pinned.params["prompts"] == [{"title": q, "message": q} for q in questions] and len(questions) == 4
        [lookup] = slack.fake.calls_to("users.info")
        assert lookup.params["user"] == USER and lookup.params["include_locale"] in (True, "true", "1")


@scenario
async def test_opening_the_home_tab_pins_nothing():
    async with LoopbackSlack(FakeAnswerService()) as slack:
        assert (await slack.post(event_body(home_opened(tab="home"))))[0] == 200
        await slack.fake.assert_no_more("assistant.threads.setSuggestedPrompts")


@scenario
async def test_a_new_thread_of_the_older_assistant_view_gets_the_prompts_in_it():
    async with LoopbackSlack(FakeAnswerService()) as slack:
        await slack.post(event_body(assistant_thread_started(channel=DM, thread_ts=ROOT)))
        [pinned] = await slack.fake.wait_for("assistant.threads.setSuggestedPrompts")
        assert pinned.params["thread_ts"] == ROOT and len(pinned.params["prompts"]) == 4


# --- streaming (FakeAnswerService: the stages without a model) --------------------------------------------------


@scenario
async def test_an_answer_is_streamed_as_a_plan_then_stopped_with_the_answer_and_the_status_cleared():
    async with LoopbackSlack(FakeAnswerService(), streaming=True) as slack:
        await slack.post(event_body(mention("When must a breach be notified?", ts=ROOT)))
        [stopped] = await slack.fake.wait_for("chat.stopStream")
        [started] = slack.fake.calls_to("chat.startStream")
        appended = slack.fake.calls_to("chat.appendStream")
        status_set, cleared = await slack.fake.wait_for("assistant.threads.setStatus", 2)
        assert status_set.at < started.at < stopped.at <= cleared.at and cleared.params["status"] == ""
        assert started.params["thread_ts"] == ROOT and started.params["task_display_mode"] == "plan"
        # In channels a stream names who it is for.
        assert (started.params["recipient_user_id"], started.params["recipient_team_id"]) == (USER, "T00000001")
        assert started.params["chunks"][0] == {"type": "plan_update", "title": wording.PLAN_TITLE}
        assert _tasks([started, *appended, stopped]) == [
            ("searching", "in_progress"), ("searching", "complete"), ("generating", "in_progress"),
            ("generating", "complete"), ("verifying", "in_progress"), ("verifying", "complete")]
        # The answer is the final blocks of the streamed message, with the feedback buttons; nothing else is posted.
        assert any(b["type"] == "context_actions" for b in stopped.params["blocks"])
        assert "not later than 72 hours" in _everything(stopped.params["blocks"])
        [streamed] = slack.fake.bot_messages(CHANNEL, ROOT)
        assert streamed["ts"] == stopped.params["ts"] and streamed["blocks"] == stopped.params["blocks"]
        await slack.fake.assert_no_more("chat.postMessage")


@scenario
async def test_extractive_answers_are_one_message_and_never_streamed():
    async with LoopbackSlack(FakeAnswerService()) as slack:
        await slack.post(event_body(mention("When must a breach be notified?", ts=ROOT)))
        await slack.fake.wait_for("chat.postMessage")
        await slack.fake.assert_no_more("chat.postMessage", 1)
        assert slack.fake.calls_to("chat.startStream") == []


@scenario
async def test_where_slack_refuses_a_stream_the_answer_is_posted():
    async with LoopbackSlack(FakeAnswerService(), streaming=True) as slack:
        slack.fake.fail("chat.startStream", "feature_not_enabled")
        await slack.post(event_body(mention("When must a breach be notified?", ts=ROOT)))
        [post] = await slack.fake.wait_for("chat.postMessage")
        assert post.params["thread_ts"] == ROOT and "not later than 72 hours" in _everything(post.params)
        await slack.fake.assert_no_more("chat.postMessage", 1)


class FailsWhileDrafting(FakeAnswerService):
    def ask(self, question, *, progress=None, **kwargs):
        progress(Stage.SEARCHING)
        progress(Stage.GENERATING)
        raise RuntimeError("the model server crashed")


@scenario
async def test_a_failure_mid_stream_ends_the_plan_in_error_with_the_apology():
    async with LoopbackSlack(FailsWhileDrafting(), streaming=True) as slack:
        await slack.post(event_body(mention("When must a breach be notified?", ts=ROOT)))
        [stopped] = await slack.fake.wait_for("chat.stopStream")
        assert _tasks([stopped]) == [("generating", "error")]
        assert "Sorry, something went wrong" in _everything(stopped.params["blocks"])


class LongAnswers(FakeAnswerService):
    """Answers too long for one message."""

    def ask(self, question, **kwargs):
        answer = super().ask(question, **kwargs)
        [statement] = answer.statements
        many = tuple(Statement(f"Point {n}: " + "the controller shall notify " * 40, statement.citations)
                     for n in range(30))
        return replace(answer, statements=many)


@scenario
async def test_an_answer_longer_than_a_message_finishes_the_stream_and_continues_in_the_thread():
    async with LoopbackSlack(LongAnswers(), streaming=True) as slack:
        await slack.post(event_body(mention("When must a breach be notified?", ts=ROOT)))
        [stopped] = await slack.fake.wait_for("chat.stopStream")
        await slack.fake.wait_for("chat.postMessage", where=lambda p: any(b["type"] == "context_actions"
                                                                          for b in p["blocks"]))
        posts = slack.fake.calls_to("chat.postMessage")
        assert len(posts) >= 1 and all(p.params["thread_ts"] == ROOT for p in posts)
        assert "Point 0:" in _everything(stopped.params["blocks"]) and "Point 29:" in _everything(posts[-1].params)
        assert not any(b["type"] == "context_actions" for b in stopped.params["blocks"])
        # Slack took every part (the fake refuses a message over Slack's limits, as Slack does).
        assert len(slack.fake.bot_messages(CHANNEL, ROOT)) == 1 + len(posts)


# --- LLM mode: the real assistant, a local fake of the model --------------------------------------------------


@pytest.fixture
def verified_and_not(components):
    components.retriever  # built outside the scenario's time limit
    with llm_mode(components, [Reply.json({"statements": [VERIFIED, UNVERIFIED]})]) as assistant:
        yield assistant


@scenario
async def test_in_llm_mode_the_streamed_answer_ends_with_only_its_verified_statements(verified_and_not):
    async with LoopbackSlack(verified_and_not, streaming=True) as slack:
        await slack.post(event_body(mention(QUESTION, ts=ROOT)))
        [stopped] = await slack.fake.wait_for("chat.stopStream", timeout_s=20)
        assert slack.fake.calls_to("chat.startStream") and slack.fake.calls_to("chat.appendStream")
        final = _everything(stopped.params["blocks"])
        assert VERIFIED["text"] in final and VERIFIED["quote"] in final
        # The statement whose quote is not in Art. 33(1) was never shown: not streamed, not final, not posted.
        for call in slack.fake.calls:
            assert "50 million" not in _everything(call.params) and "50 000 000" not in _everything(call.params)


@scenario
async def test_an_expired_stream_is_replaced_by_the_verified_answer_with_chat_update(verified_and_not):
    async with LoopbackSlack(verified_and_not, streaming=True) as slack:
        slack.fake.expire_streams_after(0.0)  # as if the model had taken more than five minutes
        await slack.post(event_body(mention(QUESTION, ts=ROOT)))
        [updated] = await slack.fake.wait_for("chat.update", timeout_s=20)
        # Slack refused the next append (message_not_in_streaming_state): no stop was tried on a dead stream.
        assert slack.fake.calls_to("chat.appendStream") and slack.fake.calls_to("chat.stopStream") == []
        # The streamed message itself now holds the verified answer, with its feedback buttons.
        [streamed] = slack.fake.bot_messages(CHANNEL, ROOT)
        assert updated.params["ts"] == streamed["ts"] and updated.params["text"]
        assert VERIFIED["quote"] in _everything(streamed) and "50 million" not in _everything(streamed)
        assert any(b["type"] == "context_actions" for b in streamed["blocks"])
        await slack.fake.assert_no_more("chat.postMessage")


# --- feedback ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("button, recorded", [("positive_button", "up"), ("negative_button", "down")])
@scenario
async def test_a_click_on_slacks_feedback_buttons_is_recorded_in_the_audit_trail(audited, button, recorded):
    assistant, audit = audited
    async with LoopbackSlack(assistant) as slack:
        await slack.post(event_body(mention(QUESTION, ts=ROOT)))
        [post] = await slack.fake.wait_for("chat.postMessage", timeout_s=20)
        [footer] = [b for b in post.params["blocks"] if b["type"] == "context_actions"]
        [buttons] = footer["elements"]
        await slack.post(button_body(buttons["action_id"], buttons[button]["value"], element="feedback_buttons",
                                     response_url=slack.fake.response_url()))
        [thanks] = await slack.fake.wait_for("response_url")
        assert thanks.params["response_type"] == "ephemeral"
        [row] = list(audit.export())
        assert row["question"] == QUESTION and row["feedback"] == recorded
