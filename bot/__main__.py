"""`python -m bot …`: the assistant's entry point."""
from __future__ import annotations

import argparse
import sys

from bot.json_logging import configure_logging
from bot.settings import SettingsError, load_settings
from core.embedding import quiet_model_loading


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bot", description="Cited answers about the GDPR.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    ask = commands.add_parser("ask", help="answer one question (or one per line of stdin) and exit")
    ask.add_argument("question", nargs="?", help="the question; omitted: read one per line from stdin")
    ask.add_argument("--json", action="store_true", help="print one JSON object per question")
    commands.add_parser("chat", help="interactive chat in the terminal (follow-ups use the conversation)")
    run = commands.add_parser("run", help="Slack or Teams when their credentials are set, else the terminal")
    run.add_argument("--port", type=int, default=None)
    slack = commands.add_parser("slack", help="serve Slack (Socket Mode with SLACK_APP_TOKEN, else HTTP)")
    slack.add_argument("--port", type=int, default=3000)
    teams = commands.add_parser("teams", help="serve Microsoft Teams (Bot Framework) on /api/messages")
    teams.add_argument("--port", type=int, default=3978)
    teams.add_argument("--host", default=None, help="default TEAMS_HOST, else 127.0.0.1")
    index = commands.add_parser("index", help="build the provision corpus and the search index")
    index.add_argument("--rebuild", action="store_true", help="re-embed even when the stored index is current")
    audit = commands.add_parser("audit", help="export the audit trail to stdout")
    audit.add_argument("--since", help="ISO date or time, e.g. 2026-11-01")
    audit.add_argument("--csv", action="store_true", help="CSV instead of JSON lines")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, json=settings.log_json)
    quiet_model_loading()
    from bot import commands

    try:
        return commands.dispatch(args, settings)
    except commands.UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
