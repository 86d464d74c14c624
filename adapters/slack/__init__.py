"""Slack: `app` serves, `listeners` acknowledge and hand over, `inbound` reads events, `outbox` sends, `uploads`
handles Slack's files, `render` builds Block Kit."""
from adapters.slack.app import EVENTS_PATH, SlackConfig, build_slack_app, make_web_app, run_slack, serve_slack

__all__ = ["EVENTS_PATH", "SlackConfig", "build_slack_app", "make_web_app", "run_slack", "serve_slack"]
