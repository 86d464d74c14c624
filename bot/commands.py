"""The subcommands behind `python -m bot`."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from adapters import terminal
from bot.settings import Settings, SettingsError, with_overrides
from bot.wiring import Components, NotReady, slack_config, teams_config
from core.abstain import ModelMismatch
from core.embedding import ModelLoadError
from core.models import Asker
from core.storage import StorageUnavailable


class UserError(Exception):
    """Something the person running the command must fix; printed as one line."""


def dispatch(args: argparse.Namespace, settings: Settings) -> int:
    handlers = {"ask": ask, "chat": chat, "run": run, "slack": slack, "teams": teams, "index": index, "audit": audit}
    try:
        if getattr(args, "host", None):
            settings = with_overrides(settings, teams_host=args.host)
        if args.command != "audit":  # the export only reads
            _check_writable(settings.data_dir)
        components = Components(settings)
        try:
            return handlers[args.command](args, components)
        finally:
            components.close()
    except (NotReady, ModelLoadError, ModelMismatch, SettingsError, FileNotFoundError, StorageUnavailable) as exc:
        raise UserError(str(exc)) from None


def _check_writable(data_dir: Path) -> None:
    """The index, the audit trail and the documents are written under the data dir: one that cannot be written (a
    read-only volume, another owner, a file in its place) is said in one line, not in a traceback from the store."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=data_dir):
            pass
    except OSError as exc:
        raise UserError(f"GDPRBOT_DATA_DIR {data_dir} is not a writable directory ({exc.strerror or exc}); the bot "
                        "keeps its index, audit trail and documents there") from None


def _asker() -> Asker:
    return Asker(platform="cli", user=os.environ.get("USER"))


def ask(args, components: Components) -> int:
    if args.question is not None and not args.question.strip():
        raise UserError("the question is empty")
    components.prepare()
    questions = [args.question] if args.question is not None else terminal.stdin_lines()
    return terminal.answer_lines(components.operator_conversation, questions, _asker(), args.json)


def chat(args, components: Components) -> int:
    components.prepare()
    return terminal.chat(components.operator_conversation, _asker())


def run(args, components: Components) -> int:
    settings = components.settings
    if settings.slack_bot_token:
        args.port = args.port or 3000
        return slack(args, components)
    if settings.microsoft_app_id:
        # Credentials are set, so serving beyond loopback is allowed: a container's port is published.
        args.port = args.port or 3978
        remote = Components(with_overrides(settings, teams_host="0.0.0.0"))
        try:
            return teams(args, remote)
        finally:
            remote.close()
    if sys.stdin.isatty():
        return chat(args, components)
    components.prepare()
    return terminal.answer_lines(components.operator_conversation, terminal.stdin_lines(), _asker(), as_json=False)


def slack(args, components: Components) -> int:
    from adapters.slack import run_slack
    from bot.observability import health_details, metrics_routes

    config = slack_config(components.settings)
    components.prepare()
    run_slack(config, components.conversation, args.port, extra_routes=metrics_routes(components),
              health=health_details(components), journal=components.storage.journal("slack"))
    return 0


def teams(args, components: Components) -> int:
    from adapters.teams import run_teams
    from bot.observability import health_details, metrics_routes

    components.prepare()
    run_teams(teams_config(components.settings), components.conversation, components.settings.teams_host, args.port,
              extra_routes=metrics_routes(components), health=health_details(components))
    return 0


def index(args, components: Components) -> int:
    store = components.store
    dense = components.dense_index(rebuild=args.rebuild, progress=True)
    components.lexical_indexes(rebuild=args.rebuild, progress=True)
    print(f"Index ready: {len(store.ids)} provisions in {len(store.languages)} languages, {dense.size} vectors, "
          f"model {components.embedder.model_id}")
    return 0


def audit(args, components: Components) -> int:
    from core.audit import export_command

    settings = components.settings
    if settings.database_url:
        return export_command(lambda: components.storage.audit, args.since, args.csv, sys.stdout)
    return export_command(settings.audit_path, args.since, args.csv, sys.stdout)
