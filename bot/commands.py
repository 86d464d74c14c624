"""The subcommands behind `python -m bot`."""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Iterator

from bot.settings import Settings, SettingsError
from core.embedding import ModelLoadError
from bot.wiring import Components, NotReady
from core.models import Answer, Asker, Turn
from core.service import QuestionRejected


class UserError(Exception):
    """Something the person running the command must fix; printed as one line."""


def dispatch(args: argparse.Namespace, settings: Settings) -> int:
    handlers = {"ask": ask, "chat": chat, "run": run, "slack": slack, "teams": teams, "index": index, "audit": audit}
    try:
        return handlers[args.command](args, Components(settings))
    except (NotReady, ModelLoadError, SettingsError, FileNotFoundError) as exc:
        raise UserError(str(exc)) from None


def render_text(answer: Answer) -> str:
    lines = []
    for statement in answer.statements:
        lines.append(statement.text)
        for i in statement.citations:
            c = answer.citations[i]
            lines.append(f"    “{c.quote}”")
            lines.append(f"    {c.url}")
    if answer.related:
        lines.append("Related provisions (not an answer): " + ", ".join(f"{p.label} <{p.url}>" for p in answer.related))
    if answer.notice:
        lines.append(f"({answer.notice})")
    lines.append("Source: Regulation (EU) 2016/679, consolidated text with the 2018 corrigendum. Not legal advice.")
    return "\n".join(lines)


class _NotText(ValueError):
    """A line of stdin that is not UTF-8 text: reported, and the batch goes on."""


def _stdin_lines() -> Iterator[str | _NotText]:
    for number, raw in enumerate(sys.stdin.buffer, 1):
        try:
            yield raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            yield _NotText(f"line {number} is not UTF-8 text; skipped")


def _answer_lines(components: Components, questions: Iterable[str | _NotText], as_json: bool) -> int:
    # The terminal is the operator's: every line is answered, in order, without fair-use limits.
    service = components.operator_service
    asker = Asker(platform="cli", user=os.environ.get("USER"))
    for question in questions:
        if isinstance(question, _NotText):
            print(json.dumps({"question": None, "error": str(question)}) if as_json else str(question), flush=True)
            continue
        if not question.strip():
            continue
        try:
            answer = service.ask(question, asker=asker)
        except QuestionRejected as exc:
            print(json.dumps({"question": question, "error": str(exc)}, ensure_ascii=False) if as_json else str(exc),
                  flush=True)
            continue
        print(json.dumps(answer.to_json(), ensure_ascii=False) if as_json else render_text(answer) + "\n", flush=True)
    return 0


def ask(args, components: Components) -> int:
    if args.question is not None and not args.question.strip():
        raise UserError("the question is empty")
    components.prepare()
    return _answer_lines(components, [args.question] if args.question is not None else _stdin_lines(), args.json)


def chat(args, components: Components) -> int:
    service = components.operator_service
    asker = Asker(platform="cli", user=os.environ.get("USER"))
    history: list[Turn] = []
    print("Ask about the GDPR (empty line or Ctrl-D to quit).")
    while True:
        try:
            question = input("you> ").strip()
        except EOFError:
            print()
            return 0
        if not question:
            return 0
        try:
            answer = service.ask(question, history=history, asker=asker)
        except QuestionRejected as exc:
            print(str(exc))
            continue
        print(render_text(answer) + "\n")
        history += [Turn("user", question), Turn("assistant", answer.text)]


def run(args, components: Components) -> int:
    settings = components.settings
    if settings.slack_bot_token:
        args.port = args.port or 3000
        return slack(args, components)
    if settings.microsoft_app_id:
        args.port, args.host = args.port or 3978, "0.0.0.0"
        return teams(args, components)
    if sys.stdin.isatty():
        return chat(args, components)
    return _answer_lines(components, _stdin_lines(), as_json=False)


def slack(args, components: Components) -> int:
    from adapters.slack import run_slack
    from bot.observability import health_details, metrics_routes

    if not components.settings.slack_bot_token:
        raise UserError("SLACK_BOT_TOKEN is not set")
    components.prepare()
    run_slack(components.settings, components.service, args.port, extra_routes=metrics_routes(components),
              health=health_details(components), documents=components.documents)
    return 0


def teams(args, components: Components) -> int:
    from adapters.teams import run_teams
    from bot.observability import health_details, metrics_routes

    components.prepare()
    run_teams(components.settings, components.service, args.host, args.port, documents=components.documents,
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

    return export_command(components.settings.audit_path, args.since, args.csv, sys.stdout)
