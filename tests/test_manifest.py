"""app_manifest.yml declares what the Slack adapter relies on (scopes, events, /gdpr, interactivity, the agent
view), and the app listens to exactly what it declares."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from slack_sdk.web.async_client import AsyncWebClient

from adapters.conversation import Conversation
from adapters.intents import Answered, Declined, DocumentList, Help
from adapters.slack.listeners import Listeners
from adapters.slack.render import FEEDBACK_DOWN, FEEDBACK_UP, render
from core.models import AbstentionReason
from tests.fake_service import FakeAnswerService, record

MANIFEST = Path(__file__).resolve().parent.parent / "app_manifest.yml"


@pytest.fixture(scope="module")
def manifest() -> dict:
    return yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def listeners() -> Listeners:
    return Listeners(Conversation(FakeAnswerService()), AsyncWebClient(token="xoxb-unused"), None)


def test_display_information_and_bot_user(manifest):
    assert manifest["display_information"]["name"]
    assert len(manifest["display_information"]["description"]) <= 140  # Slack's limit for the short description
    assert manifest["features"]["bot_user"]["display_name"]
    assert manifest["features"]["app_home"]["messages_tab_enabled"] is True  # people can DM the bot


def test_bot_scopes(manifest):
    required = {"app_mentions:read", "chat:write", "commands", "im:history", "im:read", "im:write",
                "channels:history", "groups:history", "files:read", "users:read", "reactions:write",
                "assistant:write"}
    assert required <= set(manifest["oauth_config"]["scopes"]["bot"])


def test_bot_events(manifest):
    events = set(manifest["settings"]["event_subscriptions"]["bot_events"])
    assert {"app_mention", "message.im", "message.channels", "file_shared", "app_home_opened"} <= events


def test_every_event_declared_has_a_listener_and_every_listener_is_declared(manifest, listeners):
    declared = manifest["settings"]["event_subscriptions"]["bot_events"]
    # Slack names message subscriptions by where they come from; they all arrive as `message` events.
    assert {event.split(".")[0] for event in declared} == set(listeners.events)


def test_every_command_declared_has_a_listener_and_every_listener_is_declared(manifest, listeners):
    assert {command["command"] for command in manifest["features"]["slash_commands"]} == set(listeners.commands)


def test_every_action_the_bots_messages_carry_has_a_listener_and_interactivity_is_on(manifest, listeners):
    answer = FakeAnswerService().ask("q?")
    declined = FakeAnswerService(abstain=AbstentionReason.OFF_TOPIC).ask("q?")
    replies = (Answered(answer), Declined(declined), Help(), DocumentList((record(),)))
    carried = {element["action_id"] for reply in replies for message in render(reply) for block in message.blocks
               for element in block.get("elements", []) if "action_id" in element}
    # The per-button ids of answers posted before the feedback buttons still count their clicks.
    assert set(listeners.actions) == carried | {FEEDBACK_UP, FEEDBACK_DOWN}
    assert manifest["settings"]["interactivity"]["is_enabled"] is bool(listeners.actions)


def test_the_agent_messaging_experience(manifest):
    assert manifest["features"]["agent_view"]["agent_description"]
    assert "assistant_view" not in manifest["features"]  # an app has one or the other


def test_gdpr_slash_command(manifest):
    [command] = [c for c in manifest["features"]["slash_commands"] if c["command"] == "/gdpr"]
    assert command["description"]


def test_interactivity_and_socket_mode(manifest):
    assert manifest["settings"]["interactivity"]["is_enabled"] is True
    assert manifest["settings"]["socket_mode_enabled"] is True
