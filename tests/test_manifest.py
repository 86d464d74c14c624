"""app_manifest.yml declares what the Slack adapter relies on: scopes, events, /gdpr, interactivity."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

MANIFEST = Path(__file__).resolve().parent.parent / "app_manifest.yml"


@pytest.fixture(scope="module")
def manifest() -> dict:
    return yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))


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
    assert {"app_mention", "message.im", "message.channels", "file_shared"} <= events


def test_gdpr_slash_command(manifest):
    [command] = [c for c in manifest["features"]["slash_commands"] if c["command"] == "/gdpr"]
    assert command["description"]


def test_interactivity_and_socket_mode(manifest):
    assert manifest["settings"]["interactivity"]["is_enabled"] is True
    assert manifest["settings"]["socket_mode_enabled"] is True
