"""The terminal: plain-text and JSON answers, a batch of questions from stdin, an interactive chat."""
from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from typing import TextIO

from adapters import wording
from core.models import Answer, Asker, Statement, Turn
from core.service import AnswerService, QuestionRejected


def render_plain(answer: Answer) -> str:
    """Each statement with its verified quotes and links; a declined answer says why; notices last."""
    lines: list[str] = []
    if answer.abstention is not None:
        lines.append(f"{wording.DECLINED_HEADER}: {wording.declined(answer.abstention.reason, answer.abstention.missing)}")
    for statement in answer.statements:
        lines += _statement_lines(statement)
    if answer.related:
        lines.append(f"{wording.RELATED_HEADER} " + ", ".join(f"{p.label} <{p.url}>" for p in answer.related))
    lines += [f"({wording.NOTICES[n]})" for n in answer.notices]
    lines.append(wording.SOURCE_LINE)
    return "\n".join(lines)


def _statement_lines(statement: Statement) -> list[str]:
    lines = [] if statement.text is None else [statement.text]
    for citation in statement.citations:
        heading = f"{citation.label} — {citation.title}" if citation.title else citation.label
        if citation.kind == "document":
            heading += f" ({wording.DOCUMENTS_HEADER.lower()})"
        lines += [heading, f"    “{citation.quote}”"] + ([f"    {citation.url}"] if citation.url else [])
    return lines


def answer_json(answer: Answer) -> dict:
    return {
        "request_id": answer.request_id,
        "question": answer.question,
        "abstained": answer.abstained,
        "reason": answer.abstention.reason.value if answer.abstention else None,
        "answer": render_plain(answer),
        "citations": [{"provision": c.label, "quote": c.quote, "url": c.url, "lang": c.lang, "kind": c.kind}
                      for c in answer.citations],
        "related": [{"provision": p.label, "url": p.url} for p in answer.related],
        "retrieved": [{"provision": p.label, "score": round(p.score, 4)} for p in answer.retrieved],
        "mode": answer.mode.value,
        "notices": [n.value for n in answer.notices],
        "timings_ms": {k: round(v, 1) for k, v in answer.timings_ms.items()},
    }


class NotText(ValueError):
    """A line of stdin that is not UTF-8 text: reported, and the batch goes on."""


def stdin_lines(stream: TextIO = sys.stdin) -> Iterator[str | NotText]:
    for number, raw in enumerate(stream.buffer, 1):
        try:
            yield raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            yield NotText(f"line {number} is not UTF-8 text; skipped")


def answer_lines(service: AnswerService, questions: Iterable[str | NotText], asker: Asker, as_json: bool,
                 out: TextIO = sys.stdout) -> int:
    """Every line answered, in order: the terminal is the operator's, so no line is ever refused for fair use."""
    for question in questions:
        if isinstance(question, NotText):
            print(json.dumps({"question": None, "error": str(question)}) if as_json else str(question), file=out,
                  flush=True)
            continue
        if not question.strip():
            continue
        try:
            answer = service.ask(question, asker=asker)
        except QuestionRejected as exc:
            reply = wording.rejected(exc)
            print(json.dumps({"question": question, "error": reply}, ensure_ascii=False) if as_json else reply,
                  file=out, flush=True)
            continue
        print(json.dumps(answer_json(answer), ensure_ascii=False) if as_json else render_plain(answer) + "\n",
              file=out, flush=True)
    return 0


def chat(service: AnswerService, asker: Asker) -> int:
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
            print(wording.rejected(exc))
            continue
        text = render_plain(answer)
        print(text + "\n")
        history += [Turn("user", question), Turn("assistant", text)]
