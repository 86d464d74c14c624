"""The Slack adapter over real HTTP: the bolt app on loopback, signed requests in, a fake Web API out."""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import re
import time

import pytest
from aiohttp import ClientSession, web

from adapters import wording
from adapters.conversation import Conversation
from adapters.slack import SlackConfig, build_slack_app, make_web_app, serve_slack
from adapters.slack.render import FEEDBACK, FEEDBACK_DOWN, FEEDBACK_UP, feedback_value
from bot.settings import SettingsError, load_settings
from bot.wiring import slack_config
from core.models import Asker, Turn
from core.service import RateLimited
from evals import slack_load
from evals.fake_slack import (
    BOT_ID,
    BOT_TOKEN,
    BOT_USER_ID,
    TEAM_ID,
    FakeSlack,
    LoopbackSlack,
    button_body,
    command_body,
    event_body,
    mention,
    sign,
)
from tests.fake_service import ART_33_1_URL, QUOTE, FakeAnswerService
from tests.helpers import bounded

CHANNEL = "C00000001"
DM = "D00000001"
USER = "U00000001"


scenario = bounded(timeout_s=20)


def _all_text(params: dict) -> str:
    return params.get("text", "") + json.dumps(params.get("blocks", []), ensure_ascii=False)


# --- mentions in channels --------------------------------------------------------------------------------


@scenario
async def test_mention_is_answered_in_its_thread_with_eur_lex_link_and_quote():
    service = FakeAnswerService()
    async with LoopbackSlack(service) as slack:
        started = time.monotonic()
        status, _ = await slack.post(event_body(mention("When must a breach be notified?", ts="1700000000.000100")))
        assert status == 200 and time.monotonic() - started < 3

        [post] = await slack.fake.wait_for("chat.postMessage")
        assert post.params["channel"] == CHANNEL
        assert post.params["thread_ts"] == "1700000000.000100"
        text = _all_text(post.params)
        assert f"<{ART_33_1_URL}|Art. 33(1)>" in text
        assert f">{QUOTE}" in text
        assert post.params["text"]  # the fallback is always set
        assert service.asked[0].question == "When must a breach be notified?"
        assert service.asked[0].history == ()
        assert service.asked[0].asker == Asker(platform="slack", workspace=TEAM_ID, channel=CHANNEL, user=USER)


@scenario
async def test_mention_inside_a_thread_replies_to_the_thread_root():
    async with LoopbackSlack(FakeAnswerService()) as slack:
        await slack.post(event_body(mention("And who is notified?", ts="1700000000.000300",
                                            thread_ts="1700000000.000100")))
        [post] = await slack.fake.wait_for("chat.postMessage")
        assert post.params["thread_ts"] == "1700000000.000100"


@scenario
async def test_follow_up_mention_gets_the_threads_earlier_turns():
    service = FakeAnswerService()
    async with LoopbackSlack(service) as slack:
        root, follow_up = "1700000000.000100", "1700000000.000300"
        slack.fake.add_message(CHANNEL, root, f"<@{BOT_USER_ID}> When must a breach be notified?", user=USER)
        slack.fake.add_message(CHANNEL, "1700000000.000200", "Within 72 hours &amp; without undue delay.",
                               user=BOT_USER_ID, bot_id=BOT_ID, thread_ts=root)
        # conversations.replies also returns the message being answered: it must not count as history.
        slack.fake.add_message(CHANNEL, follow_up, f"<@{BOT_USER_ID}> And to whom?", user=USER, thread_ts=root)

        await slack.post(event_body(mention("And to whom?", ts=follow_up, thread_ts=root)))
        await slack.fake.wait_for("chat.postMessage")
        assert service.asked[0].question == "And to whom?"
        assert service.asked[0].history == (
            Turn("user", "When must a breach be notified?"),
            Turn("assistant", "Within 72 hours & without undue delay."),
        )


@scenario
async def test_progress_status_falls_back_to_a_reaction_removed_when_the_answer_lands():
    async with LoopbackSlack(FakeAnswerService()) as slack:
        slack.fake.fail("assistant.threads.setStatus", "not_allowed_token_type")
        await slack.post(event_body(mention("Is consent required?", ts="1700000000.000100")))
        [removed] = await slack.fake.wait_for("reactions.remove")
        [added] = slack.fake.calls_to("reactions.add")
        [post] = slack.fake.calls_to("chat.postMessage")
        assert added.params == removed.params == {"channel": CHANNEL, "timestamp": "1700000000.000100", "name": "mag"}
        assert added.at < post.at <= removed.at


@scenario
async def test_the_assistant_status_shows_while_working_and_is_cleared_by_the_answer():
    async with LoopbackSlack(FakeAnswerService()) as slack:
        await slack.post(event_body(mention("Is consent required?", ts="1700000000.000100")))
        set_, cleared = await slack.fake.wait_for("assistant.threads.setStatus", 2)
        [post] = slack.fake.calls_to("chat.postMessage")
        assert set_.params["thread_ts"] == cleared.params["thread_ts"] == "1700000000.000100"
        assert set_.params["status"] == "Searching the Regulation…"
        assert set_.params["loading_messages"] == list(wording.LOADING_MESSAGES)
        assert cleared.params["status"] == "" and set_.at < post.at <= cleared.at
        assert slack.fake.calls_to("reactions.add") == []


@scenario
async def test_empty_mention_gets_the_help_text():
    service = FakeAnswerService()
    async with LoopbackSlack(service) as slack:
        await slack.post(event_body(mention("", ts="1700000000.000100")))
        [post] = await slack.fake.wait_for("chat.postMessage")
        assert "/gdpr" in post.params["text"] and service.asked == []


# --- direct messages ----------------------------------------------------------------------------------------


def _dm(text: str, ts: str, **extra) -> dict:
    return {"type": "message", "channel_type": "im", "channel": DM, "user": USER, "text": text, "ts": ts,
            "team": TEAM_ID, "event_ts": ts} | extra


@scenario
async def test_direct_message_is_answered_in_its_own_thread_with_the_status_meanwhile():
    service = FakeAnswerService()
    async with LoopbackSlack(service) as slack:
        status, _ = await slack.post(event_body(_dm("What is personal data?", "1700000000.000100")))
        assert status == 200
        [post] = await slack.fake.wait_for("chat.postMessage")
        # Slack's agent view makes every message of the bot's DM the start of a thread.
        assert post.params["channel"] == DM and post.params["thread_ts"] == "1700000000.000100"
        assert f">{QUOTE}" in _all_text(post.params)
        assert service.asked[0].asker.channel == DM
        set_, cleared = await slack.fake.wait_for("assistant.threads.setStatus", 2)
        assert set_.params["channel_id"] == DM and cleared.params["status"] == ""
        assert slack.fake.calls_to("reactions.add") == []


@scenario
async def test_direct_message_in_a_thread_is_answered_in_that_thread():
    async with LoopbackSlack(FakeAnswerService()) as slack:
        await slack.post(event_body(_dm("And fines?", "1700000000.000300", thread_ts="1700000000.000100")))
        [post] = await slack.fake.wait_for("chat.postMessage")
        assert post.params["channel"] == DM and post.params["thread_ts"] == "1700000000.000100"


# --- /gdpr ----------------------------------------------------------------------------------------------------


@scenario
async def test_slash_command_answers_visibly_and_repeats_the_question():
    service = FakeAnswerService()
    async with LoopbackSlack(service) as slack:
        started = time.monotonic()
        status, body = await slack.post(command_body("When must a breach be notified?",
                                                     response_url=slack.fake.response_url()))
        assert status == 200 and body == "" and time.monotonic() - started < 3

        [reply] = await slack.fake.wait_for("response_url")
        assert reply.params["response_type"] == "in_channel"
        text = _all_text(reply.params)
        assert f"<@{USER}> asked:" in text and "When must a breach be notified?" in text
        assert f"<{ART_33_1_URL}|Art. 33(1)>" in text
        assert slack.fake.calls_to("chat.postMessage") == []
        assert service.asked[0].asker == Asker(platform="slack", workspace=TEAM_ID, channel=CHANNEL, user=USER)


@scenario
async def test_slash_command_with_p_answers_privately():
    service = FakeAnswerService()
    async with LoopbackSlack(service) as slack:
        status, _ = await slack.post(command_body("-p What is a processor?", response_url=slack.fake.response_url()))
        assert status == 200
        [reply] = await slack.fake.wait_for("response_url")
        assert reply.params["response_type"] == "ephemeral"
        assert "asked:" not in _all_text(reply.params)
        assert service.asked[0].question == "What is a processor?"


@pytest.mark.parametrize("text", ["help", "", "  ", "-p"])
@scenario
async def test_slash_command_help_and_empty_answer_with_usage(text):
    service = FakeAnswerService()
    async with LoopbackSlack(service) as slack:
        status, body = await slack.post(command_body(text, response_url=slack.fake.response_url()))
        assert status == 200
        assert "/gdpr -p" in json.loads(body)["text"]
        await slack.fake.assert_no_more("response_url")
        assert service.asked == []


# --- reliability -------------------------------------------------------------------------------------------


@scenario
async def test_a_retried_event_is_answered_once():
    service = FakeAnswerService()
    async with LoopbackSlack(service) as slack:
        body = event_body(mention("Is consent required?", ts="1700000000.000100"))
        first, _ = await slack.post(body)
        retry, _ = await slack.post(body, headers=sign(body) | {"X-Slack-Retry-Num": "1",
                                                                 "X-Slack-Retry-Reason": "http_timeout"})
        assert first == retry == 200
        await slack.fake.wait_for("chat.postMessage")
        await slack.fake.assert_no_more("chat.postMessage", 1)
        assert len(service.asked) == 1


@pytest.mark.parametrize("channel, channel_type", [(CHANNEL, "channel"), (DM, "im")])
@scenario
async def test_app_mention_and_message_with_the_same_ts_are_answered_once(channel, channel_type):
    service = FakeAnswerService()
    async with LoopbackSlack(service) as slack:
        event = mention("Is consent required?", ts="1700000000.000100", channel=channel)
        message = event | {"type": "message", "channel_type": channel_type}
        assert (await slack.post(event_body(message)))[0] == 200
        assert (await slack.post(event_body(event)))[0] == 200
        await slack.fake.wait_for("chat.postMessage")
        await slack.fake.assert_no_more("chat.postMessage", 1)
        assert len(service.asked) == 1


@scenario
async def test_bad_signature_and_stale_timestamp_are_refused_and_nothing_is_posted():
    service = FakeAnswerService()
    async with LoopbackSlack(service) as slack:
        body = event_body(mention("Is consent required?", ts="1700000000.000100"))
        forged = sign(body, secret="not-the-secret")
        stale = sign(body, timestamp=int(time.time()) - 600)
        assert (await slack.post(body, headers=forged))[0] == 401
        assert (await slack.post(body, headers=stale))[0] == 401
        await slack.fake.assert_no_more("chat.postMessage")
        assert service.asked == []


@pytest.mark.parametrize("event", [
    {"type": "reaction_added", "user": USER, "reaction": "thumbsup", "item": {"type": "message"}},
    {"type": "file_shared", "file_id": "F00000001", "user_id": USER, "channel_id": CHANNEL},
    {"type": "message", "subtype": "message_changed", "channel": CHANNEL, "channel_type": "channel", "ts": "1.2"},
    {"type": "message", "channel_type": "channel", "channel": CHANNEL, "user": USER, "text": "hi", "ts": "1.3"},
    {"type": "message", "channel_type": "im", "channel": DM, "bot_id": "BOTHER001", "text": "hi", "ts": "1.4"},
    {"type": "app_mention", "subtype": "bot_message", "bot_id": "BOTHER001", "channel": CHANNEL,
     "text": f"<@{BOT_USER_ID}> hi", "ts": "1.5"},
], ids=["unknown", "file_shared", "edited", "channel_chatter", "other_bot_dm", "other_bot_mention"])
@scenario
async def test_ignored_events_are_acknowledged_with_200_and_not_answered(event):
    service = FakeAnswerService()
    async with LoopbackSlack(service) as slack:
        status, _ = await slack.post(event_body(event))
        assert status == 200
        await slack.fake.assert_no_more("chat.postMessage")
        assert service.asked == []


@scenario
async def test_core_failure_posts_an_apology_with_a_reference_in_the_logs(caplog):
    caplog.set_level(logging.ERROR, logger="adapters.conversation")
    async with LoopbackSlack(FakeAnswerService(fail_with=RuntimeError("index corrupted"))) as slack:
        await slack.post(event_body(mention("Is consent required?", ts="1700000000.000100")))
        [post] = await slack.fake.wait_for("chat.postMessage")
        assert post.params["thread_ts"] == "1700000000.000100"
        reference = re.search(r"reference `([0-9a-f]{8})`", post.params["text"]).group(1)
        logged = [r for r in caplog.records if reference in r.getMessage()]
        assert logged and "index corrupted" in str(logged[0].exc_info[1])


@scenario
async def test_rejected_question_posts_the_reason():
    async with LoopbackSlack(FakeAnswerService(fail_with=RateLimited(30))) as slack:
        await slack.post(event_body(mention("Is consent required?", ts="1700000000.000100")))
        [post] = await slack.fake.wait_for("chat.postMessage")
        assert "Please try again in 30 s" in post.params["text"]
        assert post.params["thread_ts"] == "1700000000.000100"


@scenario
async def test_rejected_slash_command_tells_the_asker_privately():
    async with LoopbackSlack(FakeAnswerService(fail_with=RateLimited(30))) as slack:
        await slack.post(command_body("Is consent required?", response_url=slack.fake.response_url()))
        [reply] = await slack.fake.wait_for("response_url")
        assert reply.params["response_type"] == "ephemeral" and "try again in 30 s" in reply.params["text"]


@scenario
async def test_rate_limited_post_is_retried_after_retry_after():
    async with LoopbackSlack(FakeAnswerService()) as slack:
        slack.fake.rate_limit("chat.postMessage", retry_after_s=1)
        await slack.post(event_body(mention("Is consent required?", ts="1700000000.000100")))
        [post] = await slack.fake.wait_for("chat.postMessage")
        [limited] = [c for c in slack.fake.calls if c.method == "chat.postMessage" and c.status == 429]
        assert post.at - limited.at >= 1.0
        assert post.params["thread_ts"] == "1700000000.000100"


# --- feedback -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("click, helpful", [
    ({"action_id": FEEDBACK, "value": feedback_value("req-123", True), "element": "feedback_buttons"}, True),
    ({"action_id": FEEDBACK, "value": feedback_value("req-123", False), "element": "feedback_buttons"}, False),
    ({"action_id": FEEDBACK_UP, "value": "req-123"}, True),  # the buttons of answers posted before feedback_buttons
    ({"action_id": FEEDBACK_DOWN, "value": "req-123"}, False),
], ids=["helpful", "not-helpful", "legacy-up", "legacy-down"])
@scenario
async def test_feedback_click_is_recorded_and_acknowledged(click, helpful):
    service = FakeAnswerService()
    async with LoopbackSlack(service) as slack:
        status, _ = await slack.post(button_body(**click, response_url=slack.fake.response_url()))
        assert status == 200
        [reply] = await slack.fake.wait_for("response_url")
        assert reply.params["response_type"] == "ephemeral" and "Thanks for the feedback" in reply.params["text"]
        assert service.feedback == [
            ("req-123", helpful, Asker(platform="slack", workspace=TEAM_ID, channel=CHANNEL, user="U00000002"))
        ]


@scenario
async def test_feedback_on_an_unknown_answer_says_it_was_not_recorded():
    service = FakeAnswerService(known_request_ids=set())
    async with LoopbackSlack(service) as slack:
        await slack.post(button_body(FEEDBACK, feedback_value("req-gone", True), element="feedback_buttons",
                                     response_url=slack.fake.response_url()))
        [reply] = await slack.fake.wait_for("response_url")
        assert "feedback was not recorded" in reply.params["text"] and service.feedback == []


@scenario
async def test_a_feedback_value_this_bot_never_sent_is_ignored():
    service = FakeAnswerService()
    async with LoopbackSlack(service) as slack:
        status, _ = await slack.post(button_body(FEEDBACK, "positive_feedback", element="feedback_buttons",
                                                 response_url=slack.fake.response_url()))
        assert status == 200
        await slack.fake.assert_no_more("response_url")
        assert service.feedback == []


# --- the web app and the entry point ---------------------------------------------------------------------------


@scenario
async def test_request_url_verification_is_answered_with_the_challenge():
    async with LoopbackSlack(FakeAnswerService()) as slack:
        status, body = await slack.post(json.dumps({"type": "url_verification", "token": "t", "challenge": "c-123"}))
        assert status == 200 and json.loads(body) == {"challenge": "c-123"}


@scenario
async def test_healthz_answers_200_with_extra_details_and_routes():
    fake = FakeSlack()
    await fake.start()
    config = SlackConfig(bot_token=BOT_TOKEN, signing_secret="s", api_url=fake.api_url)

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text="answers_total 0")

    web_app = make_web_app(build_slack_app(config, Conversation(FakeAnswerService())),
                           extra_routes=[web.get("/metrics", metrics)], health=lambda: {"index": "ready"})
    runner = web.AppRunner(web_app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        async with ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/healthz") as response:
                assert response.status == 200 and await response.json() == {"status": "ok", "index": "ready"}
            async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
                assert await response.text() == "answers_total 0"
    finally:
        await runner.cleanup()
        await fake.stop()


@scenario
async def test_socket_mode_acknowledges_envelopes_and_answers_once():
    fake = FakeSlack()
    await fake.start()
    service = FakeAnswerService()
    config = SlackConfig(bot_token=BOT_TOKEN, app_token="xapp-fake", api_url=fake.api_url)
    serving = asyncio.ensure_future(serve_slack(config, Conversation(service), port=0, host="127.0.0.1"))
    try:
        await fake.wait_for_socket()
        payload = json.loads(event_body(mention("What is personal data?", ts="1700000000.000100")))
        first = await fake.push_envelope(payload)
        retry = await fake.push_envelope(payload)  # Slack redelivers when an ack is late
        for envelope_id in (first, retry):
            await fake.wait_for("socket_mode_ack", where=lambda ack, e=envelope_id: ack.get("envelope_id") == e)
        [post] = await fake.wait_for("chat.postMessage")
        assert post.params["thread_ts"] == "1700000000.000100" and f">{QUOTE}" in _all_text(post.params)
        await fake.assert_no_more("chat.postMessage", 1)
        assert len(service.asked) == 1
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        await fake.stop()


def test_http_mode_refuses_to_start_without_a_signing_secret():
    with pytest.raises(SettingsError, match="^Missing setting SLACK_SIGNING_SECRET: [^\n]+$"):
        load_settings(SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET="", SLACK_APP_TOKEN="")
    assert load_settings(SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET="", SLACK_APP_TOKEN="xapp-1").slack_app_token


def test_a_bot_token_is_required():
    with pytest.raises(SettingsError, match="SLACK_BOT_TOKEN"):
        slack_config(load_settings(SLACK_BOT_TOKEN="", SLACK_SIGNING_SECRET="s"))


def test_load_benchmark_reports_acks_answers_and_latency():
    service = FakeAnswerService()
    result = slack_load.run(argparse.Namespace(n=5, timeout=10), service=service)
    assert result["all_acked_within_3s"] and result["answered_exactly_once"] == 5
    assert result["p50_ms"] <= result["p95_ms"] and len(service.asked) == 6  # one unmeasured warm-up
    # The status is set before the core starts, so work shows well before the answer.
    assert result["p50_first_sign_ms"] <= result["p95_first_sign_ms"] <= result["max_ms"]
